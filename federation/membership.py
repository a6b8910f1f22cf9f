"""Clusters that join later, or whose labels change: every approved resource whose approved (last
propagated) placement now selects the cluster is propagated to it, and removed (Delete or Orphan,
per its retention) where the placement no longer selects it. Automatic, since the placement rule is
what was approved; with FEDPORTAL_JOIN_REQUIRES_CHANGE_REQUEST a change request (kind "reconcile")
is opened per resource instead, and so it is for clusters that need more approvals (env=prod) than
the resource's content went out with (``_needs_more_approvals``). Runs by the system (actor None), audited as
``federation.resource.membership``.

clusters.services calls the registered listener (``on_membership_change``) when a cluster joins or
is relabelled; the task waits until the cluster is Ready (its first probe) before reconciling.

A resource a staged rollout owns is not applied to a cluster that joins meanwhile: the rollout's
waves were fixed when it started, so the cluster would get its revision ahead of every wave, gate
and approval, and a rollback would not reach it. The cluster waits; when the rollout completes or
is rolled back, ``reconcile_resource_membership`` gives every cluster the placement selects that
holds nothing what the resource then has. An aborted rollout gives it nothing until the next change
that goes to the whole placement, and a cluster that joins after the abort waits for that change too
(the resource's propagated revision is the aborted one, which stopped at the waves before the abort).
"""

import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce

from clusters.choices import ClusterState
from clusters.models import Cluster
from federation import enqueue
from federation.choices import PropagationReason, RunTrigger, TargetAction, TargetState, Toggle
from federation.models import FederatedResource, PropagatedVersion, PropagationTarget
from federation.propagation import PropagationError, plan_targets, propagate_revision
from federation.propagation.planning import PLAN_FIELDS
from fedportal.audit import record_event

logger = logging.getLogger(__name__)

APPLY, REMOVE = "apply", "remove"
# a PropagatedVersion in one of these states holds nothing on the cluster: a selected cluster needs the apply
NOT_THERE = (
    PropagationReason.REMOVED,
    PropagationReason.ORPHANED,
    PropagationReason.CLUSTER_NOT_READY,
    PropagationReason.CLUSTER_ISOLATED,
    PropagationReason.CLUSTER_NOT_REGISTERED,
)


def join_requires_change_request() -> bool:
    return bool(getattr(settings, "FEDPORTAL_JOIN_REQUIRES_CHANGE_REQUEST", False))


def on_membership_change(cluster: Cluster, reason: str) -> None:
    """The listener registered with clusters.services: reconcile once the transaction commits."""
    cluster_id = cluster.pk
    transaction.on_commit(lambda: enqueue.reconcile_membership(cluster_id, reason))


def on_memberships_change(clusters: list[Cluster], reason: str) -> None:
    """The batch form (an import, a bulk relabel): one message on commit, fanned out by the worker."""
    cluster_ids = [cluster.pk for cluster in clusters]
    transaction.on_commit(lambda: enqueue.reconcile_memberships(cluster_ids, reason))


@dataclass(frozen=True)
class MembershipChange:
    resource: FederatedResource
    action: str  # APPLY | REMOVE


def membership_changes(cluster: Cluster) -> list[MembershipChange]:
    """What the approved placements now say of ``cluster`` that its propagated versions do not."""
    resources = (
        FederatedResource.objects.select_related("type", "propagated_revision")
        .filter(propagated_revision__isnull=False, type__propagation=Toggle.ENABLED)
        .order_by("pk")
    )
    clusters = list(Cluster.objects.only(*PLAN_FIELDS))
    held = {
        pv.resource_id: pv.status
        for pv in PropagatedVersion.objects.filter(cluster=cluster).only("resource_id", "status")
    }
    changes = []
    for resource in resources:
        plans = [
            p
            for p in plan_targets(resource, resource.propagated_revision, clusters=clusters)
            if p.cluster.pk == cluster.pk
        ]
        if not plans:
            continue
        action = plans[0].action
        if action == TargetAction.APPLY and (resource.pk not in held or held[resource.pk] in NOT_THERE):
            changes.append(MembershipChange(resource, APPLY))
        elif action in (TargetAction.DELETE, TargetAction.ORPHAN):
            changes.append(MembershipChange(resource, REMOVE))
    return changes


