"""Per-cluster overrides: RFC 6902 ``add``/``remove``/``replace`` on JSON pointers. Pure.

Stored shape (KubeFed's)::

    [{"clusterName": "c1", "clusterOverrides": [{"op": "replace", "path": "/spec/replicas", "value": 5}]}]

``op`` defaults to ``replace``. Patches are applied with the ``jsonpatch`` library; a ``replace``
or ``remove`` on a path that does not exist is an error naming the path and the cluster.
"""

import copy
from collections.abc import Mapping

import jsonpatch
import jsonpointer

from fedportal.text import is_number

# jsonpointer's errors quote the whole mapping a missing member was looked up in ("member 'x' not
# found in {...}"): on a Secret, its data. Its documented switch keeps them to the member's name.
jsonpointer.VERBOSE_EXCEPTIONS = False

OPS = ("add", "remove", "replace")
DEFAULT_OP = "replace"
# KubeFed refuses overrides of the object's identity; so do we.
FORBIDDEN_PATHS = (
    "",
    "/apiVersion",
    "/kind",
    "/metadata",
    "/metadata/name",
    "/metadata/namespace",
    "/metadata/generateName",
    "/metadata/resourceVersion",
    "/metadata/uid",
)


class OverrideError(ValueError):
    """An override that is malformed or does not apply; carries the cluster and path."""

    def __init__(self, message: str, *, cluster: str = "", path: str = ""):
        super().__init__(message)
        self.cluster = cluster
        self.path = path


def normalize_operation(raw, *, cluster: str = "") -> dict:
    if not isinstance(raw, Mapping):
        raise OverrideError(
            f"Override for cluster {cluster!r} must be a mapping with op, path and value.", cluster=cluster
        )
    unknown = set(raw) - {"op", "path", "value"}
    if unknown:
        raise OverrideError(f"Override for cluster {cluster!r}: unknown field {sorted(unknown)[0]!r}.", cluster=cluster)
    op = raw.get("op") or DEFAULT_OP
    path = raw.get("path")
    if op not in OPS:
        raise OverrideError(
            f"Override for cluster {cluster!r}: op {op!r} is not one of add, remove, replace.",
            cluster=cluster,
            path=path or "",
        )
    if not isinstance(path, str) or not path.startswith("/"):
        raise OverrideError(
            f"Override for cluster {cluster!r}: path {path!r} is not a JSON pointer (it must start with '/').",
            cluster=cluster,
            path=path if isinstance(path, str) else "",
        )
    try:
        jsonpointer.JsonPointer(path)
    except jsonpointer.JsonPointerException as exc:
        raise OverrideError(
            f"Override for cluster {cluster!r}: path {path!r} is invalid: {exc}", cluster=cluster, path=path
        ) from exc
    if path.rstrip("/") in FORBIDDEN_PATHS:
        raise OverrideError(
            f"Override for cluster {cluster!r}: path {path!r} cannot be overridden.", cluster=cluster, path=path
        )
    if op in ("add", "replace") and "value" not in raw:
        raise OverrideError(
            f"Override for cluster {cluster!r}: op {op} on {path} needs a value.", cluster=cluster, path=path
        )
    result = {"op": op, "path": path}
    if op != "remove":
        result["value"] = raw["value"]
    return result


