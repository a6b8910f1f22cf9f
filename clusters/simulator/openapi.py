"""OpenAPI v3 documents: /openapi/v3 (the index) and /openapi/v3/<group-version>, per minor.

kubectl reads them to learn whether the server validates fields itself: the PATCH operation of a
kind that accepts the ``fieldValidation`` query parameter. When it does, ``kubectl apply`` (and
create, replace) sends fieldValidation=Strict and leaves validation to the server, which the
simulator does against the version's schema as a real apiserver does. Without OpenAPI, kubectl
insists on downloading the v2 document to validate on its side and stops, so `--validate=false`
was needed.

The documents describe the operations of every kind the cluster serves (built-in ones and those
of its CRDs) with their query parameters, and in ``components.schemas`` the built-in kinds'
schemas with every definition they refer to, converted from kubernetes-validate's JSON Schema
(with descriptions, x-kubernetes-group-version-kind and the patch strategies) to OpenAPI 3.0 as
an apiserver publishes it: ``$ref`` into components (inside ``allOf`` when the property says
more), one type per schema, IntOrString as a string of format int-or-string. So `kubectl explain`
works. A CRD's kinds have operations but no schema. A group-version document is built when first
asked for and kept (one per minor and group-version); the index's hashes come from what each
document is made of, not from its bytes.
"""

from __future__ import annotations

import functools
import hashlib
import json

from clusters import schemas
from clusters.simulator import discovery

_WRITE_PARAMS = [
    ("dryRun", "When present, indicates that modifications should not be persisted."),
    ("fieldManager", "A name associated with the actor or entity that is making these changes."),
    ("fieldValidation", "How the server handles unknown or duplicate fields: Ignore, Warn or Strict."),
]
_FORCE = ("force", 'Force is going to "force" Apply requests (re-acquire conflicting fields).')


def _parameter(name: str, description: str, kind: str = "string") -> dict:
    return {"name": name, "in": "query", "description": description, "schema": {"type": kind, "uniqueItems": True}}


def _operation(res: schemas.ApiResource, action: str, verb: str, *, scope: str, extra=()) -> dict:
    group = "".join(part.capitalize() for part in res.group.split(".")) if res.group else "Core"
    op = {
        "operationId": f"{verb}{group}{res.version.capitalize()}{scope}{res.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": res.group, "version": res.version, "kind": res.kind},
        "responses": {"200": {"description": "OK"}, "401": {"description": "Unauthorized"}},
    }
    params = [*(_WRITE_PARAMS if action in ("post", "put", "patch") else ()), *extra]
    if params:
        op["parameters"] = [_parameter(name, text, "boolean" if name == "force" else "string") for name, text in params]
    return op


def _paths(res: schemas.ApiResource) -> dict:
    base = discovery_prefix(res.group_version)
    scope = "Namespaced" if res.namespaced else ""
    collection = f"{base}/namespaces/{{namespace}}/{res.plural}" if res.namespaced else f"{base}/{res.plural}"
    item = f"{collection}/{{name}}"
    verbs = set(res.verbs)
    paths: dict = {collection: {}, item: {}}
    if "list" in verbs:
        paths[collection]["get"] = _operation(res, "list", "list", scope=scope)
    if "create" in verbs:
        paths[collection]["post"] = _operation(res, "post", "create", scope=scope)
    if "get" in verbs:
        paths[item]["get"] = _operation(res, "get", "read", scope=scope)
    if "update" in verbs:
        paths[item]["put"] = _operation(res, "put", "replace", scope=scope)
    if "patch" in verbs:
        paths[item]["patch"] = _operation(res, "patch", "patch", scope=scope, extra=[_FORCE])
    if "delete" in verbs:
        paths[item]["delete"] = _operation(res, "delete", "delete", scope=scope)
    return {path: ops for path, ops in paths.items() if ops}


def discovery_prefix(group_version: str) -> str:
    return f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"


def _by_group_version(
    minor: int, extra: tuple[schemas.ApiResource, ...], config: tuple = ()
) -> dict[str, list[schemas.ApiResource]]:
    out = {gv: list(resources) for gv, resources in discovery.by_group_version(minor, config).items()}
    for res in extra:
        out.setdefault(res.group_version, []).append(res)
    return out


