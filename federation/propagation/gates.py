"""Health gates of a staged rollout: is a resource healthy on each cluster of a wave?

A cluster passes when its target was applied (PropagatedVersion OK), the object is not OutOfSync,
the cluster is Ready, and, for a workload, its rollout is complete as ``kubectl rollout status``
decides (kubectl/pkg/polymorphichelpers/rollout_status.go, Apache-2.0):

* Deployment (DeploymentStatusViewer): the new generation observed, every wanted replica updated,
  no old replica left, every updated replica available; we also ask ready = desired;
* DaemonSet (DaemonSetStatusViewer): the generation observed, every scheduled pod updated and
  available;
* StatefulSet (StatefulSetStatusViewer): the generation observed, every replica ready, and the
  update revision current (with a partition: the replicas above it updated);
* a Job, which kubectl has no rollout status for: complete (a Failed condition fails the gate).

A cluster that left the fleet (unjoined) or is isolated is excluded from the gate, neither passing
nor failing it: an admin's action on one cluster is not the change's failure (isolation holds the
revision back; the cluster gets it when restored, as every isolated cluster does).

A workload that stays incomplete past its progress deadline (a Deployment's
``spec.progressDeadlineSeconds``, 600 s by default as in Kubernetes, or the wave's override) fails the
gate, as does a ``ProgressDeadlineExceeded`` condition reported by the cluster itself. A DaemonSet or
StatefulSet whose update strategy is OnDelete has no rollout to wait for (kubectl refuses to report
one): it passes once applied.
"""

from dataclasses import dataclass

from clusters import kube
from clusters.choices import ClusterState
from clusters.models import Cluster
from clusters.services import connection_for
from federation.choices import PropagationReason, SyncState
from federation.models import FederatedResource, PropagatedVersion
from federation.propagation.common import kube_timeout
from federation.propagation.worker import network_pool  # the process's one pool for cluster calls

HEALTHY, WAITING, FAILED, EXCLUDED = "healthy", "waiting", "failed", "excluded"
SETTLED = (HEALTHY, FAILED, EXCLUDED)  # verdicts nothing more is waited for
DEFAULT_PROGRESS_DEADLINE = 600


@dataclass
class GateResult:
    cluster: str
    verdict: str  # HEALTHY, WAITING, FAILED or EXCLUDED
    gate: str = ""  # which gate: applied, cluster-ready, drift, rollout
    reason: str = ""
    deadline: int | None = None  # the Deployment's spec.progressDeadlineSeconds


