"""Kubeconfig and state file written by runfleet (one context per simulated cluster)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import yaml

from .store import ClusterState


def state_path_for(kubeconfig_path: Path) -> Path:
    """The state file fleetctl reads: next to the kubeconfig, '<stem>.state.json'."""
    return kubeconfig_path.with_name(kubeconfig_path.stem + ".state.json")


def cluster_url(base_url: str, name: str) -> str:
    return f"{base_url}/clusters/{name}"


def build_kubeconfig(
    clusters: list[ClusterState], base_url: str, ca_path: Path | None, *, readonly: bool = False
) -> dict:
    ca_data = base64.b64encode(ca_path.read_bytes()).decode() if ca_path else None
    kc = {"apiVersion": "v1", "kind": "Config", "preferences": {}, "clusters": [], "users": [], "contexts": []}
    for c in clusters:
        entry = {"server": cluster_url(base_url, c.name)}
        if ca_data:
            entry["certificate-authority-data"] = ca_data
        kc["clusters"].append({"name": c.name, "cluster": entry})
        kc["users"].append({"name": f"{c.name}-admin", "user": {"token": c.spec.token}})
        kc["users"].append({"name": f"{c.name}-readonly", "user": {"token": c.spec.readonly_token}})
        kc["contexts"].append({"name": c.name, "context": {"cluster": c.name, "user": f"{c.name}-admin"}})
        kc["contexts"].append(
            {"name": f"{c.name}-readonly", "context": {"cluster": c.name, "user": f"{c.name}-readonly"}}
        )
    if clusters:
        kc["current-context"] = clusters[0].name
    return kc


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def write(
    kubeconfig_path: Path, clusters: list[ClusterState], base_url: str, admin_token: str, ca_path: Path | None, pid: int
) -> Path:
    """Write kubeconfig + state file; returns the state file path."""
    _write_private(kubeconfig_path, yaml.safe_dump(build_kubeconfig(clusters, base_url, ca_path), sort_keys=False))
    state = {
        "adminUrl": f"{base_url}/_fleet",
        "adminToken": admin_token,
        "baseUrl": base_url,
        "caPath": str(ca_path) if ca_path else None,
        "kubeconfig": str(kubeconfig_path),
        "pid": pid,
        "clusters": {
            c.name: {
                "url": cluster_url(base_url, c.name),
                "token": c.spec.token,
                "readonlyToken": c.spec.readonly_token,
                "version": c.git_version,
                "role": c.spec.role,
                "labels": c.spec.labels,
            }
            for c in clusters
        },
    }
    state_path = state_path_for(kubeconfig_path)
    _write_private(state_path, json.dumps(state, indent=1))
    return state_path