def reconcile_cluster_membership(cluster: Cluster, *, reason: str = "joined") -> list:
    """Apply/remove every approved resource whose placement changed its mind about ``cluster``;
    returns the runs started (or, with FEDPORTAL_JOIN_REQUIRES_CHANGE_REQUEST, the change requests opened)."""
    started = []
    for change in membership_changes(cluster):
        # the resource's row is held while this decides and starts: a staged rollout of it starting
        # meanwhile (which holds the same row) either committed first, and this one defers to it, or
        # waits, and plans its waves with this run's record in place
        with transaction.atomic():
            _lock_resource(change.resource.pk)
            outcome = _reconcile_change(change, cluster, reason)
        if outcome is not None:
            started.append(_snapshot(outcome))
    return started


def _reconcile_change(change: MembershipChange, cluster: Cluster, reason: str):
    """One resource's share of ``reconcile_cluster_membership``, its row held: the run (or change
    request) started, or None (deferred to a staged rollout, or nothing could start)."""
    # read again under the lock: a change applied meanwhile propagated another revision, whose
    # placement the run below plans this cluster by (a run of the older one would now be the newest)
    resource = (
        FederatedResource.objects.select_related("type", "propagated_revision")
        .filter(pk=change.resource.pk, propagated_revision__isnull=False, type__propagation=Toggle.ENABLED)
        .first()
    )
    if resource is None or cluster.pk in _clusters_underway(resource):
        return None  # a reconcile of the same cluster made meanwhile (the task twice) started the run
    revision = resource.propagated_revision
    verb = "propagate to" if change.action == APPLY else "remove from"
    rolling_out = _resources_in_rollout([resource.pk]) if change.action == APPLY else {}
    if resource.pk in rolling_out:
        _defer(resource, cluster, reason, f"waits for CR-{rolling_out[resource.pk]}'s staged rollout to end")
        return None
    if change.action == APPLY and _last_rollout_aborted(resource.pk):
        # its propagated revision is the aborted rollout's, which stopped at the waves before the
        # abort: a cluster joining now gets nothing until the next change, as one that waited did
        _defer(resource, cluster, reason, "waits for its next change (its newest staged rollout was aborted)")
        return None
    if join_requires_change_request() or (change.action == APPLY and _needs_more_approvals(resource, [cluster])):
        return _open_change_request(resource, cluster, reason=reason, verb=verb)
    # a replica-scheduled resource is re-planned on all its clusters (their shares change with the fleet)
    only = None if revision.scheduling else {cluster.pk}
    try:
        with transaction.atomic():
            run = propagate_revision(
                resource, actor=None, revision=revision, trigger=RunTrigger.RESYNC, only_clusters=only
            )
            record_event(
                "federation.resource.membership",
                actor=None,
                obj=resource,
                cluster=cluster.name,
                summary=f"{cluster.name} {reason}: {verb} it {resource} (approved placement of revision {revision.number})",
                after={"run": run.pk, "action": change.action, "cluster": cluster.name, "reason": reason},
            )
    except PropagationError as exc:
        logger.info("membership reconcile of %s on %s skipped: %s", resource, cluster.name, exc)
        return None
    return run


def _needs_more_approvals(resource: FederatedResource, clusters: list[Cluster]) -> bool:
    """Whether ``clusters`` need more approvals (env=prod) than the resource's propagated content
    went out with: it was approved for other clusters (a namespace not yet federated to production
    left them out of its targets), so joining them is a reconcile request's, not automatic."""
    from federation.approvals.services import approvals_granted, required_approvals_for

    granted = approvals_granted(resource, resource.propagated_revision)
    return granted is not None and required_approvals_for(clusters) > granted


