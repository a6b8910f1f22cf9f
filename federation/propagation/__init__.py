"""Propagation, status collection and resource drift: the part of federation that crosses the
network (always through clusters/kube.py). One module per job:

    planning   what a run would do, per cluster
    fanout     a run's targets, enqueued in chunks; re-sync of one cluster
    worker     the task's body: claim a chunk (lease), its network half on a thread pool, record it
    network    server-side apply / delete on one cluster, and how a refusal is classified
    record     what finished targets did, written with their audit events; closing a run
    progress   a run's progress, a resource's condition
    preview    rendered manifests and their diffs against the live objects
    drift      resource drift: detect, report, enforce
    sweep      the periodic safety nets (stale targets, clusters Ready again)
    common     the error, the settings, how a live object is identified

Public API:

    plan_targets(resource, revision) -> list[ClusterPlan]      what a run would do, per cluster
    propagate_revision(resource, *, actor, revision=None, trigger="propagate") -> PropagationRun
        THE entry point for the approval workflow: fan out one propagate_targets_task per chunk of
        target clusters on queue "propagation" (after the surrounding transaction commits).
    resync_cluster(resource, cluster, *, actor) -> PropagationRun   retry/re-apply on one cluster
    resync_failed(resource, *, actor) -> PropagationRun | None      operator: re-sync every failed cluster
    remove_from_cluster(resource, *, cluster, actor) -> PropagationRun | None
        remove (Delete/Orphan per retention) the resource from one cluster, e.g. an approved unjoin
    propagate_targets(run_id, cluster_ids) -> dict[int, TargetOutcome]   what the task calls
    propagate_to_cluster(run_id, cluster_id) -> TargetOutcome        one cluster's share of a run
    retries_by_delay(outcomes) -> dict[float, list[int]]             the task's retries, grouped
    run_progress(run) -> RunProgress
    aggregate_condition(pvs, *, running=False) -> str
    preview_revision(resource, revision=None) -> list[ClusterPreview]
    detect_drift(*, cluster=None, resource=None) -> DriftSummary       what the periodic task calls
    resume_stale_targets(*, stale_seconds=None) -> int                 re-queue lost targets
    reconcile_waiting_clusters(*, actor=None) -> int                   re-sync clusters Ready again
    PropagationError                                                   refused as asked (user message)
"""

from federation.propagation.common import PropagationError
from federation.propagation.drift import DriftSummary, detect_drift
from federation.propagation.fanout import (
    FAILED_STATUSES,
    approved_revisions,
    propagate_revision,
    remove_from_cluster,
    resync_cluster,
    resync_failed,
)
from federation.propagation.planning import ClusterPlan, plan_targets
from federation.propagation.preview import ClusterPreview, preview_revision
from federation.propagation.progress import (
    RunProgress,
    aggregate_condition,
    run_progress,
)
from federation.propagation.record import TargetOutcome
from federation.propagation.sweep import (
    reconcile_waiting_clusters,
    resume_stale_targets,
)
from federation.propagation.worker import (
    propagate_targets,
    propagate_to_cluster,
    retries_by_delay,
)

__all__ = [
    "FAILED_STATUSES",
    "ClusterPlan",
    "ClusterPreview",
    "DriftSummary",
    "PropagationError",
    "RunProgress",
    "TargetOutcome",
    "aggregate_condition",
    "approved_revisions",
    "detect_drift",
    "plan_targets",
    "preview_revision",
    "propagate_revision",
    "propagate_targets",
    "propagate_to_cluster",
    "reconcile_waiting_clusters",
    "remove_from_cluster",
    "resume_stale_targets",
    "resync_cluster",
    "resync_failed",
    "retries_by_delay",
    "run_progress",
]
