"""Field-level and text diffs between plain objects. Pure.

A path is a JSON pointer ("/spec/template/spec/containers/0/image"), so a diff row can be shown,
stored and fed back to jsonpatch without translation.
"""

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

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
    other managers' fields) are not drift. ``before`` is what we applied, ``after`` what runs."""
    changes: list[FieldChange] = []
    _diff(desired, live, "", tuple(ignore), changes, subset=True)
    return changes


def _diff(before, after, path, ignore, changes, *, subset):
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
                _diff(b, a, child, ignore, changes, subset=subset)
        return
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (b, a) in enumerate(zip(before, after)):
            _diff(b, a, f"{path}/{index}", ignore, changes, subset=subset)
        return
    if before != after and not (subset and _equal_scalar(before, after)):
        changes.append(FieldChange(path or "/", before, after, "changed"))


def _equal_scalar(desired, live) -> bool:
    # The API server normalises some scalars (int vs. "1" quantities are left alone on purpose).
    return isinstance(desired, (int, float)) and isinstance(live, (int, float)) and desired == live


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