def normalize_overrides(raw) -> list[dict]:
    """Validate the stored shape; merge repeated cluster entries (the form gives a row per operation);
    refuse a path given twice for one cluster; sort by cluster name."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise OverrideError("overrides must be a list of {clusterName, clusterOverrides}.")
    merged: dict[str, list] = {}
    for index, entry in enumerate(raw):
        if not isinstance(entry, Mapping):
            raise OverrideError(f"overrides[{index}] must be a mapping with clusterName and clusterOverrides.")
        cluster = entry.get("clusterName")
        if not isinstance(cluster, str) or not cluster.strip():
            raise OverrideError(f"overrides[{index}] has no clusterName.")
        ops = entry.get("clusterOverrides") or []
        if not isinstance(ops, list):
            raise OverrideError(f"overrides[{index}].clusterOverrides must be a list.", cluster=cluster)
        merged.setdefault(cluster.strip(), []).extend(normalize_operation(op, cluster=cluster) for op in ops)
    for name, ops in merged.items():
        _refuse_repeated_paths(name, ops)
    return [{"clusterName": name, "clusterOverrides": ops} for name, ops in sorted(merged.items()) if ops]


def _refuse_repeated_paths(cluster: str, operations: list[dict]) -> None:
    """KubeFed refuses a path given twice for one cluster (pkg/controller/util/overrides.go): which
    value wins would depend on the order of rows."""
    seen = set()
    for operation in operations:
        path = operation["path"]
        if path in seen:
            raise OverrideError(
                f"Override for cluster {cluster!r}: path {path} is given more than once; keep one.",
                cluster=cluster,
                path=path,
            )
        seen.add(path)


def operations_for(overrides: list[dict], cluster: str) -> list[dict]:
    for entry in overrides:
        if entry["clusterName"] == cluster:
            return entry["clusterOverrides"]
    return []


def apply_operations(manifest: dict, operations: list[dict], *, cluster: str) -> dict:
    """A new manifest with ``operations`` applied in order; the input is not modified."""
    document = copy.deepcopy(manifest)
    for operation in operations:
        path, op = operation["path"], operation.get("op", DEFAULT_OP)
        if op in ("replace", "remove") and not _path_exists(document, path):
            raise OverrideError(
                f"Override for cluster {cluster!r}: path {path} does not exist in the rendered template, "
                f"so it cannot be {'replaced' if op == 'replace' else 'removed'}.",
                cluster=cluster,
                path=path,
            )
        try:
            document = jsonpatch.JsonPatch([operation]).apply(document, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            raise OverrideError(
                f"Override for cluster {cluster!r}: {op} {path} failed: {exc}", cluster=cluster, path=path
            ) from exc
    if operations:
        _check_metadata(document, cluster)
    return document


def _check_metadata(document, cluster: str) -> None:
    """What the overrides left of the object's metadata is still one FedPortal can label: a mapping,
    its labels and annotations mappings (an override could replace any of them with a string)."""
    metadata = document.get("metadata") if isinstance(document, Mapping) else None
    if metadata is not None and not isinstance(metadata, Mapping):
        raise OverrideError(f"Override for cluster {cluster!r}: metadata must stay a mapping.", cluster=cluster)
    for field in ("labels", "annotations"):
        value = (metadata or {}).get(field)
        if value is not None and not isinstance(value, Mapping):
            raise OverrideError(
                f"Override for cluster {cluster!r}: metadata.{field} must stay a mapping of names to values.",
                cluster=cluster,
                path=f"/metadata/{field}",
            )


def apply_overrides(manifest: dict, overrides: list[dict], *, cluster: str) -> dict:
    return apply_operations(manifest, operations_for(overrides, cluster), cluster=cluster)


def check_overrides(template: dict, overrides: list[dict]) -> list[OverrideError]:
    """Every problem applying each cluster's overrides to ``template`` (empty when all apply)."""
    problems = []
    for entry in overrides:
        try:
            apply_operations(template, entry["clusterOverrides"], cluster=entry["clusterName"])
        except OverrideError as exc:
            problems.append(exc)
    return problems


def _path_exists(document, path: str) -> bool:
    try:
        pointer = jsonpointer.JsonPointer(path)
    except jsonpointer.JsonPointerException:
        return False
    current = document
    for part in pointer.parts:
        if isinstance(current, Mapping):
            if part not in current:
                return False
            current = current[part]
        elif isinstance(current, list):
            # an array index is ASCII digits (RFC 6901)
            if not is_number(part) or int(part) >= len(current) or (len(part) > 1 and part.startswith("0")):
                return False
            current = current[int(part)]
        else:
            return False
    return True
