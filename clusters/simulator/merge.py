"""Patch and apply semantics: JSON merge patch, strategic merge patch, server-side apply.

Merge keys and list strategies come from the per-version schemas (`x-kubernetes-patch-merge-key`,
`x-kubernetes-patch-strategy`, `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`).

Field ownership (managedFields) is approximated with sets of paths. A path is a tuple of
elements: a str is a map key, a ("k", json) tuple is an associative-list item identified by its
key fields. Atomic lists and scalars are leaves.
"""

from __future__ import annotations

import copy
import json

from clusters import schemas

_DELETE = object()


# ---------------------------------------------------------------------------------------------
# schema helpers


def _child(minor: int, node: dict, key) -> dict:
    node = schemas.resolve(minor, node)
    props = node.get("properties") or {}
    if key in props:
        return schemas.resolve(minor, props[key])
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        return schemas.resolve(minor, extra)
    return {}


def _items(minor: int, node: dict) -> dict:
    return schemas.resolve(minor, schemas.resolve(minor, node).get("items") or {})


def _list_keys(node: dict) -> list[str] | None:
    """Key fields of an associative list, None for atomic lists."""
    if node.get("x-kubernetes-list-type") == "map" and node.get("x-kubernetes-list-map-keys"):
        return list(node["x-kubernetes-list-map-keys"])
    if "merge" in str(node.get("x-kubernetes-patch-strategy", "")) and node.get("x-kubernetes-patch-merge-key"):
        return [node["x-kubernetes-patch-merge-key"]]
    return None


# Key fields the apiserver defaults, so {"containerPort": 80} and {"containerPort": 80,
# "protocol": "TCP"} name the same list item (real SSA defaults the applied configuration's keys).
_KEY_DEFAULTS = {"protocol": "TCP"}


