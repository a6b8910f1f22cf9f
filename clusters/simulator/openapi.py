"""OpenAPI v3 documents: /openapi/v3 (the index) and /openapi/v3/<group-version>, per minor.

kubectl reads them to learn whether the server validates fields itself: the PATCH operation of a
kind that accepts the ``fieldValidation`` query parameter. When it does, ``kubectl apply`` (and
create, replace) sends fieldValidation=Strict and leaves validation to the server, which the
simulator does against the version's schema as a real apiserver does. Without OpenAPI, kubectl
insists on downloading the v2 document to validate on its side and stops, so `--validate=false`
was needed.

The documents describe the operations of every kind the cluster serves (built-in ones and those
of its CRDs) with their query parameters, not the kinds' schemas (``components.schemas`` is
empty): kubectl then builds strategic merge patches from its compiled-in types, as it does for a
server without OpenAPI, and `kubectl explain` has nothing to show.
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
_FORCE = ("force", "Force is going to \"force\" Apply requests (re-acquire conflicting fields).")


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


def _by_group_version(minor: int, extra: tuple[schemas.ApiResource, ...]) -> dict[str, list[schemas.ApiResource]]:
    out = {gv: list(resources) for gv, resources in discovery.by_group_version(minor).items()}
    for res in extra:
        out.setdefault(res.group_version, []).append(res)
    return out


def _dump(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


@functools.lru_cache(maxsize=256)
def _documents(minor: int, extra: tuple[schemas.ApiResource, ...]) -> dict[str, bytes]:
    """Every document of one minor (plus a cluster's custom kinds): '' is the index."""
    docs: dict[str, bytes] = {}
    index: dict = {}
    for gv, resources in sorted(_by_group_version(minor, extra).items()):
        paths: dict = {}
        for res in resources:
            paths.update(_paths(res))
        doc = _dump({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": f"v1.{minor}.0"},
                     "paths": paths, "components": {"schemas": {}}})
        key = discovery_prefix(gv).lstrip("/")
        docs[key] = doc
        digest = hashlib.sha512(doc).hexdigest()[:32].upper()
        index[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    docs[""] = _dump({"paths": index})
    return docs


def document(minor: int, path: str, extra: list[schemas.ApiResource] = ()) -> bytes | None:
    """The index ('') or a group-version document ('apis/apps/v1', 'api/v1'); None = 404."""
    return _documents(minor, tuple(extra)).get(path.strip("/"))
