"""Workload roll-outs: a Deployment's status converges `rollout_seconds` after a spec change; a
StatefulSet's, a DaemonSet's and a Job's at once (``workload_status``)."""

from __future__ import annotations

import hashlib
import json


def _desired(obj: dict) -> int:
    replicas = (obj.get("spec") or {}).get("replicas", 1)
    return replicas if isinstance(replicas, int) else 1


def _template_hash(obj: dict) -> str:
    template = json.dumps((obj.get("spec") or {}).get("template") or {}, sort_keys=True)
    return hashlib.sha256(template.encode()).hexdigest()[:10]


def _compact(status: dict) -> dict:
    # the apiserver omits zero-valued counters (omitempty)
    return {k: v for k, v in status.items() if v not in (0, None)}


def _condition(ctype: str, status: str, reason: str, message: str, now: str) -> dict:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
    }


def start(obj: dict, old: dict | None, now: str) -> None:
    """Set the in-progress status right after a spec change."""
    desired = _desired(obj)
    prev = (old or {}).get("status") or {}
    ready = min(prev.get("readyReplicas", 0) or 0, desired)
    available = min(prev.get("availableReplicas", 0) or 0, desired)
    name = obj["metadata"]["name"]
    rs = f"{name}-{_template_hash(obj)}"
    obj["status"] = _compact(
        {
            "observedGeneration": obj["metadata"].get("generation", 1),
            "replicas": desired,
            "updatedReplicas": 0,
            "readyReplicas": ready,
            "availableReplicas": available,
            "unavailableReplicas": max(desired - available, 0),
        }
    )
    obj["status"]["conditions"] = [
        _condition(
            "Available",
            "True" if available >= desired else "False",
            "MinimumReplicasAvailable" if available >= desired else "MinimumReplicasUnavailable",
            "Deployment has minimum availability."
            if available >= desired
            else "Deployment does not have minimum availability.",
            now,
        ),
        _condition("Progressing", "True", "ReplicaSetUpdated", f'ReplicaSet "{rs}" is progressing.', now),
    ]


def finish(obj: dict, now: str, *, ready: int | None = None) -> None:
    """Converged status: every replica updated, ready and available, or, when only ``ready`` of
    them fit on the cluster (its schedulable capacity), the rest pending: unready and unavailable,
    the roll-out still progressing, as a Deployment whose pods cannot be scheduled reports."""
    desired = _desired(obj)
    rs = f"{obj['metadata']['name']}-{_template_hash(obj)}"
    ready = desired if ready is None else min(ready, desired)
    obj["status"] = _compact(
        {
            "observedGeneration": obj["metadata"].get("generation", 1),
            "replicas": desired,
            "updatedReplicas": desired,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "unavailableReplicas": desired - ready,
        }
    )
    if ready < desired:
        obj["status"]["conditions"] = [
            _condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
                now,
            ),
            _condition("Progressing", "True", "ReplicaSetUpdated", f'ReplicaSet "{rs}" is progressing.', now),
        ]
        return
    obj["status"]["conditions"] = [
        _condition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.", now),
        _condition(
            "Progressing", "True", "NewReplicaSetAvailable", f'ReplicaSet "{rs}" has successfully progressed.', now
        ),
    ]


def rescale(obj: dict, old: dict, now: str) -> None:
    """A change of spec.replicas alone (the scale subresource, `kubectl scale`): the deployment
    controller's scaling path (pkg/controller/deployment/sync.go, isScalingEvent -> sync) resizes the
    current ReplicaSet, so no new ReplicaSet rolls out: every replica stays up to date, ready and
    available ones follow as pods start, and the Progressing condition is left as it was."""
    desired = _desired(obj)
    prev = old.get("status") or {}
    available = min(prev.get("availableReplicas", 0) or 0, desired)
    status = _compact(
        {
            "observedGeneration": obj["metadata"].get("generation", 1),
            "replicas": desired,
            "updatedReplicas": desired,
            "readyReplicas": min(prev.get("readyReplicas", 0) or 0, desired),
            "availableReplicas": available,
            "unavailableReplicas": max(desired - available, 0),
        }
    )
    conditions = [c for c in prev.get("conditions") or [] if c.get("type") != "Available"]
    ok = available >= desired - desired // 4  # the default maxUnavailable, 25% rounded down
    was = next((c for c in prev.get("conditions") or [] if c.get("type") == "Available"), None)
    if was is None or was.get("status") != ("True" if ok else "False"):
        was = _condition(
            "Available",
            "True" if ok else "False",
            "MinimumReplicasAvailable" if ok else "MinimumReplicasUnavailable",
            "Deployment has minimum availability." if ok else "Deployment does not have minimum availability.",
            now,
        )
    status["conditions"] = [was, *conditions]
    obj["status"] = status


def same_template(obj: dict, old: dict | None) -> bool:
    return old is not None and _template_hash(obj) == _template_hash(old)


WORKLOAD_KINDS = ("StatefulSet", "DaemonSet", "Job")


def _suspended_job_status(status) -> dict:
    """The job controller's syncJob for a suspended Job: its pods go and a Suspended condition is
    set; startTime stays (it is reset when the Job resumes), and a finished Job is left as it is. A
    Job created suspended has no startTime: it never started."""
    current = dict(status) if isinstance(status, dict) else {}
    conditions = [c for c in current.get("conditions") or [] if isinstance(c, dict)]
    if any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions):
        return current
    current.pop("active", None)
    suspended = {"type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended"}
    current["conditions"] = [c for c in conditions if c.get("type") != "Suspended"] + [suspended]
    return current


def workload_status(kind: str, obj: dict, *, nodes: int, blocked: bool) -> dict:
    """The status its controller converges a StatefulSet, DaemonSet or Job to (at once: the
    simulator runs no pods): every replica (a DaemonSet: one per node) updated, ready and available,
    the update revision current; a Job complete (suspended: not started). ``blocked`` (its image never pulls, or the
    rollout-fail fault): no pod ever becomes ready, and a Job never completes."""
    generation = obj["metadata"].get("generation", 1)
    if kind == "Job":
        if (obj.get("spec") or {}).get("suspend") is True:
            return _suspended_job_status(obj.get("status"))
        if blocked:
            return {"active": 1, "startTime": obj["metadata"].get("creationTimestamp")}
        completions = (obj.get("spec") or {}).get("completions") or 1
        return {
            "succeeded": completions,
            "startTime": obj["metadata"].get("creationTimestamp"),
            "conditions": [{"type": "Complete", "status": "True", "reason": "CompletionsReached"}],
        }
    if kind == "DaemonSet":
        ready = 0 if blocked else nodes
        return _compact(
            {
                "observedGeneration": generation,
                "desiredNumberScheduled": nodes,
                "currentNumberScheduled": nodes,
                "updatedNumberScheduled": nodes,
                "numberReady": ready,
                "numberAvailable": ready,
                "numberUnavailable": nodes - ready,
            }
        )
    desired = _desired(obj)
    ready = 0 if blocked else desired
    revision = f"{obj['metadata']['name']}-{_template_hash(obj)}"
    return {
        **_compact(
            {
                "observedGeneration": generation,
                "replicas": desired,
                "readyReplicas": ready,
                "availableReplicas": ready,
                "currentReplicas": desired,
                "updatedReplicas": desired,
            }
        ),
        "currentRevision": revision,
        "updateRevision": revision,
    }
