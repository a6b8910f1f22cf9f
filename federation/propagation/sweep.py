"""The periodic safety nets: re-queue targets whose task was lost, re-sync clusters Ready again."""

import logging
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from clusters.choices import ClusterState
from federation.choices import (
    PropagationReason,
    RunTrigger,
    TargetAction,
    TargetState,
)
from federation.models import FederatedResource, PropagatedVersion, PropagationRun, PropagationTarget
from federation.propagation.common import PropagationError, setting
from federation.propagation.fanout import (
    approved_revisions,
    enqueue_chunks,
    propagate_revision,
    remove_from_cluster,
    resync_cluster,
)
from federation.propagation.record import finish_run_if_complete

logger = logging.getLogger(__name__)


def resume_stale_targets(*, stale_seconds: float | None = None) -> int:
    """Re-queue targets of unfinished runs whose task message was lost (a worker killed with SIGKILL:
    the embedded broker has already removed the messages it held, Redis gives them back only after
    its visibility timeout). Stale means: RUNNING past its lease; RETRYING overdue by
    ``stale_seconds``; PENDING for longer than ``stale_seconds``. Re-queuing is safe: the claim is a
    compare-and-set, so a target whose original message still arrives runs once."""
    grace = float(stale_seconds if stale_seconds is not None else setting("FEDERATION_STALE_SECONDS", 60))
    now = timezone.now()
    cutoff = now - timedelta(seconds=grace)
    stale = PropagationTarget.objects.filter(run__finished_at__isnull=True).filter(
        Q(state=TargetState.RUNNING, lease_until__lt=now)
        | Q(state=TargetState.RETRYING, lease_until__lt=cutoff)
        | Q(state__in=[TargetState.RETRYING, TargetState.PENDING], lease_until__isnull=True, run__started_at__lt=cutoff)
        | Q(state=TargetState.PENDING, lease_until__lt=cutoff)
    )
    # a run whose last targets were written by a worker that died before it closed the run
    settled = PropagationRun.objects.filter(finished_at__isnull=True, started_at__lt=cutoff).exclude(
        targets__state__in=[TargetState.PENDING, TargetState.RUNNING, TargetState.RETRYING]
    )
    for run_id in settled.values_list("pk", flat=True)[:1000]:
        finish_run_if_complete(run_id)
    found = list(stale.order_by("run_id", "cluster_id").values_list("pk", "run_id", "cluster_id")[:10000])
    if not found:
        return 0
    # PENDING targets are stamped so that the next sweep waits another grace period for them
    PropagationTarget.objects.filter(pk__in=[pk for pk, _, _ in found], state=TargetState.PENDING).update(
        lease_until=now
    )
    by_run: dict[int, list[int]] = {}
    for _, run_id, cluster_id in found:
        by_run.setdefault(run_id, []).append(cluster_id)
    for run_id, cluster_ids in by_run.items():
        enqueue_chunks(run_id, cluster_ids)
    logger.warning("re-queued %d stale propagation target(s) of %d run(s)", len(found), len(by_run))
    return len(found)


def reconcile_waiting_clusters(*, actor=None) -> int:
    """Resources skipped on a cluster that was not Ready (or isolated) get a re-sync once it is
    Ready again; this is how a cluster that was down converges without anyone clicking. So do
    targets that waited for a namespace that has been propagated since (``retry_all_namespace_waiters``)."""
    waiting = (
        PropagatedVersion.objects.filter(
            status__in=[PropagationReason.CLUSTER_NOT_READY, PropagationReason.CLUSTER_ISOLATED],
            cluster__state=ClusterState.READY,
            cluster__isolated=False,
        )
        .exclude(resource__runs__targets__state__in=[TargetState.PENDING, TargetState.RUNNING, TargetState.RETRYING])
        .select_related("resource", "cluster")
        .distinct()
    )
    count = 0
    for pv in waiting:
        try:
            if owed := removal_owed(pv):
                remove_from_cluster(
                    pv.resource, cluster=pv.cluster, actor=actor, trigger=RunTrigger.RESYNC, action=owed
                )
            else:
                resync_cluster(pv.resource, pv.cluster, actor=actor)
            count += 1
        except PropagationError as exc:
            logger.info("reconcile of %s on %s skipped: %s", pv.resource, pv.cluster.name, exc)
    return count + retry_all_namespace_waiters(actor=actor)


