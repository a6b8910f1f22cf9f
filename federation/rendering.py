"""Render one revision for one cluster: the manifest FedPortal applies. Pure.

Steps, in KubeFed's order: the template with the resource's identity; fields KubeFed retains
copied from the live object; the cluster's overrides; the scheduled replicas; our managed label
and the revision annotation.
"""

import copy
import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from federation.overrides import apply_overrides, operations_for

MANAGED_LABEL = "fedportal.io/managed"
REVISION_ANNOTATION = "fedportal.io/revision"

# Paths (JSON pointers, per kind) KubeFed keeps from the cluster's copy; drift ignores them too.
RETAINED_PATHS = {
    "Service": ("/spec/clusterIP", "/spec/clusterIPs", "/spec/healthCheckNodePort"),
    "ServiceAccount": ("/secrets",),
    "Job": ("/spec/selector", "/spec/template/metadata/labels"),
}


@dataclass(frozen=True)
class TargetType:
    api_version: str
    kind: str
    namespaced: bool = True


def content_hash(value) -> str:
    """A stable sha256 of a JSON-able value (sorted keys, no whitespace)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def base_manifest(template: Mapping, *, target: TargetType, namespace: str, name: str) -> dict:
    """The template with apiVersion, kind and the resource's own name/namespace."""
    manifest = copy.deepcopy(dict(template or {}))
    metadata = dict(manifest.get("metadata") or {})
    metadata["name"] = name
    if target.namespaced:
        metadata["namespace"] = namespace
    else:
        metadata.pop("namespace", None)
    for server_field in ("resourceVersion", "uid", "generation", "creationTimestamp", "managedFields", "selfLink"):
        metadata.pop(server_field, None)
    manifest.pop("status", None)
    result = {"apiVersion": target.api_version, "kind": target.kind, "metadata": metadata}
    result.update({key: value for key, value in manifest.items() if key not in ("apiVersion", "kind", "metadata")})
    return result


def retain_fields(manifest: dict, live: Mapping | None, *, kind: str) -> dict:
    """Copy the fields KubeFed retains from the live object (cluster-assigned values)."""
    if not live:
        return manifest
    spec, live_spec = manifest.get("spec"), live.get("spec") or {}
    if kind == "Service" and isinstance(spec, dict):
        for field in ("clusterIP", "clusterIPs", "healthCheckNodePort"):
            if not spec.get(field) and live_spec.get(field):
                spec[field] = copy.deepcopy(live_spec[field])
        live_ports = {(p.get("name"), p.get("port")): p for p in live_spec.get("ports") or [] if isinstance(p, Mapping)}
        for port in spec.get("ports") or []:
            if isinstance(port, dict) and not port.get("nodePort"):
                match = live_ports.get((port.get("name"), port.get("port")))
                if match and match.get("nodePort"):
                    port["nodePort"] = match["nodePort"]
    elif kind == "ServiceAccount":
        if not manifest.get("secrets") and live.get("secrets"):
            manifest["secrets"] = copy.deepcopy(live["secrets"])
    elif kind == "Job" and isinstance(spec, dict) and not spec.get("manualSelector"):
        if live_spec.get("selector"):
            spec["selector"] = copy.deepcopy(live_spec["selector"])
        live_labels = ((live_spec.get("template") or {}).get("metadata") or {}).get("labels")
        if live_labels:
            pod_meta = spec.setdefault("template", {}).setdefault("metadata", {})
            pod_meta["labels"] = {**live_labels, **(pod_meta.get("labels") or {})}
    return manifest


def render_manifest(
    *,
    target: TargetType,
    template: Mapping,
    namespace: str,
    name: str,
    cluster: str,
    overrides: list | None = None,
    replicas: int | None = None,
    revision: str | int | None = None,
    live: Mapping | None = None,
) -> dict:
    """The object to apply on ``cluster``. Raises OverrideError when an override does not apply."""
    manifest = base_manifest(template, target=target, namespace=namespace, name=name)
    manifest = retain_fields(manifest, live, kind=target.kind)
    manifest = apply_overrides(manifest, overrides or [], cluster=cluster)
    if replicas is not None:
        spec = manifest.setdefault("spec", {})
        if isinstance(spec, dict):
            spec["replicas"] = int(replicas)
    metadata = manifest.setdefault("metadata", {})
    labels = dict(metadata.get("labels") or {})
    labels[MANAGED_LABEL] = "true"
    metadata["labels"] = labels
    if revision is not None:
        annotations = dict(metadata.get("annotations") or {})
        annotations[REVISION_ANNOTATION] = str(revision)
        metadata["annotations"] = annotations
    return manifest


def template_hash(manifest_without_overrides: Mapping) -> str:
    return content_hash(manifest_without_overrides)


def override_hash(overrides: list | None, cluster: str, replicas: int | None = None) -> str:
    operations = operations_for(overrides or [], cluster)
    if not operations:  # most clusters of a fleet: the same few values, computed once
        return _no_operations_hash(replicas)
    return content_hash({"ops": operations, "replicas": replicas})


@functools.lru_cache(maxsize=1024)
def _no_operations_hash(replicas: int | None) -> str:
    return content_hash({"ops": [], "replicas": replicas})


def ignored_paths(kind: str) -> tuple[str, ...]:
    """Paths drift detection ignores for this kind, on top of server-populated ones."""
    return RETAINED_PATHS.get(kind, ())