def _defer(resource: FederatedResource, cluster: Cluster, reason: str, why: str) -> None:
    """Audit that ``cluster`` is not sent ``resource`` now, and ``why``."""
    record_event(
        "federation.resource.membership",
        actor=None,
        obj=resource,
        cluster=cluster.name,
        summary=f"{cluster.name} {reason}: propagating {resource} to it {why}",
        after={"action": "deferred", "cluster": cluster.name, "reason": reason},
    )


def _clusters_underway(resource: FederatedResource) -> set[int]:
    """The clusters a run of the resource is still working on."""
    return set(
        PropagationTarget.objects.filter(
            run__resource=resource, state__in=[TargetState.PENDING, TargetState.RUNNING, TargetState.RETRYING]
        ).values_list("cluster_id", flat=True)
    )


def _lock_resource(resource_id: int) -> None:
    from federation.approvals.rollout import lock_resource

    lock_resource(resource_id)


def _last_rollout_aborted(resource_id: int) -> bool:
    from federation.approvals.rollout import last_rollout_aborted

    return last_rollout_aborted(resource_id)


def _resources_in_rollout(resource_ids: list[int]) -> dict[int, int]:
    if not resource_ids:
        return {}
    from federation.approvals.rollout import resources_in_rollout

    return resources_in_rollout(resource_ids)


ROLLOUT_ENDED = "joined during a staged rollout"


def reconcile_resource_membership(
    resource_id: int, *, reason: str = ROLLOUT_ENDED, among: set[int] | None = None
) -> list:
    """After a staged rollout of the resource ended: every cluster its approved placement selects that
    holds nothing (it joined, or was relabelled in, while the rollout owned the resource) and that no
    run is working on gets the propagated revision, in one run (or one reconcile change request with
    FEDPORTAL_JOIN_REQUIRES_CHANGE_REQUEST). ``among``: only these clusters are considered (and
    planned, unless replica scheduling needs them all), and nothing is sent while the resource's
    newest rollout is aborted. Returns what was started."""
    # held as in reconcile_cluster_membership: a new rollout of the resource starting now is seen, or
    # waits; the resource (its propagated revision) is read once the row is held
    with transaction.atomic():
        _lock_resource(resource_id)
        started = _reconcile_joiners(resource_id, reason, among)
    return [_snapshot(outcome) for outcome in started]


def _reconcile_joiners(resource_id: int, reason: str, among: set[int] | None = None) -> list:
    """``reconcile_resource_membership``'s work, the resource's row held."""
    resource = (
        FederatedResource.objects.select_related("type", "propagated_revision")
        .filter(pk=resource_id, propagated_revision__isnull=False, type__propagation=Toggle.ENABLED)
        .first()
    )
    if resource is None or _resources_in_rollout([resource.pk]):
        return []
    if among is not None and _last_rollout_aborted(resource.pk):
        return []  # its revision stopped at the waves before the abort: nothing until the next change
    revision = resource.propagated_revision
    held = dict(PropagatedVersion.objects.filter(resource=resource).values_list("cluster_id", "status"))
    busy = _clusters_underway(resource)
    clusters, within = Cluster.objects.only(*PLAN_FIELDS), None
    if among is not None and not revision.scheduling:  # a replica split is planned over every cluster
        clusters, within = clusters.filter(pk__in=among), set(among)
    plans = plan_targets(resource, revision, clusters=list(clusters), within=within)
    joined = sorted(
        (
            plan.cluster
            for plan in plans
            if plan.action == TargetAction.APPLY
            and (among is None or plan.cluster.pk in among)
            and (plan.cluster.pk not in held or held[plan.cluster.pk] in NOT_THERE)
            and plan.cluster.pk not in busy
        ),
        key=lambda cluster: cluster.name,
    )
    if not joined:
        return []
    names = ", ".join(cluster.name for cluster in joined)
    if join_requires_change_request() or _needs_more_approvals(resource, joined):
        cr = _open_change_request(resource, joined[0], reason=reason, verb="propagate to")
        return [cr] if cr is not None else []
    try:
        with transaction.atomic():
            run = propagate_revision(
                resource,
                actor=None,
                revision=revision,
                trigger=RunTrigger.RESYNC,
                only_clusters=None if revision.scheduling else {cluster.pk for cluster in joined},
            )
            record_event(
                "federation.resource.membership",
                actor=None,
                obj=resource,
                summary=f"{names} {reason}: propagate {resource} to them "
                f"(approved placement of revision {revision.number})",
                after={
                    "run": run.pk,
                    "action": APPLY,
                    "clusters": [cluster.name for cluster in joined],
                    "reason": reason,
                },
            )
    except PropagationError as exc:
        logger.info("membership reconcile of %s (%s) skipped: %s", resource, reason, exc)
        return []
    return [run]


