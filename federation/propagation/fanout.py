"""Fan-out: a PropagationRun with one target per planned cluster, enqueued in chunks after the
transaction commits; re-sync of one cluster; removal from one cluster."""

from dataclasses import replace

from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster
from federation import enqueue, propagation_gate
from federation.choices import PropagationReason, Retention, RunTrigger, TargetAction, TargetState
from federation.models import (
    FederatedResource,
    PropagatedVersion,
    PropagationRun,
    PropagationTarget,
    Revision,
)
from federation.propagation.common import PropagationError, chunked
from federation.propagation.planning import PLAN_FIELDS, plan_targets
from federation.propagation.record import (
    create_run_pvs,
    finish_run_if_complete,
    pvs_for,
    status_change,
)
from fedportal import bulk
from fedportal.audit import record_event, record_events
from fedportal.roles import Role, require_actor_role

# --- fan-out ------------------------------------------------------------------------------------


def enqueue_chunks(run_id: int, cluster_ids: list[int], *, skip_first: bool = False) -> None:
    """One ``propagate_targets_task`` per chunk (``chunked``), but for the first with ``skip_first``."""
    for chunk in chunked(cluster_ids)[1 if skip_first else 0 :]:
        enqueue.propagate_targets(run_id, chunk)


def _removes_an_applied_object(resource: FederatedResource, plans) -> set[int]:
    """Ids of the clusters among ``plans`` that the plans would remove ``resource`` from while it holds
    an object FedPortal applied there. A removal where nothing was applied (a target that failed
    before its first apply) only clears the recorded failure."""
    removing = [p.cluster.pk for p in plans if p.action in (TargetAction.DELETE, TargetAction.ORPHAN)]
    if not removing:
        return set()
    return set(
        PropagatedVersion.objects.filter(
            resource=resource, cluster_id__in=removing, applied_manifest__isnull=False
        ).values_list("cluster_id", flat=True)
    )


