"""Where one resource goes and with how many replicas, as KubeFed's controllers decide it.

    decide(resource, revision, refs, schedulable, existing) -> Decision

KubeFed's rules, each in one place here:
- ReplicaScheduler (pkg/schedulingtypes/replicascheduler.go): an RSP schedules over every Ready
  cluster (KubeFed's joined clusters), or, with ``intersectWithClusterSelector``, over the ones the
  resource's ``clusterSelector`` selects (``selectorOnly``: its ``clusters`` list is ignored) and
  its namespace is placed on; when that leaves no cluster the RSP does nothing and the resource's
  own placement stands. Every scheduled cluster is placed, with 0 replicas when it has no
  preference; the replicas applied are the planned ones plus the overflow.
- Current replicas are the member's ready replicas (collected status); the estimated capacity
  comes from replicas that stay unready beyond FEDERATION_UNSCHEDULABLE_SECONDS.
- Sync controller (pkg/controller/util/placement.go ComputeNamespacedPlacement): a namespaced
  resource is placed only where its FederatedNamespace is placed; with no FederatedNamespace it
  is placed nowhere and says so (NamespaceNotFederated).
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from federation.placement import ClusterRef, select_clusters
from federation.scheduling_explain import ClusterSchedule, explain


@dataclass
class Decision:
    targets: list[str]  # clusters the resource is placed on, sorted (Ready or not)
    replicas: dict[str, int] | None = None  # spec.replicas per scheduled cluster; None: the template's
    schedule: list[ClusterSchedule] = field(default_factory=list)  # the RSP's reasons, per cluster
    excluded: dict[str, str] = field(default_factory=dict)  # cluster -> why it is left out
    not_placed: str = ""  # why nothing at all is placed, or ""
    note: str = ""  # about the whole decision (for example an RSP that does nothing)


def unschedulable_after() -> timedelta:
    return timedelta(seconds=float(getattr(settings, "FEDERATION_UNSCHEDULABLE_SECONDS", 60.0)))


@dataclass(frozen=True)
class NamespacePlacement:
    clusters: set[str]  # where the resource's FederatedNamespace is placed
    waiting: set[str] = field(default_factory=set)  # placed by its revision, not sent there by an approved run
    held_by: int | None = None  # the change request of the namespace's newest staged rollout, not completed


def namespace_placement(resource, refs: list[ClusterRef]) -> NamespacePlacement | None:
    """Where the resource's FederatedNamespace is placed; None when there is none. Its approved (last
    propagated) revision decides once there is one, not its current revision: an edit nobody
    approved would move the resource (a re-sync removed it from a cluster the edit left out). While
    the namespace's newest staged rollout has not completed (unfinished, aborted or rolled back),
    the namespace is placed where approved runs sent it and did not take it away (its
    PropagatedVersions, not removed or orphaned), and where the resource is already: a resource in
    it planned meanwhile went to a later wave's cluster, and its worker created the namespace there
    ahead of the waves; and a resource already on a cluster the namespace's runs never wrote (the
    namespace was there before it was federated) stays there, rather than be planned for removal. A set: planning
    asks it about every target (a list made that quadratic, 5 ms at 1,000 clusters)."""
    from federation.approvals.rollout import with_rollout_holding_back
    from federation.choices import PropagationReason
    from federation.models import FederatedResource, PropagatedVersion

    ns = (
        with_rollout_holding_back(FederatedResource.objects.select_related("propagated_revision", "current_revision"))
        .filter(type__group="", type__kind="Namespace", name=resource.namespace)
        .first()
    )
    if ns is None:
        return None
    revision = ns.propagated_revision or ns.current_revision
    known = {r.name for r in refs}
    placed = {n for n in select_clusters(revision.placement or {}, refs) if n in known} if revision else set()
    if ns.rollout_holding_back is None:
        return NamespacePlacement(placed) if revision is not None else None
    gone = (PropagationReason.REMOVED, PropagationReason.ORPHANED)
    # the hold adds no cluster; it takes none away either: where the resource is already (its
    # namespace is there, federated or not), it stays, rather than be planned for removal
    sent_namespace = PropagatedVersion.objects.filter(resource_id=ns.pk).exclude(status__in=gone)
    applied_here = (
        PropagatedVersion.objects.filter(resource_id=resource.pk).exclude(status__in=gone).exclude(version="")
    )
    sent = set((sent_namespace | applied_here).values_list("cluster__name", flat=True))
    return NamespacePlacement(sent & known, waiting=placed - sent, held_by=ns.rollout_holding_back)


def namespace_exclusion(namespace: str, cluster: str, placement: NamespacePlacement) -> str:
    if cluster in placement.waiting:
        return (
            f"Namespace {namespace} is not on {cluster} yet: no approved run has sent it there "
            f"(its newest staged rollout, CR-{placement.held_by}, has not completed)"
        )
    return f"Namespace {namespace} is not placed on {cluster}"


def progressed_at(status: dict) -> datetime | None:
    """When the roll-out last made progress (the Progressing condition's lastUpdateTime)."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Progressing":
            stamp = condition.get("lastUpdateTime") or condition.get("lastTransitionTime")
            return parse_datetime(stamp) if isinstance(stamp, str) else None
    return None


def estimated_capacity(status: dict, replicas: int | None, *, now: datetime, threshold: timedelta) -> int | None:
    """KubeFed's estimate: replicas minus those unschedulable beyond the threshold; None when all
    are ready or the shortfall is younger than the threshold."""
    ready = status.get("readyReplicas") or 0
    if not isinstance(replicas, int) or ready >= replicas:
        return None
    since = progressed_at(status)
    if since is None or now - since <= threshold:
        return None
    return ready


def replica_state(existing: dict, *, now: datetime | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """(current, capacity) per cluster name from PropagatedVersions (``existing``: name -> pv).

    Current is the collected ``status.readyReplicas`` (what runs, as KubeFed reads it); a type
    whose status is not collected falls back to the ``spec.replicas`` FedPortal applied."""
    now = now or timezone.now()
    threshold = unschedulable_after()
    current, capacity = {}, {}
    for name, pv in existing.items():
        if not pv.is_present:
            continue
        spec_replicas = ((pv.applied_manifest or {}).get("spec") or {}).get("replicas")
        if pv.remote_status is None:
            if isinstance(spec_replicas, int):
                current[name] = spec_replicas
            continue
        current[name] = pv.remote_status.get("readyReplicas") or 0
        estimate = estimated_capacity(pv.remote_status, spec_replicas, now=now, threshold=threshold)
        if estimate is not None:
            capacity[name] = estimate
    return current, capacity


def decide(resource, revision, refs: list[ClusterRef], schedulable: set[str], existing: dict) -> Decision:
    """``refs``: every registered cluster; ``schedulable``: the Ready, non-isolated ones;
    ``existing``: cluster name -> PropagatedVersion (with applied_manifest and remote_status)."""
    placement = revision.placement or {}
    known = {r.name for r in refs}
    namespaced = bool(resource.namespace) and resource.type.namespaced
    ns_placement = namespace_placement(resource, refs) if namespaced else None
    ns_clusters = ns_placement.clusters if ns_placement is not None else None
    decision = Decision(targets=[])
    pool = None
    if revision.scheduling:
        pool = sorted(known)
        if revision.scheduling.get("intersectWithClusterSelector"):
            pool = select_clusters(placement, refs, selector_only=True)
            if ns_clusters is not None:
                pool = [n for n in pool if n in ns_clusters]
            if not pool:
                decision.note = (
                    "intersectWithClusterSelector: the clusterSelector (with the namespace's placement) "
                    "selects no cluster, so the scheduling preference does nothing and the placement "
                    "and replicas of the template stand, as in KubeFed."
                )
                pool = None
    if pool is not None:
        available = [n for n in pool if n in schedulable]
        current, capacity = replica_state({n: pv for n, pv in existing.items() if n in available})
        key = f"{resource.namespace}/{resource.name}" if resource.namespace else resource.name
        decision.schedule = explain(revision.scheduling, available, key=key, current=current, capacity=capacity)
        decision.replicas = {row.cluster: row.replicas for row in decision.schedule}
        for name in pool:
            if name not in schedulable:
                decision.schedule.append(
                    ClusterSchedule(
                        name,
                        None,
                        None,
                        None,
                        None,
                        None,
                        0,
                        0,
                        0,
                        "not Ready or isolated: left out of scheduling until it is",
                    )
                )
        decision.schedule.sort(key=lambda row: row.cluster)
        targets = pool
    else:
        targets = [n for n in select_clusters(placement, refs) if n in known]
    if namespaced:
        if ns_clusters is None:
            decision.not_placed = (
                f"Namespace {resource.namespace} is not federated (no FederatedNamespace "
                f"{resource.namespace}): a namespaced resource is placed only where its namespace "
                f"is (NamespaceNotFederated), so it is placed nowhere."
            )
            decision.excluded = {
                n: f"NamespaceNotFederated: no FederatedNamespace {resource.namespace}" for n in targets
            }
            targets = []
        else:
            decision.excluded = {
                n: namespace_exclusion(resource.namespace, n, ns_placement) for n in targets if n not in ns_clusters
            }
            targets = [n for n in targets if n in ns_clusters]
    for row in decision.schedule:
        if row.cluster in decision.excluded:
            # said alone: "0 replicas (kept in the placement); not placed" contradicted itself
            row.reason = f"not placed: {decision.excluded[row.cluster]}" + (
                f" (the plan's {row.planned} replica(s) for it run nowhere, as in KubeFed)" if row.planned else ""
            )
    if decision.schedule and not decision.note:
        total = (revision.scheduling or {}).get("totalReplicas") or 0
        # what each placed cluster is given (planned and overflow, as KubeFed writes spec.replicas)
        placed = sum(row.replicas for row in decision.schedule if row.cluster in targets)
        if placed < total:
            decision.note = (
                f"{total - placed} of totalReplicas {total} are given to no cluster (each cluster's reason says "
                "why); KubeFed's planner leaves them unplaced too."
            )
    decision.targets = sorted(targets)
    return decision


def decide_for(resource, revision=None) -> Decision:
    """The decision for ``revision`` (default: the current one) against the clusters as they are now."""
    from clusters.choices import ClusterState
    from clusters.models import Cluster

    revision = revision or resource.current_revision
    rows = list(Cluster.objects.values_list("name", "labels", "state", "isolated"))
    refs = [ClusterRef(name, labels or {}) for name, labels, _, _ in rows]
    schedulable = {name for name, _, state, isolated in rows if state == ClusterState.READY and not isolated}
    existing = {pv.cluster.name: pv for pv in resource.propagated_versions.select_related("cluster")}
    return decide(resource, revision, refs, schedulable, existing)


def decision_as_dict(resource, revision, decision: Decision) -> dict:
    """What ``fedctl plan -o json`` prints and the Scheduling panel shows."""
    return {
        "kind": resource.type.kind,
        "namespace": resource.namespace,
        "name": resource.name,
        "revision": revision.number if revision else None,
        "scheduling": revision.scheduling if revision else None,
        "targets": decision.targets,
        "notPlaced": decision.not_placed,
        "note": decision.note,
        "excluded": decision.excluded,
        "clusters": [
            {
                "cluster": row.cluster,
                "weight": row.weight,
                "minReplicas": row.min_replicas,
                "maxReplicas": row.max_replicas,
                "current": row.current,
                "capacity": row.capacity,
                "planned": row.planned,
                "overflow": row.overflow,
                "replicas": row.replicas,
                "reason": row.reason,
            }
            for row in decision.schedule
        ],
    }
