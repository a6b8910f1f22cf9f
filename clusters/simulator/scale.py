"""The scale subresource (``.../deployments/<name>/scale``) of the kinds that have one: an
autoscaling/v1 Scale, as `kubectl scale` and autoscalers read and write it.

Writing it changes the parent's ``spec.replicas`` the way a merge patch of the parent does (a new
generation, a Deployment roll-out), recorded under the writer's field manager.
"""

from __future__ import annotations

from .errors import ApiError, invalid

SCALED_KINDS = frozenset({"Deployment", "StatefulSet", "ReplicaSet", "ReplicationController"})


def _selector_text(kind: str, spec: dict) -> str:
    selector = spec.get("selector") or {}
    labels = selector if kind == "ReplicationController" else (selector.get("matchLabels") or {})
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def scale_of(kind: str, obj: dict) -> dict:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            key: meta[key]
            for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if key in meta
        },
        "spec": {"replicas": spec.get("replicas", 1)},
        "status": {"replicas": status.get("replicas", 0), "selector": _selector_text(kind, spec)},
    }


def patched(current: dict, patch_type: str, body) -> dict:
    """The Scale after a merge, strategic-merge or JSON patch (a Scale has no lists to merge by key)."""
    from .merge import json_merge_patch
    from .objects import apply_json_patch

    if patch_type == "json":
        return apply_json_patch(current, body)
    if patch_type not in ("merge", "strategic"):
        raise ApiError(415, "the scale subresource accepts merge, strategic merge and JSON patches")
    if not isinstance(body, dict):
        raise ApiError(400, "the patch body must be a JSON object")
    return json_merge_patch(current, body)


def checked(name: str, namespace: str, scale: dict) -> tuple[int, str | None]:
    """The replica count and the resourceVersion precondition of a Scale a client sent: 400 for
    what is not a Scale (or names another object), 422 for a bad replica count."""
    if (
        not isinstance(scale, dict)
        or scale.get("kind", "Scale") != "Scale"
        or scale.get("apiVersion", "autoscaling/v1") != "autoscaling/v1"
    ):
        raise ApiError(400, "the body must be an autoscaling/v1 Scale")
    meta, spec = scale.get("metadata") or {}, scale.get("spec") or {}
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        raise ApiError(400, 'Scale in version "v1" cannot be handled as a Scale: metadata and spec must be objects')
    if meta.get("name", name) != name:
        raise ApiError(400, f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})")
    if meta.get("namespace", namespace) != namespace:
        raise ApiError(400, "the namespace of the provided object does not match the namespace sent on the request")
    rv = meta.get("resourceVersion")
    if rv is not None and not isinstance(rv, str):
        raise ApiError(
            400, 'Scale in version "v1" cannot be handled as a Scale: metadata.resourceVersion must be a string'
        )
    replicas = spec.get("replicas")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise invalid(
            "Scale",
            "autoscaling",
            name,
            [
                {
                    "reason": "FieldValueInvalid",
                    "field": "spec.replicas",
                    "message": f"Invalid value: {replicas!r}: must be greater than or equal to 0",
                }
            ],
        )
    return replicas, rv or None