def reconcile_namespace_members(namespace: str, cluster_ids: list[int]) -> list:
    """The Namespace ``namespace`` reached these clusters just now (its run created it there: its
    placement widened, or a wave of its rollout got there). A namespaced resource is placed only
    where its namespace is (KubeFed's ComputeNamespacedPlacement, schedule.namespace_placement), so
    the approved resources in it that hold nothing on one of these clusters are planned again for
    these clusters only, as for a cluster that joined: KubeFed's sync controller reconciles a
    namespace's resources when its FederatedNamespace changes. A resource a rollout owns waits for
    it; one whose newest rollout was aborted gets nothing until the next change. Without this,
    widening a namespace left its resources where they were, and no request could send them (their
    revision was "already what the clusters have"). Returns what was started."""
    cluster_ids = sorted(set(cluster_ids))
    if not namespace or not cluster_ids:
        return []
    held = PropagatedVersion.objects.filter(resource=OuterRef("pk"), cluster_id__in=cluster_ids).exclude(
        status__in=NOT_THERE
    )
    behind = (
        FederatedResource.objects.filter(
            namespace=namespace, propagated_revision__isnull=False, type__propagation=Toggle.ENABLED
        )
        .annotate(holding=Coalesce(Subquery(held.order_by().values("resource").annotate(n=Count("pk")).values("n")), 0))
        .filter(holding__lt=len(cluster_ids))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    started = []
    for resource_id in behind:
        started += reconcile_resource_membership(
            resource_id, reason=f"got namespace {namespace}", among=set(cluster_ids)
        )
    return started


def _open_change_request(resource: FederatedResource, cluster: Cluster, *, reason: str, verb: str):
    from federation.approvals import services as approvals
    from federation.approvals.choices import ChangeKind, ChangeState
    from federation.approvals.models import ChangeRequest

    if ChangeRequest.objects.filter(
        resource=resource, kind=ChangeKind.RECONCILE, state__in=ChangeState.open()
    ).exists():
        return None  # one open reconcile request per resource: it re-applies the whole placement
    return approvals.create_change_request(
        resource,
        actor=None,
        snapshot=False,  # its diff reads the clusters: after the resource's row is let go (``_snapshot``)
        kind=ChangeKind.RECONCILE,
        revision=resource.propagated_revision,
        title=f"Reconcile {resource}: {cluster.name} {reason}",
        description=f"Cluster {cluster.name} {reason}; the approved placement of revision "
        f"{resource.propagated_revision.number} says to {verb} it. Approving re-applies that revision.",
    )


def _snapshot(outcome):
    """A reconcile change request opened under the resource's lock gets its per-cluster diff and
    preflight now, outside it (they read every target cluster); a run is returned as it is."""
    from federation.approvals import services as approvals
    from federation.approvals.models import ChangeRequest

    return approvals.refresh_change_request(outcome) if isinstance(outcome, ChangeRequest) else outcome


def reconcile_when_ready(cluster_id: int, reason: str) -> str:
    """The task's body: 'gone', 'waiting' (not Ready yet: the task asks again) or what was done."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return "gone"
    if cluster.state != ClusterState.READY or cluster.isolated:
        return "waiting"
    return f"{len(reconcile_cluster_membership(cluster, reason=reason))} started"
