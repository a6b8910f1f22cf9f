"""Field-level and text diffs between plain objects. Pure.

A path is a JSON pointer ("/spec/template/spec/containers/0/image"), so a diff row can be shown,
stored and fed back to jsonpatch without translation.
"""

import base64
import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from decimal import Decimal

from federation.manifests import dump_yaml

_MISSING = object()

# Fields the API server fills in or owns; never drift, never part of a comparison.
SERVER_POPULATED = (
    "/status",
    "/metadata/resourceVersion",
    "/metadata/uid",
    "/metadata/generation",
    "/metadata/creationTimestamp",
    "/metadata/managedFields",
    "/metadata/selfLink",
    "/metadata/deletionTimestamp",
    "/metadata/deletionGracePeriodSeconds",
)


@dataclass(frozen=True)
class FieldChange:
    path: str
    before: object = None
    after: object = None
    change: str = "changed"  # added / removed / changed

    def as_dict(self) -> dict:
        return asdict(self)


def escape(token) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def _ignored(path: str, ignore: Iterable[str]) -> bool:
    return any(path == prefix or path.startswith(prefix + "/") for prefix in ignore)


def diff_objects(before, after, *, ignore: Iterable[str] = SERVER_POPULATED, path: str = "") -> list[FieldChange]:
    """Every leaf that differs between two objects (added, removed, changed)."""
    ignore = tuple(ignore)
    changes: list[FieldChange] = []
    _diff(before, after, path, ignore, changes, subset=False)
    return changes


def diff_desired_live(desired, live, *, ignore: Iterable[str] = SERVER_POPULATED) -> list[FieldChange]:
    """Fields we set whose live value differs. Fields only the live object has (server defaults,
    other managers' fields) are not drift. ``before`` is what we applied, ``after`` what runs.
    What the API server rewrites on the way in is compared as it stores it: resource quantities by
    value (``cpu: 1`` is stored ``"1"``, ``1024Mi`` as ``1Gi``, ``0.5`` as ``500m``) and a Secret's
    ``stringData``, which it merges into ``data`` (base64) and never returns."""
    changes: list[FieldChange] = []
    _diff(_as_stored(desired), live, "", tuple(ignore), changes, subset=True, quantities=builtin_api(desired))
    return changes


def _as_stored(desired):
    """``desired`` with a Secret's stringData moved into data, as kube-apiserver stores it."""
    if not isinstance(desired, Mapping) or desired.get("kind") != "Secret" or not desired.get("stringData"):
        return desired
    string_data = desired["stringData"]
    if not isinstance(string_data, Mapping):
        return desired
    data = dict(desired.get("data") or {})
    for key, value in string_data.items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    return {**{k: v for k, v in desired.items() if k != "stringData"}, "data": data}


def _diff(before, after, path, ignore, changes, *, subset, quantities=False):
    if path and _ignored(path, ignore):
        return
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        keys = list(before) if subset else sorted(set(before) | set(after), key=str)
        for key in keys:
            child = f"{path}/{escape(key)}"
            if _ignored(child, ignore):
                continue
            b, a = before.get(key, _MISSING), after.get(key, _MISSING)
            if b is _MISSING:
                changes.append(FieldChange(child, None, a, "added"))
            elif a is _MISSING:
                if subset and b in (None, {}, []):
                    continue  # an empty value we sent is the same as absent on the server
                changes.append(FieldChange(child, b, None, "removed"))
            else:
                _diff(b, a, child, ignore, changes, subset=subset, quantities=quantities)
        return
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (b, a) in enumerate(zip(before, after)):
            _diff(b, a, f"{path}/{index}", ignore, changes, subset=subset, quantities=quantities)
        return
    if before != after and not (subset and _equal_scalar(before, after, path, quantities=quantities)):
        changes.append(FieldChange(path or "/", before, after, "changed"))


def _equal_scalar(desired, live, path: str, *, quantities: bool) -> bool:
    """The same value as the API server stores it: numbers of either type, and (``quantities``: a
    built-in kind) a resource quantity in its canonical form (``1`` -> ``"1"``, ``1024Mi`` -> ``"1Gi"``)."""
    if isinstance(desired, (int, float)) and isinstance(live, (int, float)) and desired == live:
        return True
    if not quantities or not _quantity_path(path):
        return False
    wanted, stored = quantity_value(desired), quantity_value(live)
    return wanted is not None and wanted == stored


# Where the built-in kinds hold a resource.Quantity: a container's (or pod's, or claim's)
# resources.limits/requests, ResourceQuota's hard, LimitRange's limits[].max/min/default/...,
# PersistentVolume's capacity, pod overhead and RuntimeClass's overhead.podFixed, emptyDir's sizeLimit.
# A custom resource keeps every value as written, so nothing of it is compared by value.
_LIMIT_RANGE_MAPS = frozenset({"max", "min", "default", "defaultRequest", "maxLimitRequestRatio"})


def _quantity_path(path: str) -> bool:
    parts = path.split("/")
    if len(parts) < 3:
        return False
    parent = parts[-2]
    return (
        (parent in ("limits", "requests") and parts[-3] == "resources")
        or parent in ("hard", "capacity", "overhead", "podFixed")
        or (parent in _LIMIT_RANGE_MAPS and len(parts) >= 5 and parts[-4] == "limits")
        or parts[-1] == "sizeLimit"
    )


def builtin_api(manifest) -> bool:
    """Whether ``manifest``'s apiVersion is a built-in API group (core, a group without a dot, or
    one under k8s.io), not a custom resource's."""
    api_version = manifest.get("apiVersion") if isinstance(manifest, Mapping) else None
    if not isinstance(api_version, str):
        return False
    group = api_version.rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")


_QUANTITY_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def quantity_value(value) -> Decimal | None:
    """The value of a Kubernetes resource quantity (k8s.io/apimachinery resource.Quantity's
    serialization: a decimal number with a binary-SI, decimal-SI or exponent suffix), None when
    ``value`` is not one. Numbers are quantities too (a manifest's ``cpu: 1``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    match = _QUANTITY_RE.match(value.strip())
    if not match:
        return None
    number, suffix, exponent = Decimal(match.group(1)), match.group(2) or "", match.group(3)
    if exponent is not None:
        return number.scaleb(int(exponent))
    if suffix in _BINARY:
        return number * (1024 ** _BINARY[suffix])
    return number.scaleb(_DECIMAL[suffix])


def strip_server_fields(obj: Mapping) -> dict:
    """A copy without server-populated fields, for showing a live object next to ours."""
    result = {key: value for key, value in obj.items() if key != "status"}
    metadata = dict(result.get("metadata") or {})
    for pointer in SERVER_POPULATED:
        if pointer.startswith("/metadata/"):
            metadata.pop(pointer.rsplit("/", 1)[1], None)
    if metadata:
        result["metadata"] = metadata
    return result


def unified_yaml_diff(before, after, *, before_label: str = "before", after_label: str = "after") -> str:
    """A unified diff of the two objects as YAML ('' when equal)."""
    before_text = dump_yaml(before).splitlines(keepends=True) if before is not None else []
    after_text = dump_yaml(after).splitlines(keepends=True) if after is not None else []
    return "".join(difflib.unified_diff(before_text, after_text, before_label, after_label))