def propagate_revision(
    resource: FederatedResource,
    *,
    actor=None,
    revision: Revision | None = None,
    trigger: str = RunTrigger.PROPAGATE,
    only_cluster: Cluster | None = None,
    emergency: bool = False,
    only_clusters=None,
    first_chunk_here: bool = False,
    reapply_only: bool = False,
    delete_removed: bool = False,
    reapply: bool = False,
) -> PropagationRun:
    """Send ``revision`` (default: the current one) to every cluster its placement selects, and
    remove it (Delete or Orphan, per retention) from clusters that left the placement.

    Returns the PropagationRun at once; one ``propagate_to_cluster_task`` per cluster runs on queue
    "propagation" after the transaction commits. Propagating the same revision twice writes
    nothing the second time (hashes and object versions match), but for an operator's re-sync
    (``reapply``), which puts back what was changed on the cluster. The approval workflow calls this
    once a change request is approved. ``only_cluster`` / ``only_clusters`` (cluster ids) restrict
    the run to those clusters (a re-sync). The run's ``queued_cluster_ids`` are the clusters whose
    targets were queued (``chunked`` cuts them into the tasks' chunks). A refusal
    (PropagationError) is raised before anything is written. ``first_chunk_here``: the caller
    applies the first chunk itself (``propagate_targets``), so no task is queued for it; should the
    caller die first, the stale-target sweep queues it (``resume_stale_targets``). ``reapply_only``
    (a re-sync): a cluster the plan would remove an object FedPortal applied from is refused
    (``only_cluster``) or left out (``only_clusters``): removing goes through a change request.
    ``delete_removed``: a removal deletes whatever the retention (a rollback taking back what the
    change it undoes created: Orphan would leave that change running there). ``reapply``: an
    operator's re-sync, applied even where nothing changed on our side (``PropagationRun.reapply``).
    """
    resource = FederatedResource.objects.select_related("type", "current_revision").get(pk=resource.pk)
    if refusal := propagation_gate.propagation_refusal(
        resource, actor=actor, emergency=emergency
    ):  # roles, protected namespaces
        raise PropagationError(refusal)
    revision = revision or resource.current_revision
    if revision is None:
        raise PropagationError(f"{resource} has no revision to propagate.")
    if revision.resource_id != resource.pk:
        raise PropagationError("That revision belongs to another resource.")
    if not resource.type.propagation_enabled:
        raise PropagationError(
            f"Propagation of {resource.type.name} is Disabled; an admin can enable it on the Federated types page."
        )
    # what planning and recording the run read of a cluster (the workers load their clusters whole)
    clusters = Cluster.objects.only(*PLAN_FIELDS)
    wanted = {only_cluster.pk} if only_cluster is not None else set(only_clusters or ())
    within = None
    if (only_cluster is not None or only_clusters is not None) and not revision.scheduling:
        # without replica scheduling a cluster's plan depends on that cluster alone: a run restricted
        # to a few clusters (a re-sync, a rollout's batch) reads and plans just those
        clusters, within = clusters.filter(pk__in=wanted), wanted
    plans = plan_targets(resource, revision, clusters=clusters, within=within, acting=True)
    if delete_removed:
        plans = [replace(p, action=TargetAction.DELETE) if p.action == TargetAction.ORPHAN else p for p in plans]
    if only_cluster is not None:
        plans = [p for p in plans if p.cluster.pk == only_cluster.pk]
        if not plans:
            raise PropagationError(f"{only_cluster.name} is not a target of {resource} and holds nothing to remove.")
        if reapply_only and _removes_an_applied_object(resource, plans):
            raise PropagationError(
                f"{resource} is no longer placed on {only_cluster.name}: a re-sync only applies again what was "
                "approved; removing it from the cluster goes through a change request."
            )
    if only_clusters is not None:
        plans = [p for p in plans if p.cluster.pk in wanted]
        if reapply_only and (held := _removes_an_applied_object(resource, plans)):
            plans = [p for p in plans if p.cluster.pk not in held]
        if not plans:
            raise PropagationError(f"None of those clusters is a target of {resource} or holds it.")
    with transaction.atomic():
        run = PropagationRun.objects.create(
            resource=resource,
            revision=revision,
            trigger=trigger,
            reapply=reapply,
            actor=actor if getattr(actor, "pk", None) else None,
        )
        now = timezone.now()
        to_queue = []
        # bulk writes: a 1,000-cluster run is a handful of queries, not thousands
        bulk.insert_values(
            PropagationTarget,
            [
                dict(
                    run_id=run.pk,
                    cluster_id=plan.cluster.pk,
                    action=plan.action,
                    replicas=plan.replicas,
                    state=TargetState.DONE if plan.action == TargetAction.SKIP else TargetState.PENDING,
                    reason=plan.reason,
                    message=plan.message,
                    finished_at=now if plan.action == TargetAction.SKIP else None,
                )
                for plan in plans
            ],
        )
        # the PropagatedVersions: their statuses, and the missing ones created from the targets
        versions = PropagatedVersion.objects.filter(resource=resource)
        if within is not None:
            versions = versions.filter(cluster_id__in=within)
        known = {
            cluster_id: (pk, status) for cluster_id, pk, status in versions.values_list("cluster_id", "pk", "status")
        }
        create_run_pvs(run.pk)
        skipped = [plan.cluster for plan in plans if plan.action == TargetAction.SKIP]
        skipped_pvs = pvs_for(resource, skipped) if skipped else {}
        waiting: dict[str, list[int]] = {PropagationReason.PENDING: [], PropagationReason.WAITING_FOR_REMOVAL: []}
        skip_events: list = []
        for plan in plans:
            if plan.action == TargetAction.SKIP:
                status_change(skipped_pvs[plan.cluster.pk], plan.reason, plan.message, actor=actor, events=skip_events)
                continue
            to_queue.append(plan.cluster.pk)
            pk, status = known.get(plan.cluster.pk, (None, PropagationReason.PENDING))
            if pk is not None and status != PropagationReason.OK:
                waiting[
                    PropagationReason.PENDING
                    if plan.action == TargetAction.APPLY
                    else PropagationReason.WAITING_FOR_REMOVAL
                ].append(pk)
        for status, pks in waiting.items():
            if pks:
                PropagatedVersion.objects.filter(pk__in=pks).update(status=status, message="", last_attempt_at=now)
        # the resource's row before the audit chain's head (skip events appended first held the head
        # while waiting for the row, which another run of the resource may hold and want the head)
        if trigger != RunTrigger.RESYNC:  # a re-sync repeats what a cluster had (resync_cluster)
            FederatedResource.objects.filter(pk=resource.pk).update(propagated_revision=revision)
        run_event = dict(
            action=f"federation.resource.{trigger}",
            actor=actor,
            obj=resource,
            summary=f"{RunTrigger(trigger).label} revision {revision.number} of {resource} to "
            f"{len(to_queue)} cluster(s)"
            + (f", {len(plans) - len(to_queue)} skipped" if len(plans) > len(to_queue) else ""),
            after={
                "run": run.pk,
                "revision": revision.number,
                "targets": {
                    p.cluster.name: p.action if p.action != TargetAction.SKIP else f"skip:{p.reason}" for p in plans
                },
            },
        )
        record_events([*skip_events, run_event])
        if not to_queue:
            finish_run_if_complete(run.pk, resource=resource)
        run_id = run.pk
        transaction.on_commit(lambda: enqueue_chunks(run_id, to_queue, skip_first=first_chunk_here))
    run.queued_cluster_ids = to_queue  # whoever applies a chunk itself cuts the same chunks (chunked)
    return run