def _item_key(item, keys: list[str]) -> str | None:
    if not isinstance(item, dict):
        return None
    present = {k: item[k] if k in item else _KEY_DEFAULTS[k] for k in keys if k in item or k in _KEY_DEFAULTS}
    if not present:
        return None
    return json.dumps(present, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------
# JSON merge patch (RFC 7386)


def json_merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = json_merge_patch(out.get(key), value)
    return out


# ---------------------------------------------------------------------------------------------
# Strategic merge patch


def strategic_merge(minor: int, node: dict, target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/") and isinstance(value, list):
            field = key.split("/", 1)[1]
            if isinstance(out.get(field), list):
                out[field] = [v for v in out[field] if v not in value]
            continue
        if key.startswith("$"):  # $setElementOrder/..., $retainKeys (handled below)
            continue
        if value is None:
            out.pop(key, None)
            continue
        sub = _child(minor, node, key)
        if isinstance(value, list):
            out[key] = _merge_list(minor, sub, out.get(key), value)
        elif isinstance(value, dict):
            out[key] = strategic_merge(minor, sub, out.get(key), value)
        else:
            out[key] = value
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _merge_list(minor: int, node: dict, target, patch: list):
    strategy = str(node.get("x-kubernetes-patch-strategy", ""))
    merge_key = node.get("x-kubernetes-patch-merge-key")
    if not isinstance(target, list) or "merge" not in strategy:
        return [item for item in copy.deepcopy(patch) if not (isinstance(item, dict) and item.get("$patch"))]
    if not merge_key:  # list of primitives with merge strategy: union, order kept
        out = list(target)
        for item in patch:
            if item not in out:
                out.append(copy.deepcopy(item))
        return out
    items = _items(minor, node)
    out = copy.deepcopy(target)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            out.append(copy.deepcopy(item))
            continue
        idx = next(
            (i for i, cur in enumerate(out) if isinstance(cur, dict) and cur.get(merge_key) == item[merge_key]), None
        )
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append(strategic_merge(minor, items, {}, item))
        else:
            out[idx] = strategic_merge(minor, items, out[idx], item)
    return out


# ---------------------------------------------------------------------------------------------
# Field sets (managedFields approximation)

_OWNED_METADATA = ("labels", "annotations", "finalizers", "ownerReferences")


def field_paths(minor: int, node: dict, obj: dict) -> dict[tuple, object]:
    """Leaf path -> value for an object, skipping server-owned parts (status, most metadata)."""
    out: dict[tuple, object] = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "status"):
            continue
        if key == "metadata":
            meta_node = _child(minor, node, "metadata")
            for mkey in _OWNED_METADATA:
                if mkey in (value or {}):
                    _walk(minor, _child(minor, meta_node, mkey), value[mkey], ("metadata", mkey), out)
            continue
        _walk(minor, _child(minor, node, key), value, (key,), out)
    return out


def status_paths(minor: int, node: dict, obj: dict | None) -> dict[tuple, object]:
    """Leaf path -> value of an object's status: the fields a status subresource write manages."""
    out: dict[tuple, object] = {}
    if isinstance(obj, dict) and obj.get("status") is not None:
        _walk(minor, _child(minor, node, "status"), obj["status"], ("status",), out)
    return out


def _walk(minor: int, node: dict, value, path: tuple, out: dict) -> None:
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            _walk(minor, _child(minor, node, key), sub, path + (key,), out)
        return
    if isinstance(value, list) and value:
        keys = _list_keys(node)
        if keys:
            items = _items(minor, node)
            keyed = [(_item_key(item, keys), item) for item in value]
            if all(k is not None for k, _ in keyed):
                for key, item in keyed:
                    item_path = path + (("k", key),)
                    out[item_path + (".",)] = None
                    for fkey, sub in item.items():
                        _walk(minor, _child(minor, items, fkey), sub, item_path + (fkey,), out)
                return
    out[path] = value


def get_path(obj, path: tuple, minor: int | None = None):
    cur = obj
    for element in path:
        if element == ".":
            return cur
        if isinstance(element, tuple):
            if not isinstance(cur, list):
                return _DELETE
            keys = list(json.loads(element[1]))
            cur = next((i for i in cur if _item_key(i, keys) == element[1]), _DELETE)
        elif isinstance(cur, dict) and element in cur:
            cur = cur[element]
        else:
            return _DELETE
        if cur is _DELETE:
            return _DELETE
    return cur


def remove_path(obj: dict, path: tuple) -> None:
    """Remove the field at path (a "." path removes the whole list item)."""
    if path and path[-1] == ".":
        path = path[:-1]
    parent = get_path(obj, path[:-1]) if len(path) > 1 else obj
    last = path[-1]
    if isinstance(last, tuple) and isinstance(parent, list):
        keys = list(json.loads(last[1]))
        for i, item in enumerate(parent):
            if _item_key(item, keys) == last[1]:
                parent.pop(i)
                break
    elif isinstance(parent, dict):
        parent.pop(last, None)
    _prune_empty(obj, path[:-1])


def _prune_empty(obj: dict, path: tuple) -> None:
    while path:
        holder = get_path(obj, path)
        if holder in ({}, []):
            parent = get_path(obj, path[:-1]) if len(path) > 1 else obj
            last = path[-1]
            if isinstance(parent, dict) and not isinstance(last, tuple):
                parent.pop(last, None)
            path = path[:-1]
            continue
        break


def fields_v1(paths) -> dict:
    root: dict = {}
    for path in sorted(paths, key=lambda p: [str(e) for e in p]):
        cur = root
        for element in path:
            if element == ".":
                name = "."
            elif isinstance(element, tuple):
                name = "k:" + element[1]
            else:
                name = "f:" + element
            cur = cur.setdefault(name, {})
    return root


def paths_from_fields_v1(tree: dict, prefix: tuple = ()) -> set[tuple]:
    out: set[tuple] = set()
    for name, sub in (tree or {}).items():
        if name == ".":
            out.add(prefix + (".",))
            continue
        if name.startswith("k:"):
            element = ("k", json.dumps(json.loads(name[2:]), sort_keys=True, separators=(",", ":")))
        elif name.startswith("f:"):
            element = name[2:]
        else:
            continue
        if sub:
            out |= paths_from_fields_v1(sub, prefix + (element,))
        else:
            out.add(prefix + (element,))
    return out


def path_text(path: tuple) -> str:
    out = ""
    for element in path:
        if element == ".":
            continue
        if isinstance(element, tuple):
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(element[1]).items()) + "]"
        else:
            out += "." + element
    return out


# ---------------------------------------------------------------------------------------------
# Apply (server-side apply, approximated)


def apply_merge(minor: int, node: dict, live, applied):
    """Merge an applied configuration into a live object: maps merge, associative lists merge
    by key, atomic lists and scalars are replaced. Returns a new object; neither argument changes."""
    if not isinstance(applied, dict) or not isinstance(live, dict):
        return copy.deepcopy(applied)
    return apply_merge_into(minor, node, copy.deepcopy(live), applied)


def apply_merge_into(minor: int, node: dict, out: dict, applied: dict) -> dict:
    """``apply_merge`` into ``out``, a private copy changed in place (one copy of the live object per
    apply, not one per level of nesting). Returns ``out``."""
    for key, value in applied.items():
        sub = _child(minor, node, key)
        if isinstance(value, dict):
            current = out.get(key)
            out[key] = (
                apply_merge_into(minor, sub, current, value) if isinstance(current, dict) else copy.deepcopy(value)
            )
        elif isinstance(value, list):
            keys = _list_keys(sub)
            current = out.get(key)
            if keys and isinstance(current, list):
                items = _items(minor, sub)
                merged = list(current)
                for item in value:
                    ik = _item_key(item, keys)
                    idx = next(
                        (i for i, cur in enumerate(merged) if ik is not None and _item_key(cur, keys) == ik), None
                    )
                    if idx is None:
                        merged.append(copy.deepcopy(item))
                    elif isinstance(item, dict) and isinstance(merged[idx], dict):
                        merged[idx] = apply_merge_into(minor, items, merged[idx], item)
                    else:
                        merged[idx] = copy.deepcopy(item)
                out[key] = merged
            else:
                out[key] = copy.deepcopy(value)
        else:
            out[key] = value
    return out