def _dump(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


# --- schemas -------------------------------------------------------------------------------------

_OWN_SCHEMAS = {  # definitions kubernetes-validate writes as a oneOf; an apiserver as a string
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
}


def _openapi_schema(node):
    """One JSON Schema node of kubernetes-validate's definitions as OpenAPI 3.0."""
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "$ref":
            continue
        if key == "type" and isinstance(value, list):  # ["string", "null"]: nullable in JSON Schema
            value = next((t for t in value if t != "null"), None)
            if value is None:
                continue
        elif key == "properties":
            value = {name: _openapi_schema(sub) for name, sub in value.items()}
        elif key in ("items", "not") or (key == "additionalProperties" and isinstance(value, dict)):
            value = _openapi_schema(value)
        elif key in ("allOf", "oneOf", "anyOf"):
            value = [_openapi_schema(sub) for sub in value]
        elif key == "enum":
            value = [v for v in value if v is not None]
        out[key] = value
    if "$ref" not in node:
        return out
    target = {"$ref": "#/components/schemas/" + node["$ref"].rsplit("/", 1)[-1]}
    return {"allOf": [target], **out} if out else target


def _referenced(node, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref.rsplit("/", 1)[-1])
        for value in node.values():
            _referenced(value, found)
    elif isinstance(node, list):
        for value in node:
            _referenced(value, found)


def _component_schemas(minor: int, group_version: str) -> dict:
    """The schemas of a group-version's kinds and every definition they refer to."""
    definitions = schemas.documented_definitions(minor)
    group, version = schemas.split_api_version(group_version)
    todo = [
        name
        for name, node in definitions.items()
        if any(
            gvk.get("group", "") == group and gvk.get("version") == version
            for gvk in node.get("x-kubernetes-group-version-kind") or ()
        )
    ]
    names: set[str] = set()
    while todo:
        name = todo.pop()
        if name in names or name not in definitions:
            continue
        names.add(name)
        found: set[str] = set()
        _referenced(definitions[name], found)
        todo.extend(found - names)
    out = {}
    for name in sorted(names):
        node = definitions[name]
        if name in _OWN_SCHEMAS:
            node = {**({"description": node["description"]} if "description" in node else {}), **_OWN_SCHEMAS[name]}
        out[name] = _openapi_schema(node)
    return out


# --- documents -----------------------------------------------------------------------------------


def _group_versions(
    minor: int, extra: tuple[schemas.ApiResource, ...], config: tuple = ()
) -> dict[str, tuple[schemas.ApiResource, ...]]:
    return {gv: tuple(resources) for gv, resources in sorted(_by_group_version(minor, extra, config).items())}


@functools.lru_cache(maxsize=128)
def _group_version_document(minor: int, group_version: str, resources: tuple[schemas.ApiResource, ...]) -> bytes:
    paths: dict = {}
    for res in resources:
        paths.update(_paths(res))
    return _dump(
        {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": f"v1.{minor}.0"},
            "paths": paths,
            "components": {"schemas": _component_schemas(minor, group_version)},
        }
    )


@functools.lru_cache(maxsize=256)
def _index(minor: int, extra: tuple[schemas.ApiResource, ...], config: tuple = ()) -> bytes:
    index = {}
    for gv, resources in _group_versions(minor, extra, config).items():
        made_of = repr((minor, gv, resources)).encode()  # what the document is built from
        key = discovery_prefix(gv).lstrip("/")
        index[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={hashlib.sha512(made_of).hexdigest()[:32].upper()}"}
    return _dump({"paths": index})


def document(minor: int, path: str, extra: list[schemas.ApiResource] = (), config: tuple = ()) -> bytes | None:
    """The index ('') or a group-version document ('apis/apps/v1', 'api/v1') of what a cluster with
    runtime config ``config`` serves; None = 404."""
    extra, path = tuple(extra), path.strip("/")
    if not path:
        return _index(minor, extra, config)
    for gv, resources in _group_versions(minor, extra, config).items():
        if discovery_prefix(gv).lstrip("/") == path:
            return _group_version_document(minor, gv, resources)
    return None