def approved_revisions(resource: FederatedResource, cluster_ids) -> dict[int, Revision]:
    """What re-sync repeats on each of ``cluster_ids``: the revision of the newest run of ``resource``
    that targeted the cluster, when that run applied it there (or skipped it while the cluster was
    not Ready or isolated). That is what an approved change, or the approved placement for a cluster
    that joined, last sent it. A staged rollout sends the propagated revision wave by wave, so a
    cluster in a wave it has not reached (waiting for its approval, paused, halted, aborted) gets
    the revision it had; a cluster no run has targeted (one that joined, with
    FEDPORTAL_JOIN_REQUIRES_CHANGE_REQUEST, until its reconcile request is approved) or whose newest
    target removed the resource is left out."""
    newest: dict[int, tuple[str, int]] = {}
    rows = (
        PropagationTarget.objects.filter(run__resource_id=resource.pk, cluster_id__in=list(cluster_ids))
        .order_by("cluster_id", "-run_id")
        .values_list("cluster_id", "action", "run__revision_id")
    )
    for cluster_id, action, revision_id in rows:
        newest.setdefault(cluster_id, (action, revision_id))
    wanted = {
        cluster_id: revision_id
        for cluster_id, (action, revision_id) in newest.items()
        if action in (TargetAction.APPLY, TargetAction.SKIP)
    }
    revisions = Revision.objects.in_bulk(set(wanted.values()))
    return {cluster_id: revisions[revision_id] for cluster_id, revision_id in wanted.items()}


def resync_cluster(resource: FederatedResource, cluster: Cluster, *, actor=None) -> PropagationRun:
    """Re-apply on one cluster what was approved for it (``approved_revisions``): usually the last
    propagated revision; during a staged rollout that has not reached the cluster, the revision it
    had. A re-sync never gets ahead of an approval. A resource that was never propagated has nothing
    to re-sync: its first propagation goes through a change request."""
    propagation_gate.check_resync(actor)
    resource = FederatedResource.objects.select_related("type", "propagated_revision").get(pk=resource.pk)
    if resource.propagated_revision is None:
        raise PropagationError(f"{resource} was never propagated: request a change to propagate it.")
    if refusal := propagation_gate.propagation_refusal(resource, actor=actor):  # a protected namespace says more
        raise PropagationError(refusal)
    revision = approved_revisions(resource, [cluster.pk]).get(cluster.pk)
    if revision is None:
        raise PropagationError(
            f"No approved change has sent {resource} to {cluster.name} (a cluster that joined since, or one it "
            "was removed from): re-sync repeats only what was approved for a cluster."
        )
    return propagate_revision(
        resource,
        actor=actor,
        revision=revision,
        trigger=RunTrigger.RESYNC,
        only_cluster=cluster,
        reapply_only=True,
        reapply=True,
    )


