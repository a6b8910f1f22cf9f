"""meta.k8s.io Table answers for kubectl get (Accept: application/json;as=Table;...)."""

from __future__ import annotations

from datetime import UTC, datetime

from . import capi


def wants_table(accept: str) -> str | None:
    """The Table apiVersion the client accepts ("meta.k8s.io/v1" or ".../v1beta1"), else None."""
    for part in accept.split(","):
        params = dict(p.strip().split("=", 1) for p in part.split(";")[1:] if "=" in p)
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1"):
            return f"meta.k8s.io/{params['v']}"
    return None


def _age(stamp: str | None) -> str:
    if not stamp:
        return "<unknown>"
    try:
        then = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    secs = max(int((datetime.now(UTC) - then).total_seconds()), 0)
    if secs < 120:
        return f"{secs}s"
    if secs < 600:
        return f"{secs // 60}m{secs % 60}s"
    if secs < 3 * 3600:
        return f"{secs // 60}m"
    if secs < 48 * 3600:
        return f"{secs // 3600}h"
    return f"{secs // 86400}d"


def _col(name: str, ctype: str = "string", fmt: str = "", priority: int = 0) -> dict:
    return {"name": name, "type": ctype, "format": fmt, "description": name, "priority": priority}


def _deployment(o):
    st, sp = o.get("status") or {}, o.get("spec") or {}
    return [
        f"{st.get('readyReplicas', 0)}/{sp.get('replicas', 1)}",
        st.get("updatedReplicas", 0),
        st.get("availableReplicas", 0),
    ]


def _node(o):
    ready = next(
        (c.get("status") for c in (o.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), ""
    )
    return [
        "Ready" if ready == "True" else "NotReady",
        "<none>",
        ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", ""),
    ]


def _service(o):
    sp = o.get("spec") or {}
    ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in sp.get("ports") or []) or "<none>"
    return [sp.get("type", "ClusterIP"), sp.get("clusterIP", "None"), "<none>", ports]


_COLUMNS = {
    "Deployment": ([_col("Ready"), _col("Up-to-date", "integer"), _col("Available", "integer")], _deployment),
    "Namespace": ([_col("Status")], lambda o: [(o.get("status") or {}).get("phase", "Active")]),
    "Node": ([_col("Status"), _col("Roles"), _col("Version")], _node),
    "Service": ([_col("Type"), _col("Cluster-IP"), _col("External-IP"), _col("Port(s)")], _service),
    "ConfigMap": ([_col("Data", "integer")], lambda o: [len(o.get("data") or {}) + len(o.get("binaryData") or {})]),
    "Secret": ([_col("Type"), _col("Data", "integer")], lambda o: [o.get("type", "Opaque"), len(o.get("data") or {})]),
}


def table(api_version: str, kind: str, objects: list[dict], resource_version: str) -> dict:
    extra_cols, cells = _COLUMNS.get(kind) or capi.printer_columns(kind) or ([], lambda o: [])
    columns = [_col("Name", fmt="name"), *extra_cols, _col("Age")]
    rows = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        rows.append(
            {
                "cells": [meta.get("name", ""), *cells(obj), _age(meta.get("creationTimestamp"))],
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": {k: v for k, v in meta.items() if k != "managedFields"},
                },
            }
        )
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": rows,
    }