def removal_owed(pv: PropagatedVersion) -> str:
    """The removal (TargetAction Delete or Orphan) the newest run that targeted ``pv``'s cluster was
    to make there and did not (held back while the cluster was isolated or not Ready): what an
    approved change, a rollback or an unjoin decided, repeated as it was decided once the cluster is
    back; "" when none is owed."""
    newest = (
        PropagationTarget.objects.filter(run__resource_id=pv.resource_id, cluster_id=pv.cluster_id)
        .order_by("-run_id")
        .values_list("action", "reason")
        .first()
    )
    owed = (
        newest is not None
        and newest[0] in (TargetAction.DELETE, TargetAction.ORPHAN)
        and newest[1]
        in (
            PropagationReason.CLUSTER_ISOLATED,
            PropagationReason.CLUSTER_NOT_READY,
        )
    )
    return newest[0] if owed else ""


def retry_namespace_waiters(namespace: str, cluster_ids, *, actor=None) -> list[PropagationRun]:
    """Targets that failed NamespaceNotFederated in ``namespace`` on ``cluster_ids`` (where that
    namespace has just been propagated) get a re-sync of what was approved for each cluster
    (``approved_revisions``: a cluster a staged rollout has not reached keeps the revision it had):
    one run per resource and revision. Called by the worker when a Namespace's run finishes, and by
    the periodic sweep."""
    waiting = (
        PropagatedVersion.objects.filter(
            status=PropagationReason.NAMESPACE_NOT_FEDERATED,
            resource__namespace=namespace,
            cluster_id__in=list(cluster_ids),
            resource__propagated_revision__isnull=False,
        )
        .exclude(resource__runs__targets__state__in=[TargetState.PENDING, TargetState.RUNNING, TargetState.RETRYING])
        .values_list("resource_id", "cluster_id")
    )
    by_resource: dict[int, set[int]] = {}
    for resource_id, cluster_id in waiting:
        by_resource.setdefault(resource_id, set()).add(cluster_id)
    runs = []
    for resource in FederatedResource.objects.filter(pk__in=by_resource).order_by("pk"):
        by_revision: dict = {}
        for cluster_id, revision in approved_revisions(resource, by_resource[resource.pk]).items():
            by_revision.setdefault(revision, set()).add(cluster_id)
        for revision, ids in sorted(by_revision.items(), key=lambda item: item[0].pk):
            try:
                runs.append(
                    propagate_revision(
                        resource,
                        actor=actor,
                        revision=revision,
                        trigger=RunTrigger.RESYNC,
                        only_clusters=ids,
                        reapply_only=True,
                    )
                )
            except PropagationError as exc:
                logger.info("retry of %s after namespace %s skipped: %s", resource, namespace, exc)
    return runs


def retry_all_namespace_waiters(*, actor=None) -> int:
    """The sweep's share: every NamespaceNotFederated target whose namespace is now OK on its cluster."""
    ns_ok = PropagatedVersion.objects.filter(
        status=PropagationReason.OK, resource__type__group="", resource__type__kind="Namespace"
    ).values_list("resource__name", "cluster_id")
    waiting = set(
        PropagatedVersion.objects.filter(status=PropagationReason.NAMESPACE_NOT_FEDERATED).values_list(
            "resource__namespace", "cluster_id"
        )
    )
    by_namespace: dict[str, list[int]] = {}
    for name, cluster_id in ns_ok:
        if (name, cluster_id) in waiting:
            by_namespace.setdefault(name, []).append(cluster_id)
    return sum(len(retry_namespace_waiters(name, ids, actor=actor)) for name, ids in sorted(by_namespace.items()))