FAILED_STATUSES = tuple(
    r
    for r in PropagationReason.values
    if r not in (*PropagationReason.healthy(), PropagationReason.PENDING, PropagationReason.WAITING_FOR_REMOVAL)
)


def resync_failed(resource: FederatedResource, *, actor=None) -> PropagationRun | None:
    """Operator: one re-sync run (the last propagated revision) over every cluster where ``resource``
    failed or was skipped and that revision is what was approved for it (``approved_revisions``; a
    cluster a staged rollout has not reached is re-synced one by one); None when nothing failed.
    Audited as ``federation.resource.resync_failed``."""
    require_actor_role(actor, Role.OPERATOR)
    resource = FederatedResource.objects.select_related("type", "propagated_revision").get(pk=resource.pk)
    if resource.propagated_revision is None:
        raise PropagationError(f"{resource} was never propagated: request a change to propagate it.")
    failed = dict(
        PropagatedVersion.objects.filter(resource=resource, status__in=FAILED_STATUSES).values_list(
            "cluster_id", "cluster__name"
        )
    )
    approved = approved_revisions(resource, failed)
    failed = {pk: name for pk, name in failed.items() if approved.get(pk) == resource.propagated_revision}
    if not failed:
        return None
    with transaction.atomic():
        run = propagate_revision(
            resource,
            actor=actor,
            revision=resource.propagated_revision,
            trigger=RunTrigger.RESYNC,
            only_clusters=set(failed),
            reapply_only=True,
            reapply=True,
        )
        record_event(
            "federation.resource.resync_failed",
            actor=actor,
            obj=resource,
            summary=f"Re-sync {resource} on the {len(failed)} cluster(s) where it failed",
            after={"run": run.pk, "clusters": sorted(failed.values())},
        )
    return run


def remove_from_cluster(
    resource: FederatedResource,
    *,
    cluster: Cluster,
    actor=None,
    trigger: str = RunTrigger.UNJOIN,
    action: str | None = None,
) -> PropagationRun | None:
    """One run that removes ``resource`` from ``cluster`` (Delete or Orphan, per its retention),
    whatever its placement says: what an approved unjoin does to each resource the cluster holds
    (the one removal that reaches an isolated cluster: its admin decided to let it go), or, as a
    re-sync, a removal an approved change owed a cluster that was isolated then (``action``: the one
    it owed, e.g. a rollback's Delete of what the change it undid created, whatever the retention).
    None when the resource has no revision to name. Queued after the transaction commits."""
    propagation_gate.check_removal(actor)
    revision = resource.propagated_revision or resource.current_revision
    if revision is None:
        return None
    if action is None:
        action = TargetAction.ORPHAN if resource.retention == Retention.ORPHAN else TargetAction.DELETE
    with transaction.atomic():
        run = PropagationRun.objects.create(
            resource=resource, revision=revision, actor=actor if getattr(actor, "pk", None) else None, trigger=trigger
        )
        PropagationTarget.objects.create(run=run, cluster=cluster, action=action)
        PropagatedVersion.objects.filter(resource=resource, cluster=cluster).update(
            status=PropagationReason.WAITING_FOR_REMOVAL
        )
        record_event(
            "federation.resource.remove",
            actor=actor,
            obj=resource,
            cluster=cluster.name,
            summary=f"{'Orphan' if action == TargetAction.ORPHAN else 'Delete'} {resource} on {cluster.name} "
            f"({'unjoin' if trigger == RunTrigger.UNJOIN else 'owed by an approved change'})",
            after={"run": run.pk, "action": action},
        )
        run_id, cluster_id = run.pk, cluster.pk
        transaction.on_commit(lambda: enqueue_chunks(run_id, [cluster_id]))
    return run
