"""Health of a propagated object on one cluster, from the status FedPortal collected, the way Argo CD
users know it: Healthy, Progressing (still rolling out), Degraded (failed), Suspended (a Job held on
purpose), Missing (not on the cluster). The per-kind rules are modelled on Argo CD's built-in checks for the workload kinds (a
rollout is Progressing until every wanted replica is updated and available; a deadline exceeded or
a failed Job is Degraded); kinds without a rule are Healthy once they exist.

Plain data in (kind, status dict, whether the object was written, whether its cluster is Ready), a
Health value out. A cluster that is not Ready gives Unknown health and no InSync (``shown_sync_state``).
"""

from clusters.choices import ClusterState
from federation.choices import Health, PropagationReason, SyncState


def _int(status: dict, key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) else 0


def _condition(status: dict, kind: str) -> dict | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition
    return None


def _replicated(status: dict) -> str:
    """Deployment / ReplicaSet: still rolling out until every wanted replica is updated and available."""
    if (_condition(status, "Progressing") or {}).get("reason") == "ProgressDeadlineExceeded":
        return Health.DEGRADED
    if (_condition(status, "ReplicaFailure") or {}).get("status") == "True":
        return Health.DEGRADED
    wanted = _int(status, "replicas")
    updated = _int(status, "updatedReplicas") if "updatedReplicas" in status else wanted
    available = _int(status, "availableReplicas")
    if _int(status, "unavailableReplicas") > 0 or updated < wanted or available < updated:
        return Health.PROGRESSING
    return Health.HEALTHY


def _statefulset(status: dict) -> str:
    wanted = _int(status, "replicas")
    if _int(status, "readyReplicas") < wanted:
        return Health.PROGRESSING
    if status.get("updateRevision") and status.get("currentRevision") != status.get("updateRevision"):
        return Health.PROGRESSING
    return Health.HEALTHY


def _daemonset(status: dict) -> str:
    wanted = _int(status, "desiredNumberScheduled")
    if _int(status, "updatedNumberScheduled") < wanted or _int(status, "numberAvailable") < wanted:
        return Health.PROGRESSING
    return Health.HEALTHY


def _job(status: dict) -> str:
    """Failed, complete, or held by its Suspended condition. Argo CD's getBatchv1JobHealth also shows
    a finished Job that is suspended as Suspended, and a resumed one (Suspended False) as Healthy;
    FedPortal says what the Job did (Healthy or Degraded once finished) and Progressing until then."""
    if (_condition(status, "Failed") or {}).get("status") == "True":
        return Health.DEGRADED
    if (_condition(status, "Complete") or {}).get("status") == "True":
        return Health.HEALTHY
    if (_condition(status, "Suspended") or {}).get("status") == "True":
        return Health.SUSPENDED
    return Health.PROGRESSING


def _pod(status: dict) -> str:
    phase = status.get("phase")
    if phase == "Failed":
        return Health.DEGRADED
    if phase == "Succeeded":
        return Health.HEALTHY
    if phase == "Running" and (_condition(status, "Ready") or {}).get("status") == "True":
        return Health.HEALTHY
    return Health.PROGRESSING


def _pvc(status: dict) -> str:
    return {"Bound": Health.HEALTHY, "Lost": Health.DEGRADED}.get(status.get("phase"), Health.PROGRESSING)


RULES = {
    "Deployment": _replicated,
    "ReplicaSet": _replicated,
    "StatefulSet": _statefulset,
    "DaemonSet": _daemonset,
    "Job": _job,
    "Pod": _pod,
    "PersistentVolumeClaim": _pvc,
}


def health(kind: str, status: dict | None, *, written: bool, reachable: bool = True) -> str:
    """``written``: FedPortal's object is on the cluster (it wrote a version there); ``reachable``:
    the cluster is Ready, so the collected status is current (Argo CD shows Unknown otherwise)."""
    if not written:
        return Health.MISSING
    if not reachable:
        return Health.UNKNOWN
    rule = RULES.get(kind)
    if rule is None or status is None:  # no rule for the kind, or status collection off: it exists
        return Health.HEALTHY
    return rule(status)


def health_of(pv, kind: str) -> str:
    """The health of one PropagatedVersion row (``version`` is blank until FedPortal wrote the object,
    and again once it removed it)."""
    written = bool(pv.version) and pv.status not in (PropagationReason.REMOVED, PropagationReason.ORPHANED)
    return health(kind, pv.remote_status, written=written, reachable=pv.cluster.state == ClusterState.READY)


def shown_sync_state(sync_state: str, cluster_state: str) -> str:
    """The sync state to show for an object on a cluster in ``cluster_state``: InSync only while the
    cluster is Ready (neither the watch nor the sweep can see a cluster that is not, so an edit made
    there meanwhile would go unseen: Unknown, as Argo CD shows an unreachable cluster's apps).
    OutOfSync stays: it was seen, and nothing has repaired it since."""
    if sync_state == SyncState.IN_SYNC and cluster_state != ClusterState.READY:
        return SyncState.UNKNOWN
    return sync_state
