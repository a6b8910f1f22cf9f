"""The scale subresource (``.../deployments/<name>/scale``) of the kinds that have one: an
autoscaling/v1 Scale, as `kubectl scale` and autoscalers read and write it.

Writing it changes the parent's ``spec.replicas`` the way a merge patch of the parent does (a new
generation, a Deployment roll-out), recorded under the writer's field manager.
"""
from __future__ import annotations

import jsonpatch

from .errors import ApiError

SCALED_KINDS = frozenset({"Deployment", "StatefulSet", "ReplicaSet", "ReplicationController"})


def _selector_text(kind: str, spec: dict) -> str:
    selector = spec.get("selector") or {}
    labels = selector if kind == "ReplicationController" else (selector.get("matchLabels") or {})
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def scale_of(kind: str, obj: dict) -> dict:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {key: meta[key] for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                     if key in meta},
        "spec": {"replicas": spec.get("replicas", 1)},
        "status": {"replicas": status.get("replicas", 0), "selector": _selector_text(kind, spec)},
    }


def patched(current: dict, patch_type: str, body) -> dict:
    """The Scale after a merge, strategic-merge or JSON patch (a Scale has no lists to merge by key)."""
    from .merge import json_merge_patch

    if patch_type == "json":
        if not isinstance(body, list):
            raise ApiError(400, "json patch must be a list of operations")
        try:
            return jsonpatch.JsonPatch(body).apply(current)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError, ValueError) as exc:
            raise ApiError(422, f"the server rejected our request due to an error in our request: {exc}",
                           reason="Invalid") from exc
    if patch_type not in ("merge", "strategic"):
        raise ApiError(415, "the scale subresource accepts merge, strategic merge and JSON patches")
    if not isinstance(body, dict):
        raise ApiError(400, "the patch body must be a JSON object")
    return json_merge_patch(current, body)


def replicas_of(name: str, scale: dict) -> int:
    if not isinstance(scale, dict) or scale.get("kind", "Scale") != "Scale":
        raise ApiError(400, "the body must be an autoscaling/v1 Scale")
    replicas = (scale.get("spec") or {}).get("replicas")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise ApiError(422, f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: {replicas!r}: '
                            "must be greater than or equal to 0", reason="Invalid")
    return replicas
