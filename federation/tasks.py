"""Celery entry points for federation. Thin: take ids, call services."""

import logging
from collections import Counter

from celery import shared_task
from django.db import InterfaceError, OperationalError

from clusters.models import Cluster
from federation import propagation, watching

logger = logging.getLogger(__name__)


@shared_task(
    queue="propagation",
    acks_late=True,  # safe twice: targets are claimed with compare-and-set, applies are idempotent
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    retry_backoff_max=30,
    # a database error: the chunk gives its targets back (not counted as their attempts) and is retried
    # for up to about 2 minutes (backoff 1, 2, 4 ... 30 s); past that the stale-target sweep queues them
    max_retries=8,
)
def propagate_targets_task(run_id: int, cluster_ids: list[int]) -> dict:
    """Apply (or delete/orphan) one run's share on a chunk of clusters; the targets that failed
    transiently come back as one task per backoff delay."""
    outcomes = propagation.propagate_targets(run_id, cluster_ids)
    for delay, retry_ids in propagation.retries_by_delay(outcomes).items():
        propagate_targets_task.apply_async((run_id, retry_ids), countdown=delay, queue="propagation")
    states = Counter(outcome.state or "skipped" for outcome in outcomes.values())
    return {"run_id": run_id, "clusters": len(outcomes), **states}


@shared_task(
    queue="propagation",
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    retry_backoff_max=30,
    max_retries=8,
)
def propagate_to_cluster_task(run_id: int, cluster_id: int) -> dict:
    """One cluster's share of a run (the unjoin removal, and messages queued before chunking)."""
    return propagate_targets_task(run_id, [cluster_id])


@shared_task(
    queue="default",
    soft_time_limit=110,
    time_limit=130,
    expires=55,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def detect_drift_task() -> dict:
    """Periodic (beat): the safety-net drift sweep (one LIST per type) of each Ready cluster whose
    watch is not healthy, or that is due for the slow sweep (FEDERATION_SWEEP_SECONDS); and re-sync
    of clusters that came back."""
    propagation.resume_stale_targets()
    resynced = propagation.reconcile_waiting_clusters()
    ids = watching.clusters_to_sweep()
    for cluster_id in ids:
        detect_cluster_drift_task.apply_async((cluster_id,), expires=55)
    return {"clusters": len(ids), "resynced": resynced}


@shared_task(
    queue="default",
    soft_time_limit=100,
    time_limit=120,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def detect_cluster_drift_task(cluster_id: int) -> dict:
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return {"cluster_id": cluster_id, "skipped": "gone"}
    summary = propagation.detect_drift(cluster=cluster)
    if not summary.errors:
        watching.mark_swept(cluster_id)
    return {
        "cluster_id": cluster_id,
        "checked": summary.checked,
        "out_of_sync": summary.out_of_sync,
        "repaired": summary.repaired,
    }


@shared_task(
    queue="default",
    soft_time_limit=50,
    time_limit=60,
    expires=55,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def resume_stale_targets_task(stale_seconds: float | None = None) -> int:
    """Re-queue propagation targets whose task was lost with a killed worker (also run by the
    periodic drift task, so recovery needs no extra beat entry)."""
    return propagation.resume_stale_targets(stale_seconds=stale_seconds)


MEMBERSHIP_WAIT_SECONDS = 5
MEMBERSHIP_MAX_WAITS = 120  # ten minutes for a joining cluster's first successful probe


@shared_task(
    queue="default", acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=True, max_retries=3
)
def reconcile_membership_task(cluster_id: int, reason: str = "joined", waits: int = 0) -> dict:
    """A cluster joined or was relabelled: once it is Ready, propagate/remove what the approved
    placements now say (federation.membership). Not Ready yet: ask again in a few seconds."""
    from federation import enqueue, membership

    outcome = membership.reconcile_when_ready(cluster_id, reason)
    if outcome == "waiting" and waits < MEMBERSHIP_MAX_WAITS:
        enqueue.reconcile_membership(cluster_id, reason, countdown=MEMBERSHIP_WAIT_SECONDS, waits=waits + 1)
    return {"cluster_id": cluster_id, "outcome": outcome}


@shared_task(
    queue="default", acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=True, max_retries=3
)
def reconcile_resource_membership_task(resource_id: int) -> dict:
    """A staged rollout of the resource ended: the clusters that joined its placement meanwhile (their
    reconcile waited for it) get what its placement now says (federation.membership)."""
    from federation import membership

    started = membership.reconcile_resource_membership(resource_id)
    return {"resource_id": resource_id, "started": len(started)}


@shared_task(
    queue="default", acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=True, max_retries=3
)
def reconcile_namespace_members_task(namespace: str, cluster_ids: list[int]) -> dict:
    """A Namespace reached these clusters: the resources in it that hold nothing there get what
    their placement, within the namespace's, now says (federation.membership)."""
    from federation import membership

    started = membership.reconcile_namespace_members(namespace, cluster_ids)
    return {"namespace": namespace, "started": len(started)}


@shared_task(
    queue="default", acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=True, max_retries=3
)
def reconcile_memberships_task(cluster_ids: list[int], reason: str = "joined") -> int:
    """The fan-out of a batch (an import of many clusters, a bulk relabel): one reconcile per cluster."""
    from federation import enqueue

    for cluster_id in cluster_ids:
        enqueue.reconcile_membership(cluster_id, reason)
    return len(cluster_ids)
