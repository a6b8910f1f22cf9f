"""Planning: what propagating a revision does on each cluster (apply, delete/orphan, or skip, and why)."""

from dataclasses import dataclass

from django.db.models import Q

from clusters.choices import ClusterState
from clusters.models import Cluster
from federation import schedule
from federation.choices import (
    PropagationReason,
    Retention,
    TargetAction,
)
from federation.models import FederatedResource, Revision
from federation.placement import ClusterRef

# --- planning ---------------------------------------------------------------------------------


@dataclass
class ClusterPlan:
    cluster: Cluster
    action: str  # TargetAction
    replicas: int | None = None
    reason: str = ""  # for skips: PropagationReason
    message: str = ""


PLAN_FIELDS = ("id", "name", "labels", "state", "isolated", "isolated_reason")


def plan_targets(
    resource: FederatedResource,
    revision: Revision,
    *,
    clusters=None,
    existing=None,
    within: set[int] | None = None,
    acting: bool = False,
) -> list[ClusterPlan]:
    """What propagating ``revision`` does on each cluster: apply, delete/orphan, or skip (why).
    ``within``: cluster ids the caller restricted ``clusters`` to; only their PropagatedVersions are
    read, so only they are planned (right only without replica scheduling, whose split needs them all).
    A cluster that left the placement is planned per the resource's retention, as applying a change
    request (which adopts it) does; ``acting``: the plan a run acts on, per the approved retention
    (``deletes_on_removal``)."""
    if clusters is not None:
        clusters = list(clusters)
        rows = {c.name: (c.pk, c.labels, c.state, c.isolated) for c in clusters}
    else:  # the placement is decided on names, labels and readiness; full rows only for the clusters it names
        rows = {
            name: (pk, labels, state, isolated)
            for pk, name, labels, state, isolated in Cluster.objects.values_list(
                "pk", "name", "labels", "state", "isolated"
            )
        }
    refs = [ClusterRef(name, value[1] or {}) for name, value in rows.items()]
    schedulable = {
        name for name, (_, _, state, isolated) in rows.items() if state == ClusterState.READY and not isolated
    }
    loaded_here = existing is None
    if loaded_here:
        # what planning reads of each PropagatedVersion (the applied manifest and status only for replicas)
        fields = ["id", "resource_id", "cluster_id", "status"] + (
            ["applied_manifest", "remote_status"] if revision.scheduling else []
        )
        versions = resource.propagated_versions.only(*fields)
        existing = list(versions if within is None else versions.filter(cluster_id__in=within))
    names = {value[0]: name for name, value in rows.items()}
    decision = schedule.decide(
        resource,
        revision,
        refs,
        schedulable,
        {names[pv.cluster_id]: pv for pv in existing if pv.cluster_id in names} if revision.scheduling else {},
    )
    candidates = decision.targets
    if clusters is None:
        held = {pv.cluster_id for pv in existing} if loaded_here else set()
        clusters = _clusters_named(set(candidates), held, total=len(rows))
    if loaded_here:
        by_id = {c.pk: c for c in clusters}
        missing = {pv.cluster_id for pv in existing if pv.cluster_id not in by_id}  # clusters the caller left out
        if missing:
            by_id.update({c.pk: c for c in Cluster.objects.filter(pk__in=missing)})
        for pv in existing:
            pv.cluster = by_id[pv.cluster_id]
    by_name = {c.name: c for c in clusters}
    candidates = [n for n in candidates if n in by_name]  # a cluster unjoined since the names were read
    replicas = decision.replicas or {}
    plans = []
    for name in sorted(candidates):
        cluster = by_name[name]
        if cluster.isolated:
            plans.append(_isolated(cluster))
        elif cluster.state != ClusterState.READY:
            plans.append(
                ClusterPlan(
                    cluster,
                    TargetAction.SKIP,
                    reason=PropagationReason.CLUSTER_NOT_READY,
                    message=f"{name} is {cluster.state}; propagation resumes when it is Ready again.",
                )
            )
        else:
            plans.append(
                ClusterPlan(
                    cluster, TargetAction.APPLY, replicas=replicas.get(name) if decision.replicas is not None else None
                )
            )
    targeted = set(candidates)
    deletes = deletes_on_removal(resource) if acting else resource.retention == Retention.DELETE
    removal = TargetAction.DELETE if deletes else TargetAction.ORPHAN
    for pv in existing:
        if pv.cluster.name not in targeted and pv.status not in (PropagationReason.REMOVED, PropagationReason.ORPHANED):
            # on an isolated cluster the worker holds the removal back (ClusterIsolated): the target
            # keeps what is owed, which the reconcile sweep repeats once the isolation is lifted
            plans.append(ClusterPlan(pv.cluster, removal))
    return sorted(plans, key=lambda p: p.cluster.name)


def _isolated(cluster: Cluster) -> ClusterPlan:
    reason = f": {cluster.isolated_reason}" if cluster.isolated_reason else ""
    return ClusterPlan(
        cluster,
        TargetAction.SKIP,
        reason=PropagationReason.CLUSTER_ISOLATED,
        message=f"{cluster.name} is isolated{reason}; not propagated until the isolation is lifted.",
    )


def _clusters_named(names: set[str], ids: set[int], *, total: int) -> list[Cluster]:
    """Cluster rows by name or id: one query, the whole table when that is most of it anyway."""
    if len(names) + len(ids) >= total // 2:
        return list(Cluster.objects.all())
    return list(Cluster.objects.filter(Q(name__in=names) | Q(pk__in=ids)))


def deletes_on_removal(resource: FederatedResource) -> bool:
    """Whether a cluster leaving the placement has the object deleted: retention Delete, and held by
    an applied change request (``approved_retention``: applying one adopts the retention it approved).
    Until then a removal orphans, so switching Orphan to Delete reaches no cluster unapproved."""
    return resource.retention == Retention.DELETE and resource.approved_retention == Retention.DELETE
