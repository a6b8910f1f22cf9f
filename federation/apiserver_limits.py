"""Values the kube-apiserver rejects outright, caught when a revision is saved (and in preflight).

    spec_value_problems(kind, manifest, *, where="") -> list[str]

Each problem names the field ("spec.replicas must be at least 0, got -1."), so a form can show it
next to the input it came from. The rules follow Kubernetes' own validation
(kubernetes/kubernetes pkg/apis/apps/validation, pkg/apis/autoscaling/validation,
pkg/apis/batch/validation, pkg/apis/core/validation; Apache-2.0), carried over as data below:
the numeric bounds the apiserver always enforces, not defaults or admission policies, and an apps/v1
workload's selector that is empty or does not match its pod template's labels (clusters.pod_selectors).
"""

from __future__ import annotations

import json

from clusters.pod_selectors import selector_problems
from federation.overrides import OverrideError, apply_operations
from federation.rendering import base_manifest

INT32_MAX = 2**31 - 1

# kind -> [(path under the object, minimum)]: whole numbers in [minimum, int32 max]
_BOUNDS: dict[str, list[tuple[str, int]]] = {
    "Deployment": [
        ("spec.replicas", 0),
        ("spec.minReadySeconds", 0),
        ("spec.revisionHistoryLimit", 0),
        ("spec.progressDeadlineSeconds", 0),
    ],
    "ReplicaSet": [("spec.replicas", 0), ("spec.minReadySeconds", 0)],
    "StatefulSet": [("spec.replicas", 0), ("spec.minReadySeconds", 0), ("spec.revisionHistoryLimit", 0)],
    "DaemonSet": [("spec.minReadySeconds", 0), ("spec.revisionHistoryLimit", 0)],
    "ReplicationController": [("spec.replicas", 0), ("spec.minReadySeconds", 0)],
    "Job": [
        ("spec.parallelism", 0),
        ("spec.completions", 0),
        ("spec.backoffLimit", 0),
        ("spec.activeDeadlineSeconds", 1),
    ],
    "HorizontalPodAutoscaler": [("spec.minReplicas", 1), ("spec.maxReplicas", 1)],
}
# kind -> [(lower path, upper path)]: the first may not exceed the second (strictly below when True)
_ORDER: dict[str, list[tuple[str, str, bool]]] = {
    "Deployment": [("spec.minReadySeconds", "spec.progressDeadlineSeconds", True)],
    "HorizontalPodAutoscaler": [("spec.minReplicas", "spec.maxReplicas", False)],
}
# where the pod template sits, per kind
_POD_SPEC = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
PORT_MIN, PORT_MAX = 1, 65535


def _get(manifest, path: str):
    current = manifest
    for part in path.split("."):
        if not isinstance(current, dict) or part not in current:
            return None
        current = current[part]
    return current


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bound_problems(kind: str, manifest: dict) -> list[str]:
    problems = []
    for path, minimum in _BOUNDS.get(kind, []):
        value = _get(manifest, path)
        if value is None:
            continue
        if not _whole(value):
            problems.append(f"{path} must be a whole number, got {value!r}.")
        elif value < minimum:
            problems.append(f"{path} must be at least {minimum}, got {value}.")
        elif value > INT32_MAX:
            problems.append(f"{path} must be at most {INT32_MAX}, got {value}.")
    for low, high, strict in _ORDER.get(kind, []):
        a, b = _get(manifest, low), _get(manifest, high)
        if _whole(a) and _whole(b) and (a >= b if strict else a > b):
            problems.append(f"{high} ({b}) must be {'greater than' if strict else 'at least'} {low} ({a}).")
    return problems


def _port_problems(kind: str, manifest: dict) -> list[str]:
    problems = []
    pod = manifest
    for part in _POD_SPEC.get(kind, ()):
        pod = pod.get(part) if isinstance(pod, dict) else None
    if isinstance(pod, dict):
        for group in ("initContainers", "containers"):
            for i, container in enumerate(pod.get(group) or []):
                for j, port in enumerate((container or {}).get("ports") or [] if isinstance(container, dict) else []):
                    value = port.get("containerPort") if isinstance(port, dict) else None
                    if value is not None and (not _whole(value) or not PORT_MIN <= value <= PORT_MAX):
                        path = ".".join(_POD_SPEC[kind]) + f".{group}[{i}].ports[{j}].containerPort"
                        problems.append(
                            f"{path} must be a port number between {PORT_MIN} and {PORT_MAX}, got {value!r}."
                        )
    if kind == "Service":
        for j, port in enumerate(_get(manifest, "spec.ports") or []):
            value = port.get("port") if isinstance(port, dict) else None
            if value is not None and (not _whole(value) or not PORT_MIN <= value <= PORT_MAX):
                problems.append(
                    f"spec.ports[{j}].port must be a port number between {PORT_MIN} and {PORT_MAX}, got {value!r}."
                )
    return problems


def _selector_problems(kind: str, manifest: dict) -> list[str]:
    """apps/v1 workloads: a selector that selects nothing, or not the pod template's own labels."""
    problems = []
    for problem in selector_problems("apps", kind, manifest):
        shown = json.dumps(problem.value, sort_keys=True, separators=(",", ":"))
        if problem.field == "spec.selector":
            problems.append(
                f"spec.selector is empty ({shown}): kube-apiserver refuses a {kind} whose selector selects nothing "
                "(give it matchLabels or matchExpressions)."
            )
        else:
            selector = json.dumps(manifest["spec"]["selector"], sort_keys=True, separators=(",", ":"))
            problems.append(
                f"spec.template.metadata.labels ({shown}) do not match spec.selector ({selector}): kube-apiserver "
                f"refuses a {kind} whose selector does not select its own pod template."
            )
    return problems


def spec_value_problems(kind: str, manifest, *, where: str = "") -> list[str]:
    """Every value in ``manifest`` the apiserver would reject outright; ``where`` prefixes each
    message (e.g. "Override for cluster 'east': ")."""
    if not isinstance(manifest, dict):
        return []
    found = _bound_problems(kind, manifest) + _port_problems(kind, manifest) + _selector_problems(kind, manifest)
    return [where + p for p in found]


def override_value_problems(kind: str, rendered: dict, overrides: list[dict]) -> list[str]:
    """The same checks on each cluster's manifest once its overrides are applied."""
    problems = []
    for entry in overrides:
        try:
            manifest = apply_operations(rendered, entry["clusterOverrides"], cluster=entry["clusterName"])
        except OverrideError:
            continue  # reported by check_overrides
        problems += spec_value_problems(kind, manifest, where=f"Override for cluster {entry['clusterName']!r}: ")
    return problems


def revision_value_problems(resource, revision) -> list[str]:
    """The checks on a stored revision (one saved before they existed): its template, then each
    cluster's overridden manifest."""
    kind = resource.type.kind
    problems = spec_value_problems(kind, revision.template)
    if problems:
        return problems
    rendered = base_manifest(
        revision.template or {},
        target=resource.type.target,
        namespace=resource.namespace or "default",
        name=resource.name,
    )
    return override_value_problems(kind, rendered, revision.overrides or [])
