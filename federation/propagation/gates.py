"""Health gates of a staged rollout: is a resource healthy on each cluster of a wave?

A cluster passes when its target was applied (PropagatedVersion OK), the object is not OutOfSync,
the cluster is Ready, and, for a Deployment, its rollout is complete as ``kubectl rollout status``
decides (kubectl's DeploymentStatusViewer: the new generation observed, every wanted replica
updated, no old replica left, every updated replica available; we also ask ready = desired). A
Deployment that stays incomplete past its progress deadline (``spec.progressDeadlineSeconds``, 600 s
by default as in Kubernetes, or the wave's override) fails the gate, as does a
``ProgressDeadlineExceeded`` condition reported by the cluster itself.
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

HEALTHY, WAITING, FAILED = "healthy", "waiting", "failed"
DEFAULT_PROGRESS_DEADLINE = 600


@dataclass
class GateResult:
    cluster: str
    verdict: str  # HEALTHY, WAITING or FAILED
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


def check_gates(
    resource: FederatedResource, cluster_names: list[str], *, revision_id: int | None = None, removed=frozenset()
) -> dict[str, GateResult]:
    """The gate verdict of every named cluster for ``resource`` (one GET per Deployment).
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
            results[name] = GateResult(name, FAILED, "cluster-ready", f"{name} was unjoined")
            continue
        if cluster.state != ClusterState.READY:
            results[name] = GateResult(name, FAILED, "cluster-ready", f"{name} is {cluster.state}")
            continue
        pv = pvs.get(cluster.pk)
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
        if ftype.group != "apps" or ftype.kind != "Deployment":
            results[name] = GateResult(name, HEALTHY)
            continue
        reads.append((name, connection_for(cluster)))
    if reads:
        for name, result in zip(
            [n for n, _ in reads], network_pool().map(lambda r: _deployment_gate(resource, *r), reads), strict=True
        ):
            results[name] = result
    return {name: results[name] for name in cluster_names}


def _deployment_gate(resource: FederatedResource, name: str, conn) -> GateResult:
    """One Deployment's rollout, read live (runs on a pool thread: no database access)."""
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
        return GateResult(name, WAITING, "rollout", f"cannot read the Deployment on {name}: {exc}")
    if live is None:
        return GateResult(name, FAILED, "applied", f"the Deployment is missing on {name}")
    verdict, reason = deployment_rollout(live)
    deadline = (live.get("spec") or {}).get("progressDeadlineSeconds")
    return GateResult(
        name,
        verdict,
        "rollout" if verdict != HEALTHY else "",
        f"{name}: {reason}" if reason else "",
        deadline=deadline if isinstance(deadline, int) else DEFAULT_PROGRESS_DEADLINE,
    )
