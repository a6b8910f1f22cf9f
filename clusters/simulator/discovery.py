"""Discovery documents (/api, /api/v1, /apis, /apis/<g>, /apis/<g>/<v>) per Kubernetes minor.

Built from the resources a default apiserver of that minor serves (clusters.served_apis: GA and
the legacy betas; alpha and newer betas only when a cluster's ``runtimeConfig`` switches them on)
and cached per (minor, runtimeConfig), so 1,000 clusters on nine versions share nine copies.
"""

from __future__ import annotations

import functools
import json
import re

from clusters import schemas, served_apis

from . import capi
from .scale import SCALED_KINDS

_SHORT_NAMES = {
    "configmaps": ["cm"],
    "namespaces": ["ns"],
    "nodes": ["no"],
    "pods": ["po"],
    "services": ["svc"],
    "serviceaccounts": ["sa"],
    "secrets": [],
    "deployments": ["deploy"],
    "replicasets": ["rs"],
    "daemonsets": ["ds"],
    "statefulsets": ["sts"],
    "persistentvolumeclaims": ["pvc"],
    "persistentvolumes": ["pv"],
    "ingresses": ["ing"],
    "horizontalpodautoscalers": ["hpa"],
    "cronjobs": ["cj"],
    "endpoints": ["ep"],
    "events": ["ev"],
    "limitranges": ["limits"],
    "resourcequotas": ["quota"],
    "networkpolicies": ["netpol"],
    "poddisruptionbudgets": ["pdb"],
    "priorityclasses": ["pc"],
    "storageclasses": ["sc"],
    "customresourcedefinitions": ["crd", "crds"],
    "replicationcontrollers": ["rc"],
    "componentstatuses": ["cs"],
    "certificatesigningrequests": ["csr"],
}
_CATEGORIES = {
    "pods",
    "services",
    "deployments",
    "replicasets",
    "daemonsets",
    "statefulsets",
    "jobs",
    "cronjobs",
    "replicationcontrollers",
    "horizontalpodautoscalers",
}


def version_priority(version: str) -> tuple:
    """Kubernetes' version ordering: GA > beta > alpha, then by number."""
    match = re.match(r"^v(\d+)(?:(alpha|beta)(\d+))?$", version)
    if not match:
        return (-1, 0, 0, version)
    level = {"alpha": 0, "beta": 1, None: 2}[match.group(2)]
    return (level, int(match.group(1)), int(match.group(3) or 0), version)


@functools.cache
def by_group_version(minor: int, config: tuple = ()) -> dict[str, list[schemas.ApiResource]]:
    """The built-in kinds served at ``minor`` with runtime config ``config``, by group-version."""
    out: dict[str, list[schemas.ApiResource]] = {}
    for res in served_apis.served_resources(minor, config):
        out.setdefault(res.group_version, []).append(res)
    return out


@functools.cache
def _groups(minor: int, config: tuple = ()) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for gv in by_group_version(minor, config):
        group, version = schemas.split_api_version(gv)
        if group:
            groups.setdefault(group, []).append(version)
    return {g: sorted(vs, key=version_priority, reverse=True) for g, vs in sorted(groups.items())}


def _group_doc(group: str, versions: list[str]) -> dict:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def _resource_doc(res: schemas.ApiResource) -> list[dict]:
    doc = {
        "name": res.plural,
        "singularName": res.kind.lower(),
        "namespaced": res.namespaced,
        "kind": res.kind,
        "verbs": list(res.verbs),
    }
    if res.plural in _SHORT_NAMES and _SHORT_NAMES[res.plural]:
        doc["shortNames"] = _SHORT_NAMES[res.plural]
    if res.plural in _CATEGORIES:
        doc["categories"] = ["all"]
    if capi.schema_for(res.group, res.version, res.plural) is not None:  # from Cluster API's CRD
        names = capi.crd_data(res.plural)["names"]
        doc.update({k: names[k] for k in ("shortNames", "categories") if names.get(k)})
    docs = [doc]
    if res.verbs != ("create",) and res.kind not in ("ConfigMap", "Secret", "ServiceAccount", "ComponentStatus"):
        docs.append(
            {
                "name": f"{res.plural}/status",
                "singularName": "",
                "namespaced": res.namespaced,
                "kind": res.kind,
                "verbs": ["get", "patch", "update"],
            }
        )
    if res.kind in SCALED_KINDS:
        docs.append(
            {
                "name": f"{res.plural}/scale",
                "singularName": "",
                "namespaced": res.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }
        )
    return docs


def _resource_list(gv: str, resources: list[schemas.ApiResource]) -> bytes:
    """/api/v1 or /apis/<group>/<version>: the APIResourceList of one group version."""
    return _dump(
        {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": gv,
            "resources": [d for res in resources for d in _resource_doc(res)],
        }
    )


@functools.cache
def document(minor: int, path: str, config: tuple = ()) -> bytes | None:
    """Serialised discovery document for a path like 'api', 'api/v1', 'apis/apps/v1'; None = 404."""
    if path == "api":
        return _dump(
            {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}],
            }
        )
    if path == "apis":
        return _dump(
            {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [_group_doc(g, vs) for g, vs in _groups(minor, config).items()],
            }
        )
    parts = path.split("/")
    if parts[0] == "api" and len(parts) == 2:
        gv = parts[1]
    elif parts[0] == "apis" and len(parts) == 2:
        versions = _groups(minor, config).get(parts[1])
        if not versions:
            return None
        return _dump({"kind": "APIGroup", "apiVersion": "v1", **_group_doc(parts[1], versions)})
    elif parts[0] == "apis" and len(parts) == 3:
        gv = f"{parts[1]}/{parts[2]}"
    else:
        return None
    resources = by_group_version(minor, config).get(gv)
    if not resources:
        return None
    return _resource_list(gv, resources)


def document_with_custom(minor: int, path: str, extra: list[schemas.ApiResource], config: tuple = ()) -> bytes | None:
    """Like document(), adding custom resources served from CRDs (not cached)."""
    if not extra:
        return document(minor, path, config)
    by_gv: dict[str, list[schemas.ApiResource]] = {}
    for res in extra:
        by_gv.setdefault(res.group_version, []).append(res)
    if path == "apis":
        groups = {g: list(vs) for g, vs in _groups(minor, config).items()}
        for gv in by_gv:
            group, version = schemas.split_api_version(gv)
            groups.setdefault(group, [])
            if version not in groups[group]:
                groups[group].append(version)
        return _dump(
            {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    _group_doc(g, sorted(vs, key=version_priority, reverse=True)) for g, vs in sorted(groups.items())
                ],
            }
        )
    parts = path.split("/")
    if parts[0] == "apis" and len(parts) == 2:
        versions = list(_groups(minor, config).get(parts[1], []))
        versions += [
            schemas.split_api_version(gv)[1]
            for gv in by_gv
            if schemas.split_api_version(gv)[0] == parts[1] and schemas.split_api_version(gv)[1] not in versions
        ]
        if not versions:
            return None
        return _dump(
            {
                "kind": "APIGroup",
                "apiVersion": "v1",
                **_group_doc(parts[1], sorted(versions, key=version_priority, reverse=True)),
            }
        )
    if parts[0] == "apis" and len(parts) == 3:
        gv = f"{parts[1]}/{parts[2]}"
        resources = list(by_group_version(minor, config).get(gv, [])) + by_gv.get(gv, [])
        if not resources:
            return None
        return _resource_list(gv, resources)
    return document(minor, path, config)


def _dump(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()