def _int(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def deployment_rollout(obj: dict) -> tuple[str, str]:
    """(verdict, reason) for a live Deployment, following ``kubectl rollout status``."""
    metadata, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    if _int(metadata.get("generation")) > _int(status.get("observedGeneration")):
        return WAITING, "waiting for the Deployment spec update to be observed"
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Progressing" and condition.get("reason") == "ProgressDeadlineExceeded":
            return FAILED, f"Deployment {metadata.get('name')} exceeded its progress deadline"
    desired = spec.get("replicas", 1)
    desired = desired if isinstance(desired, int) else 1
    updated, ready = _int(status.get("updatedReplicas")), _int(status.get("readyReplicas"))
    available, total = _int(status.get("availableReplicas")), _int(status.get("replicas"))
    if updated < desired:
        return WAITING, f"{updated} of {desired} replicas updated"
    if total > updated:
        return WAITING, f"{total - updated} old replicas are pending termination"
    if available < updated or ready < desired:
        return WAITING, f"{available} of {updated} updated replicas available, {ready} of {desired} ready"
    return HEALTHY, ""


def daemonset_rollout(obj: dict) -> tuple[str, str]:
    """(verdict, reason) for a live DaemonSet, following ``kubectl rollout status``."""
    metadata, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    if ((spec.get("updateStrategy") or {}).get("type") or "RollingUpdate") != "RollingUpdate":
        return HEALTHY, ""
    if _int(metadata.get("generation")) > _int(status.get("observedGeneration")):
        return WAITING, "waiting for the DaemonSet spec update to be observed"
    desired = _int(status.get("desiredNumberScheduled"))
    updated, available = _int(status.get("updatedNumberScheduled")), _int(status.get("numberAvailable"))
    if updated < desired:
        return WAITING, f"{updated} out of {desired} new pods have been updated"
    if available < desired:
        return WAITING, f"{available} of {desired} updated pods are available"
    return HEALTHY, ""


def statefulset_rollout(obj: dict) -> tuple[str, str]:
    """(verdict, reason) for a live StatefulSet, following ``kubectl rollout status``."""
    metadata, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    strategy = spec.get("updateStrategy") or {}
    if (strategy.get("type") or "RollingUpdate") != "RollingUpdate":
        return HEALTHY, ""
    observed = _int(status.get("observedGeneration"))
    if observed == 0 or _int(metadata.get("generation")) > observed:
        return WAITING, "waiting for the StatefulSet spec update to be observed"
    replicas = spec.get("replicas", 1)
    replicas = replicas if isinstance(replicas, int) else 1
    if _int(status.get("readyReplicas")) < replicas:
        return WAITING, f"{_int(status.get('readyReplicas'))} of {replicas} pods ready"
    partition = _int((strategy.get("rollingUpdate") or {}).get("partition"))
    if partition > 0:
        if _int(status.get("updatedReplicas")) < replicas - partition:
            return WAITING, (
                f"partitioned roll out: {_int(status.get('updatedReplicas'))} out of {replicas - partition} "
                "new pods have been updated"
            )
        return HEALTHY, ""
    if status.get("updateRevision") != status.get("currentRevision"):
        return WAITING, f"{_int(status.get('updatedReplicas'))} pods at revision {status.get('updateRevision')}"
    return HEALTHY, ""


def job_rollout(obj: dict) -> tuple[str, str]:
    """(verdict, reason) for a live Job: complete, failed, or still running."""
    name = (obj.get("metadata") or {}).get("name")
    conditions = [c for c in (obj.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
    for condition in conditions:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Failed":
            why = condition.get("reason") or condition.get("message")
            return FAILED, f"Job {name} failed" + (f": {why}" if why else "")
        if condition.get("type") == "Complete":
            return HEALTHY, ""
    if any(c.get("type") == "Suspended" and c.get("status") == "True" for c in conditions):
        # as `argocd app wait --health`: a suspended Job is not healthy (the wave halts at its deadline)
        return WAITING, f"Job {name} is suspended: the wave cannot pass until it is resumed and completes"
    return WAITING, f"Job {name} has not completed"


# the kinds whose rollout is read live, by (API group, kind)
ROLLOUT_RULES = {
    ("apps", "Deployment"): deployment_rollout,
    ("apps", "DaemonSet"): daemonset_rollout,
    ("apps", "StatefulSet"): statefulset_rollout,
    ("batch", "Job"): job_rollout,
}


def check_gates(
    resource: FederatedResource, cluster_names: list[str], *, revision_id: int | None = None, removed=frozenset()
) -> dict[str, GateResult]:
    """The gate verdict of every named cluster for ``resource`` (one GET per workload, ROLLOUT_RULES).
    ``revision_id``: the revision the rollout sends; a cluster holding another one (a newer change
    reached it) fails. ``removed``: the clusters the rollout removes the resource from (they left its
    placement), which pass once it is gone (Removed, or Orphaned per its retention)."""
    clusters = {c.name: c for c in Cluster.objects.filter(name__in=cluster_names)}
    pvs = {
        pv.cluster_id: pv
        for pv in PropagatedVersion.objects.filter(resource=resource, cluster__name__in=cluster_names).only(
            "id", "cluster_id", "status", "message", "sync_state", "revision_id"
        )
    }
    ftype = resource.type
    results = {}
    reads = []  # the Deployments to read, in parallel on the process's propagation pool
    for name in cluster_names:
        cluster = clusters.get(name)
        if cluster is None:
            results[name] = GateResult(name, EXCLUDED, "cluster-ready", f"{name} was unjoined: not gated")
            continue
        pv = pvs.get(cluster.pk)
        if cluster.isolated or (pv is not None and pv.status == PropagationReason.CLUSTER_ISOLATED):
            results[name] = GateResult(
                name, EXCLUDED, "isolated", f"{name} is isolated: held back, not gated (it gets this when restored)"
            )
            continue
        if cluster.state != ClusterState.READY:
            results[name] = GateResult(name, FAILED, "cluster-ready", f"{name} is {cluster.state}")
            continue
        if name in removed:
            if pv is not None and pv.status in (PropagationReason.REMOVED, PropagationReason.ORPHANED):
                results[name] = GateResult(name, HEALTHY)
            else:
                status = pv.status if pv else "missing"
                results[name] = GateResult(name, FAILED, "removed", f"{name} is {status}, not removed")
            continue
        if pv is None or pv.status != PropagationReason.OK:
            status = pv.status if pv else "missing"
            message = f": {pv.message}" if pv and pv.message else ""
            results[name] = GateResult(name, FAILED, "applied", f"{name} is {status}{message}")
            continue
        if revision_id is not None and pv.revision_id != revision_id:
            results[name] = GateResult(
                name, FAILED, "applied", f"{name} holds another revision than this change's (a newer change reached it)"
            )
            continue
        if pv.sync_state == SyncState.OUT_OF_SYNC:
            results[name] = GateResult(name, FAILED, "drift", f"{name} drifted from what was applied")
            continue
        if (ftype.group, ftype.kind) not in ROLLOUT_RULES:
            results[name] = GateResult(name, HEALTHY)
            continue
        reads.append((name, connection_for(cluster)))
    if reads:
        for name, result in zip(
            [n for n, _ in reads], network_pool().map(lambda r: _rollout_gate(resource, *r), reads), strict=True
        ):
            results[name] = result
    return {name: results[name] for name in cluster_names}


def _rollout_gate(resource: FederatedResource, name: str, conn) -> GateResult:
    """One workload's rollout, read live (runs on a pool thread: no database access)."""
    ftype = resource.type
    try:
        live = kube.get_object(
            conn,
            api_version=ftype.api_version,
            plural=ftype.plural,
            namespace=resource.namespace or None,
            name=resource.name,
            timeout=kube_timeout(),
        )
    except kube.KubeError as exc:
        return GateResult(name, WAITING, "rollout", f"cannot read the {ftype.kind} on {name}: {exc}")
    if live is None:
        return GateResult(name, FAILED, "applied", f"the {ftype.kind} is missing on {name}")
    verdict, reason = ROLLOUT_RULES[(ftype.group, ftype.kind)](live)
    deadline = (live.get("spec") or {}).get("progressDeadlineSeconds")
    return GateResult(
        name,
        verdict,
        "rollout" if verdict != HEALTHY else "",
        f"{name}: {reason}" if reason else "",
        deadline=deadline if isinstance(deadline, int) else DEFAULT_PROGRESS_DEADLINE,
    )
