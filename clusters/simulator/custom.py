"""Custom resources: a CustomResourceDefinition stored in a simulated cluster makes its kinds
served there (discovery + CRUD/patch/apply), as the apiextensions apiserver does.

Custom objects are not validated against the CRD's openAPIV3Schema (treated as
x-kubernetes-preserve-unknown-fields); strategic merge patch is refused with 415, as for real
custom resources.
"""

from __future__ import annotations

from clusters import schemas

CRD_GROUP = "apiextensions.k8s.io"


def resources_from_crd(crd: dict) -> list[schemas.ApiResource]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, kind, plural = spec.get("group"), names.get("kind"), names.get("plural")
    if not (isinstance(group, str) and isinstance(kind, str) and isinstance(plural, str)):
        return []
    namespaced = spec.get("scope", "Namespaced") != "Cluster"
    out = []
    for version in spec.get("versions") or []:
        if isinstance(version, dict) and version.get("served", True) and isinstance(version.get("name"), str):
            out.append(schemas.ApiResource(group, version["name"], kind, plural, namespaced, schemas.ALL_VERBS))
    return out


def has_status_subresource(crd: dict, version: str) -> bool:
    for entry in (crd.get("spec") or {}).get("versions") or []:
        if isinstance(entry, dict) and entry.get("name") == version:
            return "status" in (entry.get("subresources") or {})
    return False


def crd_status(crd: dict, now: str) -> dict:
    spec = crd.get("spec") or {}
    versions = [v.get("name") for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("storage")]
    return {
        "acceptedNames": spec.get("names") or {},
        "storedVersions": versions,
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": now,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": now,
            },
        ],
    }
