"""Propagation, status collection and resource drift: the part of federation that crosses the
network (always through clusters/kube.py).

Public API:

    plan_targets(resource, revision) -> list[ClusterPlan]      what a run would do, per cluster
    propagate_revision(resource, *, actor, revision=None, trigger="propagate") -> PropagationRun
        THE entry point for the approval workflow: fan out one propagate_to_cluster_task per
        target cluster on queue "propagation" (after the surrounding transaction commits).
    resync_cluster(resource, cluster, *, actor) -> PropagationRun   retry/re-apply on one cluster
    propagate_to_cluster(run_id, cluster_id) -> TargetOutcome        what the task calls
    run_progress(run) -> RunProgress
    preview_revision(resource, revision=None) -> list[ClusterPreview]
    detect_drift(*, cluster=None, resource=None) -> DriftSummary       what the periodic task calls
"""

import logging
import os
import random
import re
import threading
import uuid
from concurrent.futures import ALL_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, F, OuterRef, Q
from django.utils import timezone

from clusters import kube
from clusters.choices import ClusterState
from clusters.models import Cluster
from clusters.services import FIELDS_READ_BY_CONNECTION_FOR, connection_for
from fedportal import bulk
from fedportal.audit import append_events, prepare_events, record_event, record_events
from federation import schedule
from federation.choices import (
    Condition,
    DriftPolicy,
    PropagationReason,
    Retention,
    RunState,
    RunTrigger,
    SyncState,
    TargetAction,
    TargetState,
)
from federation.diffs import SERVER_POPULATED, diff_desired_live, strip_server_fields, unified_yaml_diff
from federation.manifests import dump_yaml
from federation.models import FederatedResource, FederatedType, PropagatedVersion, PropagationRun, PropagationTarget, Revision
from federation.overrides import OverrideError
from federation.placement import ClusterRef
from federation.rendering import (
    MANAGED_LABEL,
    RETAINED_PATHS,
    content_hash,
    ignored_paths,
    mask_secret_changes,
    mask_secret_object,
    render_manifest,
)
from federation.rendering import override_hash as hash_overrides  # the local variables are called override_hash

logger = logging.getLogger(__name__)

_UNKNOWN_FIELD_RE = re.compile(r'unknown field \\?"([^"\\]+)\\?"')
# Server-side apply's spelling of the same rejection: ".spec.foo: field not declared in schema".
_UNDECLARED_FIELD_RE = re.compile(r"\.?([A-Za-z0-9_.\[\]-]+): field not declared in schema")


class PropagationError(RuntimeError):
    """The resource cannot be propagated as asked (message is for the user)."""


def _setting(name: str, default):
    return getattr(settings, name, default)


def max_attempts() -> int:
    return int(_setting("FEDERATION_MAX_ATTEMPTS", 8))


def backoff_seconds(attempt: int) -> float:
    """Exponential backoff: base * 2**(attempt-1), capped."""
    base = float(_setting("FEDERATION_RETRY_BASE_SECONDS", 2.0))
    cap = float(_setting("FEDERATION_RETRY_MAX_SECONDS", 60.0))
    return min(cap, base * (2 ** max(attempt - 1, 0)))


def _lease_seconds() -> int:
    """How long a claimed target is held: past it, another worker (or the stale sweep) takes over."""
    return int(_setting("FEDERATION_LEASE_SECONDS", int(_setting("CELERY_TASK_TIME_LIMIT", 120)) + 10))


def _timeout() -> float:
    return float(_setting("FEDPORTAL_KUBE_TIMEOUT_SECONDS", 10.0))


def object_version(obj: dict | None) -> str:
    """KubeFed's propagated version: gen:N when the object has a generation, else rv:N."""
    if not obj:
        return ""
    metadata = obj.get("metadata") or {}
    if metadata.get("generation"):
        return f"gen:{metadata['generation']}"
    return f"rv:{metadata.get('resourceVersion', '')}"


# --- planning ---------------------------------------------------------------------------------

@dataclass
class ClusterPlan:
    cluster: Cluster
    action: str  # TargetAction
    replicas: int | None = None
    reason: str = ""  # for skips: PropagationReason
    message: str = ""


PLAN_FIELDS = ("id", "name", "labels", "state", "isolated", "isolated_reason")


def plan_targets(resource: FederatedResource, revision: Revision, *, clusters=None, existing=None) -> list[ClusterPlan]:
    """What propagating ``revision`` does on each cluster: apply, delete/orphan, or skip (why)."""
    if clusters is not None:
        clusters = list(clusters)
        rows = {c.name: (c.pk, c.labels, c.state, c.isolated) for c in clusters}
    else:  # the placement is decided on names, labels and readiness; full rows only for the clusters it names
        rows = {name: (pk, labels, state, isolated) for pk, name, labels, state, isolated
                in Cluster.objects.values_list("pk", "name", "labels", "state", "isolated")}
    refs = [ClusterRef(name, value[1] or {}) for name, value in rows.items()]
    schedulable = {name for name, (_, _, state, isolated) in rows.items() if state == ClusterState.READY and not isolated}
    loaded_here = existing is None
    if loaded_here:
        # what planning reads of each PropagatedVersion (the applied manifest and status only for replicas)
        fields = ["id", "resource_id", "cluster_id", "status"] + (
            ["applied_manifest", "remote_status"] if revision.scheduling else [])
        existing = list(resource.propagated_versions.only(*fields))
    names = {value[0]: name for name, value in rows.items()}
    decision = schedule.decide(resource, revision, refs, schedulable,
                               {names[pv.cluster_id]: pv for pv in existing if pv.cluster_id in names}
                               if revision.scheduling else {})
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
            plans.append(ClusterPlan(cluster, TargetAction.SKIP, reason=PropagationReason.CLUSTER_ISOLATED,
                                     message=f"{name} is isolated{': ' + cluster.isolated_reason if cluster.isolated_reason else ''}; not propagated until the isolation is lifted."))
        elif cluster.state != ClusterState.READY:
            plans.append(ClusterPlan(cluster, TargetAction.SKIP, reason=PropagationReason.CLUSTER_NOT_READY,
                                     message=f"{name} is {cluster.state}; propagation resumes when it is Ready again."))
        else:
            plans.append(ClusterPlan(cluster, TargetAction.APPLY, replicas=replicas.get(name) if decision.replicas is not None else None))
    targeted = set(candidates)
    removal = TargetAction.ORPHAN if resource.retention == Retention.ORPHAN else TargetAction.DELETE
    for pv in existing:
        if pv.cluster.name not in targeted and pv.status not in (PropagationReason.REMOVED, PropagationReason.ORPHANED):
            plans.append(ClusterPlan(pv.cluster, removal))
    return sorted(plans, key=lambda p: p.cluster.name)


def _clusters_named(names: set[str], ids: set[int], *, total: int) -> list[Cluster]:
    """Cluster rows by name or id: one query, the whole table when that is most of it anyway."""
    if len(names) + len(ids) >= total // 2:
        return list(Cluster.objects.all())
    return list(Cluster.objects.filter(Q(name__in=names) | Q(pk__in=ids)))


# --- fan-out ------------------------------------------------------------------------------------

def _enqueue(run_id: int, cluster_ids: list[int]) -> None:
    """One ``propagate_targets_task`` per chunk of FEDERATION_BATCH_SIZE clusters."""
    from federation.tasks import propagate_targets_task

    ids, size = sorted(cluster_ids), batch_size()
    for start in range(0, len(ids), size):
        propagate_targets_task.apply_async((run_id, ids[start:start + size]), queue="propagation")


def _pv(resource, cluster) -> PropagatedVersion:
    pv, _ = PropagatedVersion.objects.get_or_create(resource=resource, cluster=cluster)
    return pv


# what propagation reads of a PropagatedVersion (not the applied manifest or the drift)
_PV_FIELDS = ("id", "resource_id", "cluster_id", "status", "template_hash", "override_hash", "version", "revision_id",
              "remote_status", "live_uid")


def _pvs(resource, clusters) -> dict[int, PropagatedVersion]:
    """PropagatedVersions of ``resource`` on ``clusters`` by cluster id, the missing ones created in
    bulk; their ``resource`` and ``cluster`` are the caller's instances (no query per row)."""
    by_id = {c.pk: c for c in clusters}

    def load(ids):
        return {pv.cluster_id: pv for pv in PropagatedVersion.objects.only(*_PV_FIELDS)
                .filter(resource=resource, cluster_id__in=ids)}

    found = load(list(by_id))
    created = _create_missing_pvs(resource, clusters, present=set(found))
    if created:
        found.update(load(created))
    resource_field, cluster_field = PropagatedVersion.resource.field, PropagatedVersion.cluster.field
    for pv in found.values():  # what assigning pv.resource and pv.cluster caches, without its checks per row
        resource_field.set_cached_value(pv, resource)
        cluster_field.set_cached_value(pv, by_id[pv.cluster_id])
    return found


def _create_missing_pvs(resource, clusters, *, present: set[int]) -> list[int]:
    """Create the PropagatedVersions of ``resource`` on the ``clusters`` whose ids are not in
    ``present`` (Pending, as a new row is; one another process made meanwhile is left as it is).
    Returns those clusters' ids."""
    missing = [c for c in clusters if c.pk not in present]
    bulk.insert_values(PropagatedVersion, [{"resource_id": resource.pk, "cluster_id": c.pk} for c in missing],
                       ignore_conflicts=True)
    return [c.pk for c in missing]


def propagate_revision(resource: FederatedResource, *, actor=None, revision: Revision | None = None,
                       trigger: str = RunTrigger.PROPAGATE, only_cluster: Cluster | None = None) -> PropagationRun:
    """Send ``revision`` (default: the current one) to every cluster its placement selects, and
    remove it (Delete or Orphan, per retention) from clusters that left the placement.

    Returns the PropagationRun at once; one ``propagate_to_cluster_task`` per cluster runs on queue
    "propagation" after the transaction commits. Propagating the same revision twice writes
    nothing the second time (hashes and object versions match). The approval workflow calls this
    once a change request is approved.
    """
    resource = FederatedResource.objects.select_related("type", "current_revision").get(pk=resource.pk)
    revision = revision or resource.current_revision
    if revision is None:
        raise PropagationError(f"{resource} has no revision to propagate.")
    if revision.resource_id != resource.pk:
        raise PropagationError("That revision belongs to another resource.")
    if not resource.type.propagation_enabled:
        raise PropagationError(f"Propagation of {resource.type.name} is Disabled; an admin can enable it on the Federated types page.")
    # what planning and recording the run read of a cluster (the workers load their clusters whole)
    plans = plan_targets(resource, revision, clusters=Cluster.objects.only(*PLAN_FIELDS))
    if only_cluster is not None:
        plans = [p for p in plans if p.cluster.pk == only_cluster.pk]
        if not plans:
            raise PropagationError(f"{only_cluster.name} is not a target of {resource} and holds nothing to remove.")
    with transaction.atomic():
        run = PropagationRun.objects.create(resource=resource, revision=revision, trigger=trigger,
                                            actor=actor if getattr(actor, "pk", None) else None)
        now = timezone.now()
        to_queue = []
        # bulk writes: a 1,000-cluster run is a handful of queries, not thousands
        bulk.insert_values(PropagationTarget, [
            dict(run_id=run.pk, cluster_id=plan.cluster.pk, action=plan.action, replicas=plan.replicas,
                 state=TargetState.DONE if plan.action == TargetAction.SKIP else TargetState.PENDING,
                 reason=plan.reason, message=plan.message, finished_at=now if plan.action == TargetAction.SKIP else None)
            for plan in plans
        ])
        # the PropagatedVersions: their statuses, and the missing ones created (never read back)
        known = {cluster_id: (pk, status) for cluster_id, pk, status in
                 PropagatedVersion.objects.filter(resource=resource).values_list("cluster_id", "pk", "status")}
        _create_missing_pvs(resource, [plan.cluster for plan in plans], present=set(known))
        skipped = [plan.cluster for plan in plans if plan.action == TargetAction.SKIP]
        skipped_pvs = _pvs(resource, skipped) if skipped else {}
        waiting: dict[str, list[int]] = {PropagationReason.PENDING: [], PropagationReason.WAITING_FOR_REMOVAL: []}
        skip_events: list = []
        for plan in plans:
            if plan.action == TargetAction.SKIP:
                _status_change(skipped_pvs[plan.cluster.pk], plan.reason, plan.message, actor=actor, events=skip_events)
                continue
            to_queue.append(plan.cluster.pk)
            pk, status = known.get(plan.cluster.pk, (None, PropagationReason.PENDING))
            if pk is not None and status != PropagationReason.OK:
                waiting[PropagationReason.PENDING if plan.action == TargetAction.APPLY
                        else PropagationReason.WAITING_FOR_REMOVAL].append(pk)
        for status, pks in waiting.items():
            if pks:
                PropagatedVersion.objects.filter(pk__in=pks).update(status=status, message="", last_attempt_at=now)
        record_events(skip_events)
        FederatedResource.objects.filter(pk=resource.pk).update(propagated_revision=revision)
        record_event(
            f"federation.resource.{trigger}", actor=actor, obj=resource,
            summary=f"{RunTrigger(trigger).label} revision {revision.number} of {resource} to "
                    f"{len(to_queue)} cluster(s)" + (f", {len(plans) - len(to_queue)} skipped" if len(plans) > len(to_queue) else ""),
            after={"run": run.pk, "revision": revision.number,
                   "targets": {p.cluster.name: p.action if p.action != TargetAction.SKIP else f"skip:{p.reason}" for p in plans}},
        )
        if not to_queue:
            _finish_run_if_complete(run.pk)
        run_id = run.pk
        transaction.on_commit(lambda: _enqueue(run_id, to_queue))
    return run


def resync_cluster(resource: FederatedResource, cluster: Cluster, *, actor=None) -> PropagationRun:
    """Re-apply the last propagated (so already approved) revision on one cluster. A resource that was
    never propagated has nothing to re-sync: its first propagation goes through a change request."""
    resource = FederatedResource.objects.select_related("type", "propagated_revision").get(pk=resource.pk)
    revision = resource.propagated_revision
    if revision is None:
        raise PropagationError(f"{resource} was never propagated: request a change to propagate it.")
    return propagate_revision(resource, actor=actor, revision=revision, trigger=RunTrigger.RESYNC, only_cluster=cluster)


# --- the task's body: a chunk of one run's targets -------------------------------------------------
#
# A run is fanned out as one task per chunk of clusters (FEDERATION_BATCH_SIZE). A task claims its
# targets with one compare-and-set UPDATE, does the network half of every target on its worker
# process's thread pool (FEDERATION_THREADS per process, shared by the chunks the process runs;
# threads never touch the database), and writes what has finished every
# FLUSH_SECONDS in one transaction: the PropagatedVersions, the targets and their audit events
# together, so a killed worker leaves either all of a target's record or none of it.

FLUSH_SECONDS = 1.0  # how long finished targets of a chunk may wait for slower ones before being written


def batch_size() -> int:
    return max(1, int(_setting("FEDERATION_BATCH_SIZE", 50)))


def thread_count() -> int:
    return max(1, int(_setting("FEDERATION_THREADS", 16)))


@dataclass
class TargetOutcome:
    state: str = ""
    reason: str = ""
    message: str = ""
    changed: bool = False
    retry_in: float | None = None
    skipped: str = ""


class _Failure(Exception):
    def __init__(self, reason: str, message: str, *, transient: bool = False):
        super().__init__(message)
        self.reason, self.message, self.transient = reason, message, transient


# what the network half found on one cluster
APPLIED, UNCHANGED, DELETED, GONE, ORPHANED, SUPERSEDED, NEEDS_NAMESPACE, FAILED = (
    "applied", "unchanged", "deleted", "gone", "orphaned", "superseded", "needs_namespace", "failed")


@dataclass
class _Step:
    cluster: Cluster
    pv: PropagatedVersion
    outcome: str
    failure: _Failure | None = None
    existed: bool = False
    manifest: dict | None = None
    template_hash: str = ""
    override_hash: str = ""
    obj: dict | None = None
    warnings: list[str] = field(default_factory=list)
    remote_status: dict | None = None


# What a chunk reads of its targets and their clusters (a cluster row is wide: its inventory, probe
# state and labels are not needed to apply): the connection, and the version that failure messages name.
CHUNK_TARGET_FIELDS = ("id", "run_id", "cluster_id", "action", "replicas", "attempts",
                       *(f"cluster__{name}" for name in (*FIELDS_READ_BY_CONNECTION_FOR, "server_version")))


def _claim(run_id: int, cluster_ids: list[int]) -> list[PropagationTarget]:
    """Compare-and-set claim of a chunk's targets; returns the ones this call holds."""
    now = timezone.now()
    # a stamp unique to this call, so we can read back which rows we won
    stamp = now + timedelta(seconds=_lease_seconds(), microseconds=random.randrange(1, 999_999))
    (PropagationTarget.objects.filter(run_id=run_id, cluster_id__in=cluster_ids,
                                      state__in=[TargetState.PENDING, TargetState.RETRYING, TargetState.RUNNING])
     # RETRYING: nobody holds it (lease_until is when the retry is due); others: free or expired lease
     .filter(Q(state=TargetState.RETRYING) | Q(lease_until__isnull=True) | Q(lease_until__lt=now))
     .update(state=TargetState.RUNNING, lease_until=stamp, attempts=F("attempts") + 1))
    return list(PropagationTarget.objects.select_related("cluster").only(*CHUNK_TARGET_FIELDS)
                .filter(run_id=run_id, cluster_id__in=cluster_ids, state=TargetState.RUNNING, lease_until=stamp)
                .order_by("cluster_id"))


_pool_lock = threading.Lock()
_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid, size, pool)


def _network_pool() -> ThreadPoolExecutor:
    """The worker process's one pool for the network half of every chunk it runs: at most
    FEDERATION_THREADS requests in flight per process, however many chunks run at once. A pool per
    chunk multiplied the threads by the chunks (8 chunks x 16 threads), and every thread past what the
    clusters can answer only adds GIL contention: a request cost twice the CPU in a 16-thread process
    that it costs in a 1-thread one. Made again after a fork (prefork children) or a settings change."""
    global _pool
    size = thread_count()
    with _pool_lock:
        if _pool is None or _pool[:2] != (os.getpid(), size):
            if _pool is not None and _pool[0] == os.getpid():
                _pool[2].shutdown(wait=False)
            _pool = (os.getpid(), size, ThreadPoolExecutor(size, thread_name_prefix="propagation"))
        return _pool[2]


def propagate_targets(run_id: int, cluster_ids) -> dict[int, TargetOutcome]:
    """Do a chunk of one run's targets. Safe to call twice (compare-and-set claim on each target).
    Returns an outcome per cluster id; ``retry_in`` is set where a transient failure wants a retry."""
    ids = sorted({int(i) for i in cluster_ids})
    targets = _claim(run_id, ids)
    outcomes = {i: TargetOutcome(skipped="not pending, or another worker holds it") for i in ids}
    if not targets:
        return outcomes
    # the placement is planning's (propagate_revision's), and may name every cluster of the fleet
    run = (PropagationRun.objects.select_related("resource__type", "revision", "actor").defer("revision__placement")
           .annotate(has_newer_run=Exists(PropagationRun.objects.filter(resource=OuterRef("resource"),
                                                                        pk__gt=OuterRef("pk"))))
           .get(pk=run_id))
    resource = run.resource
    pvs = _pvs(resource, [t.cluster for t in targets])
    newer = _clusters_in_newer_runs(run, [t.cluster_id for t in targets])
    steps = [(t, _Step(t.cluster, pvs[t.cluster_id], SUPERSEDED)) for t in targets if t.cluster_id in newer]
    todo = [t for t in targets if t.cluster_id not in newer]
    if steps:
        outcomes.update(_record(run, steps))
    if todo:
        pool = _network_pool()
        pending = {pool.submit(_network_step, run, t, pvs[t.cluster_id]): t for t in todo}
        while pending:
            done, _ = wait(pending, timeout=FLUSH_SECONDS, return_when=ALL_COMPLETED)
            if done:
                finished = [(pending.pop(future), future.result()) for future in done]
                outcomes.update(_record(run, [(t, _complete_namespace(run, t, step)) for t, step in finished]))
    # only now can the run be complete: until its last flush this chunk held targets still running
    _finish_run_if_complete(run.pk)
    return outcomes


def _clusters_in_newer_runs(run: PropagationRun, cluster_ids: list[int]) -> set[int]:
    """Which of ``cluster_ids`` a later run of the same resource also targets (that run's revision
    wins). Usually there is no later run, as the run's ``has_newer_run`` says."""
    if not run.has_newer_run:
        return set()
    return set(PropagationTarget.objects.filter(run__resource_id=run.resource_id, cluster_id__in=cluster_ids,
                                                run_id__gt=run.pk).values_list("cluster_id", flat=True))


def propagate_to_cluster(run_id: int, cluster_id: int) -> TargetOutcome:
    """One cluster's share of a run (``propagate_targets`` for a chunk of one)."""
    return propagate_targets(run_id, [cluster_id])[int(cluster_id)]


def retries_by_delay(outcomes: dict[int, TargetOutcome]) -> dict[float, list[int]]:
    """Cluster ids whose targets want a retry, grouped by how long to wait (one task per group)."""
    due: dict[float, list[int]] = {}
    for cluster_id, outcome in sorted(outcomes.items()):
        if outcome.retry_in is not None:
            due.setdefault(outcome.retry_in, []).append(cluster_id)
    return due


def _network_step(run: PropagationRun, target: PropagationTarget, pv: PropagatedVersion) -> _Step:
    """The network half of one target (runs on a pool thread: no database access)."""
    cluster = target.cluster
    try:
        if target.action == TargetAction.APPLY:
            return _apply_step(run.resource, run.revision, cluster, pv, connection_for(cluster), replicas=target.replicas)
        if target.action == TargetAction.ORPHAN:
            return _Step(cluster, pv, ORPHANED)
        return _delete_step(run.resource, cluster, pv)
    except _Failure as failure:
        return _Step(cluster, pv, FAILED, failure=failure)
    except Exception as exc:  # noqa: BLE001 - a credential that cannot be decrypted and the like
        logger.exception("propagation of run %s to %s failed", run.pk, cluster.name)
        return _Step(cluster, pv, FAILED, failure=_Failure(PropagationReason.CLUSTER_NOT_READY,
                                                           f"Cannot reach {cluster.name}: {type(exc).__name__}"))


def _complete_namespace(run: PropagationRun, target: PropagationTarget, step: _Step) -> _Step:
    """A namespaced object whose namespace is missing: federate the namespace first (database and
    network, so on the task's own thread; rare), then apply the object."""
    if step.outcome != NEEDS_NAMESPACE:
        return step
    try:
        conn = connection_for(step.cluster)
        _ensure_namespace(run.resource, step.cluster, conn, actor=run.actor)
        step = _apply_step(run.resource, run.revision, step.cluster, step.pv, conn, replicas=target.replicas)
        if step.outcome == NEEDS_NAMESPACE:
            raise _Failure(PropagationReason.NAMESPACE_NOT_FEDERATED,
                           f"Namespace {run.resource.namespace} is still missing on {step.cluster.name}.", transient=True)
        return step
    except _Failure as failure:
        return _Step(step.cluster, step.pv, FAILED, failure=failure)


def _record(run: PropagationRun, steps: list[tuple[PropagationTarget, _Step]]) -> dict[int, TargetOutcome]:
    """Write what a chunk's finished targets did, in one transaction with their audit events. What the
    applied targets write (most of a chunk) is prepared before the transaction, and written with one
    statement, so the write lock is held briefly while other chunks wait for it."""
    resource, revision, actor = run.resource, run.revision, run.actor
    outcomes, events, finished = {}, [], {}
    now = timezone.now()
    applied = [(target, step, _applied_fields(resource, revision, step, now=now))
               for target, step in steps if step.outcome == APPLIED]
    applied_events = prepare_events([_applied_event(resource, revision, step, fields, replicas=target.replicas, actor=actor)
                                     for target, step, fields in applied])
    with transaction.atomic():
        _write_applied({step.pv: fields for _, step, fields in applied})
        for target, step in steps:
            pv, cluster = step.pv, step.cluster
            if step.outcome == FAILED:
                failure = step.failure
                if failure.transient and target.attempts < max_attempts():
                    delay = backoff_seconds(target.attempts)
                    message = f"{failure.message} Retrying in {delay:g}s (attempt {target.attempts} of {max_attempts()})."
                    _status_change(pv, failure.reason, message, actor=actor, events=events)  # audited when it changes
                    PropagationTarget.objects.filter(pk=target.pk).update(
                        state=TargetState.RETRYING, lease_until=now + timedelta(seconds=delay),
                        reason=failure.reason, message=message)
                    outcomes[target.cluster_id] = TargetOutcome(state=TargetState.RETRYING, reason=failure.reason,
                                                                message=message, retry_in=delay)
                    continue
                _status_change(pv, failure.reason, failure.message, actor=actor, events=events)
                result = (TargetState.FAILED, failure.reason, failure.message, False)
            elif step.outcome == APPLIED:
                verb = "Updated" if step.existed else "Created"
                result = (TargetState.DONE, PropagationReason.OK, "; ".join(step.warnings) or f"{verb}.", True)
            elif step.outcome == UNCHANGED:
                if step.remote_status is not None and step.remote_status != pv.remote_status:
                    PropagatedVersion.objects.filter(pk=pv.pk).update(remote_status=step.remote_status)
                    pv.remote_status = step.remote_status
                result = (TargetState.DONE, PropagationReason.OK, "Up to date.", False)
            elif step.outcome == ORPHANED:
                _status_change(pv, PropagationReason.ORPHANED, f"Left on {cluster.name} (retention Orphan).", actor=actor,
                               events=events, sync_state=SyncState.UNKNOWN, drift=[])
                result = (TargetState.DONE, PropagationReason.ORPHANED, "Orphaned.", False)
            elif step.outcome in (DELETED, GONE):
                deleted = step.outcome == DELETED
                _status_change(pv, PropagationReason.REMOVED,
                               f"Deleted from {cluster.name}." if deleted else f"Already gone from {cluster.name}.",
                               actor=actor, events=events, applied_manifest=None, sync_state=SyncState.UNKNOWN, drift=[],
                               version="", remote_status=None, live_uid="")
                result = (TargetState.DONE, PropagationReason.REMOVED, "Deleted." if deleted else "Already gone.", deleted)
            else:  # SUPERSEDED
                result = (TargetState.DONE, "", "Superseded by a newer propagation run.", False)
            finished.setdefault(result, []).append(target.pk)
            state, reason, message, changed = result
            outcomes[target.cluster_id] = TargetOutcome(state=state, reason=reason, message=message, changed=changed)
        # most targets of a chunk end the same way: one UPDATE per distinct ending
        for (state, reason, message, changed), pks in finished.items():
            PropagationTarget.objects.filter(pk__in=pks).update(
                state=state, reason=reason, message=message, changed=changed, lease_until=None, finished_at=now)
        append_events(applied_events + prepare_events(events))
    return outcomes


def _finish_run_if_complete(run_id: int) -> None:
    unfinished = (TargetState.PENDING, TargetState.RUNNING, TargetState.RETRYING)
    if PropagationTarget.objects.filter(run_id=run_id, state__in=unfinished).exists():
        return  # every chunk but the last one of a run stops here, at the first unfinished target
    counts = dict(PropagationTarget.objects.filter(run_id=run_id).values_list("state").annotate(n=Count("id")))
    failed = counts.get(TargetState.FAILED, 0)
    done = counts.get(TargetState.DONE, 0)
    state = RunState.SUCCEEDED if not failed else (RunState.FAILED if not done else RunState.PARTIALLY_FAILED)
    finished = PropagationRun.objects.filter(pk=run_id, finished_at__isnull=True).update(state=state, finished_at=timezone.now())
    if finished:
        run = PropagationRun.objects.select_related("resource__type").get(pk=run_id)
        record_event("federation.run.finish", actor=None, obj=run.resource,
                     summary=f"Propagation run {run_id} of {run.resource} finished: {state} ({done} done, {failed} failed)",
                     after={"run": run_id, "state": state, "done": done, "failed": failed})


def _status_change(pv: PropagatedVersion, reason: str, message: str, *, actor, events: list, **extra) -> None:
    """Update a PropagatedVersion's status; an audit event (appended to ``events``) when it changes."""
    before = pv.status
    fields = {"status": reason, "message": message, "last_attempt_at": timezone.now(), **extra}
    PropagatedVersion.objects.filter(pk=pv.pk).update(**fields)
    for key, value in fields.items():
        setattr(pv, key, value)
    if before != reason:
        events.append(dict(action="federation.propagation.status", actor=actor, obj=pv.resource, cluster=pv.cluster.name,
                           summary=f"{pv.resource} on {pv.cluster.name}: {before} -> {reason}" + (f" ({message})" if message else ""),
                           before={"status": before}, after={"status": reason, "message": message}))


def _classify(exc: kube.KubeError, *, existed: bool, cluster: Cluster) -> _Failure:
    undeclared = _UNDECLARED_FIELD_RE.findall(exc.message or "")
    # Real apiservers answer an apply whose typed patch cannot be built with a 500 (kubernetes#122480):
    # retrying cannot help, so "field not declared in schema" is FieldNotSupported whatever the status.
    if exc.transient and not undeclared:
        return _Failure(PropagationReason.CLUSTER_NOT_READY, f"{cluster.name} is unreachable: {exc.message}", transient=True)
    fields = _UNKNOWN_FIELD_RE.findall(exc.message or "") + undeclared
    if (exc.kind in (kube.KIND_BAD_REQUEST, kube.KIND_INVALID) or undeclared) and fields:
        version = cluster.server_version or "its version"
        names = ", ".join(dict.fromkeys(fields))
        return _Failure(PropagationReason.FIELD_NOT_SUPPORTED,
                        f"{cluster.name} ({version}) does not support field {names}: {exc.message}")
    reason = PropagationReason.UPDATE_FAILED if existed else PropagationReason.CREATION_FAILED
    return _Failure(reason, exc.message)


def _namespace_type() -> FederatedType | None:
    return FederatedType.objects.filter(group="", kind="Namespace").first()


def _namespace_exists(resource: FederatedResource, cluster: Cluster, conn) -> bool:
    try:
        live = kube.get_object(conn, api_version="v1", plural="namespaces", namespace=None, name=resource.namespace, timeout=_timeout())
    except kube.KubeError as exc:
        if exc.transient:
            raise _classify(exc, existed=False, cluster=cluster) from None
        raise _Failure(PropagationReason.RETRIEVAL_FAILED, f"Reading namespace {resource.namespace}: {exc.message}") from None
    return live is not None


def _ensure_namespace(resource: FederatedResource, cluster: Cluster, conn, *, actor) -> None:
    """Namespaced types need their namespace first: present already, or federated to this cluster."""
    if _namespace_exists(resource, cluster, conn):
        return
    ns_type = _namespace_type()
    ns_resource = None
    if ns_type is not None:
        ns_resource = (FederatedResource.objects.select_related("type", "current_revision", "propagated_revision")
                       .filter(type=ns_type, name=resource.namespace).first())
    revision = ns_resource and (ns_resource.propagated_revision or ns_resource.current_revision)
    if revision is None or cluster.name not in {p.cluster.name for p in plan_targets(ns_resource, revision) if p.action == TargetAction.APPLY}:
        raise _Failure(PropagationReason.NAMESPACE_NOT_FEDERATED,
                       f"Namespace {resource.namespace} does not exist on {cluster.name} and is not federated to it; "
                       f"federate Namespace {resource.namespace} with {cluster.name} in its placement first.")
    _apply_on_cluster(ns_resource, revision, cluster, replicas=None, actor=actor, conn=conn)


def _apply_on_cluster(resource: FederatedResource, revision: Revision, cluster: Cluster, *, replicas, actor, conn) -> None:
    """Apply one resource on one cluster and record it at once (the namespace a chunk found missing)."""
    step = _apply_step(resource, revision, cluster, _pv(resource, cluster), conn, replicas=replicas)
    if step.outcome == APPLIED:
        fields = _applied_fields(resource, revision, step, now=timezone.now())
        event = _applied_event(resource, revision, step, fields, replicas=replicas, actor=actor)
        with transaction.atomic():
            _write_applied({step.pv: fields})
            record_events([event])


def _apply_step(resource: FederatedResource, revision: Revision, cluster: Cluster, pv: PropagatedVersion, conn, *,
                replicas) -> _Step:
    """Server-side apply this cluster's manifest when anything changed. No database access; raises
    _Failure. Usually one call (``_apply_naming_uid``); the live object is read first
    (``_read_then_apply``) when that call cannot decide."""
    return (_apply_naming_uid(resource, revision, cluster, pv, conn, replicas=replicas)
            or _read_then_apply(resource, revision, cluster, pv, conn, replicas=replicas))


def _apply_naming_uid(resource: FederatedResource, revision: Revision, cluster: Cluster, pv: PropagatedVersion, conn,
                      *, replicas) -> _Step | None:
    """Apply without reading, the manifest carrying a metadata.uid. An apiserver refuses to change an
    object's uid (422, "field is immutable") and gives a new object its own uid, so:

    * an object we wrote (its uid recorded, status OK) whose desired state changed is applied naming
      its uid: if the name now belongs to another object (deleted and made again by someone else)
      nothing is written; kinds whose cluster-assigned fields KubeFed retains are read first instead;
    * an object we have not written is applied naming a fresh uid, which only a create can accept:
      an object already there, ours or not, is never written this way.

    None means "read first": the uid was refused, the namespace is missing, or nothing changed on our
    side (the read then finds drift, or an object that is already up to date)."""
    ftype = resource.type
    ours = bool(pv.live_uid) and pv.status == PropagationReason.OK
    if ours and ftype.kind in RETAINED_PATHS:
        return None
    common = _render_args(resource, revision, cluster, live=None)
    template_hash = _template_hash(revision, ftype, common)
    override_hash = hash_overrides(revision.overrides, cluster.name, replicas)
    if ours and (pv.revision_id, pv.template_hash, pv.override_hash) == (revision.pk, template_hash, override_hash):
        return None
    try:
        manifest = _shared_manifest(revision, ftype, common, override_hash, replicas=replicas)
    except OverrideError as exc:
        raise _Failure(PropagationReason.APPLY_OVERRIDES_FAILED, str(exc)) from None
    uid = pv.live_uid if ours else str(uuid.uuid4())
    try:
        result = kube.apply_object(conn, _naming_uid(manifest, uid), plural=ftype.plural, namespaced=ftype.namespaced,
                                   field_manager="fedportal", field_validation="Strict", force=True, timeout=_timeout())
    except kube.KubeError as exc:
        if exc.kind == kube.KIND_NOT_FOUND or _uid_refused(exc):
            return None
        raise _classify(exc, existed=ours, cluster=cluster) from None
    return _Step(cluster, pv, APPLIED, existed=not result.created, manifest=manifest, template_hash=template_hash,
                 override_hash=override_hash, obj=result.object, warnings=list(result.warnings))


def _render_args(resource: FederatedResource, revision: Revision, cluster: Cluster, *, live) -> dict:
    """What render_manifest needs besides the overrides and replicas (the template hash's input too)."""
    return dict(target=resource.type.target, template=revision.template, namespace=resource.namespace,
                name=resource.name, cluster=cluster.name, revision=revision.number, live=live)


def _naming_uid(manifest: dict, uid: str) -> dict:
    """The manifest with metadata.uid set: an apiserver writes it only to that object, or creates."""
    return {**manifest, "metadata": {**(manifest.get("metadata") or {}), "uid": uid}}


def _live_identity(obj: dict) -> dict:
    """The PropagatedVersion fields that say which live object we wrote, and at which version."""
    metadata = obj.get("metadata") or {}
    return {"live_resource_version": str(metadata.get("resourceVersion", "")), "live_uid": str(metadata.get("uid", ""))[:64]}


def _uid_refused(exc: kube.KubeError) -> bool:
    """The apiserver would not write because the object under that name has another uid."""
    text = (exc.message or "").lower()
    return exc.kind in (kube.KIND_INVALID, kube.KIND_CONFLICT) and (
        "metadata.uid" in text or "uid in precondition" in text)


def _read_then_apply(resource: FederatedResource, revision: Revision, cluster: Cluster, pv: PropagatedVersion, conn, *,
                     replicas) -> _Step:
    """Read the live object, render (keeping the fields KubeFed retains), and apply when anything changed."""
    ftype = resource.type
    try:
        live = kube.get_object(conn, api_version=ftype.api_version, plural=ftype.plural,
                               namespace=resource.namespace or None, name=resource.name, timeout=_timeout())
    except kube.KubeError as exc:
        if exc.transient:
            raise _classify(exc, existed=False, cluster=cluster) from None
        raise _Failure(PropagationReason.RETRIEVAL_FAILED, exc.message) from None
    if live is not None and ((live.get("metadata") or {}).get("labels") or {}).get(MANAGED_LABEL) != "true":
        raise _Failure(PropagationReason.ALREADY_EXISTS,
                       f"{ftype.kind} {resource.qualified_name} already exists on {cluster.name} and was not created by "
                       f"FedPortal; it is left untouched. Delete it, or add the label {MANAGED_LABEL}=true to adopt it.")
    common = _render_args(resource, revision, cluster, live=live)
    try:
        manifest = render_manifest(overrides=revision.overrides, replicas=replicas, **common)
    except OverrideError as exc:
        raise _Failure(PropagationReason.APPLY_OVERRIDES_FAILED, str(exc)) from None
    template_hash = _template_hash(revision, ftype, common)
    override_hash = hash_overrides(revision.overrides, cluster.name, replicas)
    if (
        live is not None and pv.status == PropagationReason.OK and pv.template_hash == template_hash
        and pv.override_hash == override_hash and pv.version == object_version(live) and pv.revision_id == revision.pk
    ):
        return _Step(cluster, pv, UNCHANGED, remote_status=_remote_status(ftype, live))
    try:
        result = kube.apply_object(conn, manifest, plural=ftype.plural, namespaced=ftype.namespaced,
                                   field_manager="fedportal", field_validation="Strict", force=True, timeout=_timeout())
    except kube.KubeError as exc:
        if exc.kind == kube.KIND_NOT_FOUND and ftype.namespaced and live is None:
            # the namespace is missing (no GET of it on the common path: the apply says so)
            return _Step(cluster, pv, NEEDS_NAMESPACE)
        raise _classify(exc, existed=live is not None, cluster=cluster) from None
    return _Step(cluster, pv, APPLIED, existed=live is not None, manifest=manifest, template_hash=template_hash,
                 override_hash=override_hash, obj=result.object, warnings=list(result.warnings))


def _shared_manifest(revision: Revision, ftype: FederatedType, common: dict, override_hash: str, *, replicas) -> dict:
    """The manifest for a cluster when no live object is read (nothing to retain from it). It depends
    on the cluster only through its override operations and replicas, which ``override_hash`` stands
    for, so the clusters of a chunk that share them (most of a fleet) share one manifest, rendered
    once and kept on the shared Revision instance. Never modified afterwards: the apply names its uid
    on a copy, and the recorded manifest is only serialised."""
    key = (ftype.api_version, ftype.kind, common["namespace"], common["name"], override_hash)
    shared = revision.__dict__.setdefault("_manifests", {})
    if key not in shared:  # two threads may both render it: same value
        shared[key] = render_manifest(overrides=revision.overrides, replicas=replicas, **common)
    return shared[key]


def _template_hash(revision: Revision, ftype: FederatedType, common: dict) -> str:
    """The hash of the manifest without overrides. It depends on the live object only for the kinds
    whose fields KubeFed retains; for the others it is one value per (immutable) revision, computed
    once per chunk and kept on the shared Revision instance."""
    if ftype.kind in RETAINED_PATHS:
        return content_hash(render_manifest(overrides=[], replicas=None, **common))
    key = (ftype.api_version, ftype.kind, common["namespace"], common["name"])
    shared = revision.__dict__.setdefault("_template_hashes", {})
    if key not in shared:  # two threads may both compute it: same value
        shared[key] = content_hash(render_manifest(overrides=[], replicas=None, **common))
    return shared[key]


def _applied_fields(resource: FederatedResource, revision: Revision, step: _Step, *, now) -> dict:
    """What an applied target writes on its PropagatedVersion (the same fields for every target)."""
    obj = step.obj
    return dict(
        revision=revision, template_hash=step.template_hash, override_hash=step.override_hash,
        version=object_version(obj), status=PropagationReason.OK, message="; ".join(step.warnings),
        applied_manifest=step.manifest, sync_state=SyncState.IN_SYNC, drift=[],
        **_live_identity(obj),
        propagated_at=now, last_attempt_at=now, remote_status=_remote_status(resource.type, obj),
    )


def _applied_event(resource: FederatedResource, revision: Revision, step: _Step, fields: dict, *, replicas, actor) -> dict:
    verb = "Updated" if step.existed else "Created"
    return dict(
        action="federation.propagation.apply", actor=actor, obj=resource, cluster=step.cluster.name,
        summary=f"{verb} {resource.type.kind} {resource.qualified_name} on {step.cluster.name} "
                f"(revision {revision.number}, {fields['version']})",
        before={"status": step.pv.status, "version": step.pv.version},
        after={"status": PropagationReason.OK, "version": fields["version"], "replicas": replicas},
    )


def _write_applied(fields_by_pv: dict[PropagatedVersion, dict]) -> None:
    """Write applied targets' PropagatedVersions with one statement for the lot (fedportal.bulk). A
    row deleted meanwhile (its cluster unjoined) is not there to update, so it is not made again."""
    now = timezone.now()
    bulk.update_rows(PropagatedVersion, {pv.pk: {**fields, "updated_at": now} for pv, fields in fields_by_pv.items()})
    for pv, fields in fields_by_pv.items():
        for key, value in fields.items():
            setattr(pv, key, value)


def _delete_step(resource: FederatedResource, cluster: Cluster, pv: PropagatedVersion) -> _Step:
    ftype = resource.type
    try:
        deleted = kube.delete_object(connection_for(cluster), api_version=ftype.api_version, plural=ftype.plural,
                                     namespace=resource.namespace or None, name=resource.name, timeout=_timeout())
    except kube.KubeError as exc:
        if exc.transient:
            raise _Failure(PropagationReason.DELETION_FAILED, f"{cluster.name} is unreachable: {exc.message}", transient=True) from None
        raise _Failure(PropagationReason.DELETION_FAILED, exc.message) from None
    return _Step(cluster, pv, DELETED if deleted else GONE)


def _remote_status(ftype: FederatedType, obj: dict | None):
    if not ftype.status_collection_enabled or not obj:
        return None
    return obj.get("status") or {}


def _collect_status(pv: PropagatedVersion, ftype: FederatedType, live: dict) -> None:
    status = _remote_status(ftype, live)
    if status is not None and status != pv.remote_status:
        PropagatedVersion.objects.filter(pk=pv.pk).update(remote_status=status)
        pv.remote_status = status


# --- progress and conditions ---------------------------------------------------------------------

@dataclass
class RunProgress:
    total: int = 0
    done: int = 0
    failed: int = 0
    pending: int = 0

    @property
    def finished(self) -> bool:
        return self.pending == 0

    @property
    def percent_done(self) -> int:
        return round(100 * self.done / self.total) if self.total else 100

    @property
    def percent_failed(self) -> int:
        return round(100 * self.failed / self.total) if self.total else 0


def run_progress(run: PropagationRun) -> RunProgress:
    counts = dict(run.targets.values_list("state").annotate(n=Count("id")))
    done, failed = counts.get(TargetState.DONE, 0), counts.get(TargetState.FAILED, 0)
    total = sum(counts.values())
    return RunProgress(total, done, failed, total - done - failed)


def aggregate_condition(pvs, *, running: bool = False, propagated: bool = True) -> str:
    """One word for a resource from its PropagatedVersions (as the list and detail pages show)."""
    if running:
        return Condition.PROPAGATING
    active = [pv for pv in pvs if pv.status not in (PropagationReason.REMOVED, PropagationReason.ORPHANED)]
    if not active:
        return Condition.NOT_PROPAGATED
    if any(pv.status not in PropagationReason.healthy() for pv in active):
        return Condition.DEGRADED
    if any(pv.sync_state == SyncState.OUT_OF_SYNC for pv in active):
        return Condition.OUT_OF_SYNC
    return Condition.PROPAGATED


# --- preview -----------------------------------------------------------------------------------------

@dataclass
class ClusterPreview:
    cluster: Cluster
    action: str  # create / update / unchanged / delete / orphan / skip / error
    rendered_yaml: str = ""
    diff: str = ""
    replicas: int | None = None
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    live_replicas: int | None = None  # spec.replicas of the live object, to show replica moves


def preview_revision(resource: FederatedResource, revision: Revision | None = None) -> list[ClusterPreview]:
    """Per target cluster: the rendered YAML and its diff against the live object, or what would be
    created/deleted. Unreachable clusters are shown as errors, never raised."""
    from federation.preview_checks import manifest_warnings

    revision = revision or resource.current_revision
    ftype = resource.type
    plans = plan_targets(resource, revision)

    def one(plan: ClusterPlan) -> ClusterPreview:
        cluster = plan.cluster
        if plan.action == TargetAction.SKIP:
            return ClusterPreview(cluster, "skip", message=f"{plan.reason}: {plan.message}")
        try:
            conn = connection_for(cluster)
            live = kube.get_object(conn, api_version=ftype.api_version, plural=ftype.plural,
                                   namespace=resource.namespace or None, name=resource.name, timeout=min(_timeout(), 5.0))
        except (kube.KubeError, ValueError) as exc:
            return ClusterPreview(cluster, "error", message=f"Cannot read the live object: {exc}")
        preview = one_preview(plan, live)
        live_replicas = ((live or {}).get("spec") or {}).get("replicas")
        preview.live_replicas = live_replicas if isinstance(live_replicas, int) else None
        return preview

    def one_preview(plan: ClusterPlan, live) -> ClusterPreview:
        cluster = plan.cluster
        if plan.action in (TargetAction.DELETE, TargetAction.ORPHAN):
            verb = "delete" if plan.action == TargetAction.DELETE else "orphan"
            text = "will be deleted" if verb == "delete" else "will be left in place (retention Orphan)"
            return ClusterPreview(cluster, verb, message=f"Left the placement: {text}." if live else "Left the placement; nothing there.")
        try:
            manifest = render_manifest(overrides=revision.overrides, replicas=plan.replicas,
                                       **_render_args(resource, revision, cluster, live=live))
        except OverrideError as exc:
            return ClusterPreview(cluster, "error", message=str(exc))
        warnings = manifest_warnings(manifest, cluster)
        shown = mask_secret_object(manifest, ftype.kind)
        if live is None:
            return ClusterPreview(cluster, "create", dump_yaml(shown), unified_yaml_diff(None, shown, after_label="rendered"),
                              plan.replicas, "Will be created.", warnings)
        if ((live.get("metadata") or {}).get("labels") or {}).get(MANAGED_LABEL) != "true":
            return ClusterPreview(cluster, "error", dump_yaml(shown), "", plan.replicas,
                              "An object with this name exists and was not created by FedPortal (AlreadyExists).", warnings)
        changes = diff_desired_live(manifest, live, ignore=SERVER_POPULATED)
        live_view = mask_secret_object(_project(strip_server_fields(live), manifest), ftype.kind)
        diff = unified_yaml_diff(live_view, shown, before_label="live", after_label="rendered")
        return ClusterPreview(cluster, "update" if changes else "unchanged", dump_yaml(shown), diff,
                              plan.replicas, f"{len(changes)} field(s) change." if changes else "No change.", warnings)

    # I/O-bound (one GET per cluster): a thread pool, results in plan order
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(plans)))) as pool:
        return list(pool.map(one, plans))


def _project(live, desired):
    """The parts of ``live`` that ``desired`` sets, so a diff shows only what we manage."""
    if isinstance(live, dict) and isinstance(desired, dict):
        return {k: _project(live[k], desired[k]) for k in desired if k in live}
    if isinstance(live, list) and isinstance(desired, list) and len(live) == len(desired):
        return [_project(a, b) for a, b in zip(live, desired)]
    return live


# --- drift -------------------------------------------------------------------------------------------

@dataclass
class DriftSummary:
    checked: int = 0
    out_of_sync: int = 0
    repaired: int = 0
    errors: int = 0
    resynced: int = 0


def detect_drift(*, cluster: Cluster | None = None, resource: FederatedResource | None = None) -> DriftSummary:
    """Compare each live object with its PropagatedVersion. External changes -> OutOfSync with a
    field diff (server-populated and retained fields ignored); Enforce re-applies what we applied."""
    summary = DriftSummary()
    qs = PropagatedVersion.objects.select_related("resource__type", "cluster", "revision").filter(
        status=PropagationReason.OK, applied_manifest__isnull=False, cluster__state=ClusterState.READY, cluster__isolated=False)
    if cluster is not None:
        qs = qs.filter(cluster=cluster)
    if resource is not None:
        qs = qs.filter(resource=resource)
    # Never judge (or Enforce) an object while a propagation to that cluster is in flight: the
    # baseline is about to change, and re-applying the old one would undo the new revision.
    in_flight = PropagationTarget.objects.filter(
        run__resource=OuterRef("resource_id"), cluster=OuterRef("cluster_id"),
        state__in=[TargetState.PENDING, TargetState.RUNNING, TargetState.RETRYING])
    qs = qs.exclude(Exists(in_flight))
    connections = {}
    for pv in qs.order_by("cluster_id", "id").iterator(chunk_size=200):
        summary.checked += 1
        try:
            conn = connections.get(pv.cluster_id) or connections.setdefault(pv.cluster_id, connection_for(pv.cluster))
            outcome = check_drift(pv, conn=conn)
        except kube.KubeError as exc:
            summary.errors += 1
            logger.info("drift check of %s on %s failed: %s", pv.resource_id, pv.cluster.name, exc)
            continue
        summary.out_of_sync += outcome == "out_of_sync"
        summary.repaired += outcome == "repaired"
    return summary


def check_drift(pv: PropagatedVersion, *, conn=None) -> str:
    """One object: 'in_sync', 'out_of_sync' or 'repaired'. Raises KubeError when unreachable."""
    resource, ftype, cluster = pv.resource, pv.resource.type, pv.cluster
    conn = conn or connection_for(cluster)
    live = kube.get_object(conn, api_version=ftype.api_version, plural=ftype.plural,
                           namespace=resource.namespace or None, name=resource.name, timeout=_timeout())
    now = timezone.now()
    live_uid = _live_identity(live or {})["live_uid"]
    if live is None or (live.get("metadata") or {}).get("deletionTimestamp"):
        # gone, or being deleted by someone else: either way not what FedPortal applied
        changes = [{"path": "/", "before": "present", "after": None, "change": "removed"}]
    elif pv.live_uid and live_uid and live_uid != pv.live_uid:
        # deleted and made again outside FedPortal: another object under the same name
        changes = [{"path": "/metadata/uid", "before": pv.live_uid, "after": live_uid, "change": "replaced"}]
    else:
        _collect_status(pv, ftype, live)
        changes = [c.as_dict() for c in diff_desired_live(pv.applied_manifest, live, ignore=SERVER_POPULATED + ignored_paths(ftype.kind))]
        changes = mask_secret_changes(changes, ftype.kind)
    if not changes:
        update = {"sync_state": SyncState.IN_SYNC, "drift": [], "drift_checked_at": now,
                  "live_resource_version": str((live.get("metadata") or {}).get("resourceVersion", ""))}
        if pv.sync_state == SyncState.OUT_OF_SYNC:
            record_event("federation.drift.resolve", obj=resource, cluster=cluster.name,
                         summary=f"{resource} on {cluster.name} is back in sync")
        PropagatedVersion.objects.filter(pk=pv.pk).update(**update)
        return "in_sync"
    paths = ", ".join(c["path"] for c in changes[:5]) + (" ..." if len(changes) > 5 else "")
    if pv.sync_state != SyncState.OUT_OF_SYNC or pv.drift != changes:
        record_event("federation.drift.detect", obj=resource, cluster=cluster.name,
                     summary=f"Drift on {cluster.name}: {resource} changed outside FedPortal ({paths})",
                     before={"applied": {c["path"]: c["before"] for c in changes}},
                     after={"live": {c["path"]: c["after"] for c in changes}})
    PropagatedVersion.objects.filter(pk=pv.pk).update(
        sync_state=SyncState.OUT_OF_SYNC, drift=changes, drift_checked_at=now,
        drift_detected_at=pv.drift_detected_at if pv.sync_state == SyncState.OUT_OF_SYNC else now)
    if resource.drift_policy != DriftPolicy.ENFORCE:
        return "out_of_sync"
    # naming the uid we wrote: a replaced object is refused (never taken over), a removed one made again
    manifest = _naming_uid(pv.applied_manifest, pv.live_uid) if pv.live_uid else pv.applied_manifest
    try:
        result = kube.apply_object(conn, manifest, plural=ftype.plural, namespaced=ftype.namespaced,
                                   field_manager="fedportal", field_validation="Strict", force=True, timeout=_timeout())
    except kube.KubeError as exc:
        if exc.transient:
            raise
        if _uid_refused(exc):
            exc = kube.KubePermanentError(
                f"{ftype.kind} {resource.qualified_name} on {cluster.name} was deleted and made again outside FedPortal; "
                f"it is left untouched (delete it to let FedPortal create its own).", kind=exc.kind)
        PropagatedVersion.objects.filter(pk=pv.pk).update(message=f"Drift repair failed: {exc.message}")
        record_event("federation.drift.enforce_failed", obj=resource, cluster=cluster.name,
                     summary=f"Could not repair drift of {resource} on {cluster.name}: {exc.message}")
        return "out_of_sync"
    obj = result.object
    PropagatedVersion.objects.filter(pk=pv.pk).update(
        sync_state=SyncState.IN_SYNC, drift=[], drift_repaired_at=timezone.now(), version=object_version(obj),
        **_live_identity(obj),
        message=f"Drift repaired (Enforce): {paths}.", remote_status=_remote_status(ftype, obj) or pv.remote_status)
    record_event("federation.drift.enforce", obj=resource, cluster=cluster.name,
                 summary=f"Re-applied {resource} on {cluster.name} to repair drift ({paths})",
                 before={"live": {c["path"]: c["after"] for c in changes}},
                 after={"applied": {c["path"]: c["before"] for c in changes}})
    return "repaired"


def resume_stale_targets(*, stale_seconds: float | None = None) -> int:
    """Re-queue targets of unfinished runs whose task message was lost (a worker killed with SIGKILL:
    the embedded broker has already removed the messages it held, Redis gives them back only after
    its visibility timeout). Stale means: RUNNING past its lease; RETRYING overdue by
    ``stale_seconds``; PENDING for longer than ``stale_seconds``. Re-queuing is safe: the claim is a
    compare-and-set, so a target whose original message still arrives runs once."""
    grace = float(stale_seconds if stale_seconds is not None else _setting("FEDERATION_STALE_SECONDS", 60))
    now = timezone.now()
    cutoff = now - timedelta(seconds=grace)
    stale = PropagationTarget.objects.filter(run__finished_at__isnull=True).filter(
        Q(state=TargetState.RUNNING, lease_until__lt=now)
        | Q(state=TargetState.RETRYING, lease_until__lt=cutoff)
        | Q(state__in=[TargetState.RETRYING, TargetState.PENDING], lease_until__isnull=True, run__started_at__lt=cutoff)
        | Q(state=TargetState.PENDING, lease_until__lt=cutoff)
    )
    # a run whose last targets were written by a worker that died before it closed the run
    settled = (PropagationRun.objects.filter(finished_at__isnull=True, started_at__lt=cutoff)
               .exclude(targets__state__in=[TargetState.PENDING, TargetState.RUNNING, TargetState.RETRYING]))
    for run_id in settled.values_list("pk", flat=True)[:1000]:
        _finish_run_if_complete(run_id)
    found = list(stale.order_by("run_id", "cluster_id").values_list("pk", "run_id", "cluster_id")[:10000])
    if not found:
        return 0
    # PENDING targets are stamped so that the next sweep waits another grace period for them
    PropagationTarget.objects.filter(pk__in=[pk for pk, _, _ in found], state=TargetState.PENDING).update(lease_until=now)
    by_run: dict[int, list[int]] = {}
    for _, run_id, cluster_id in found:
        by_run.setdefault(run_id, []).append(cluster_id)
    for run_id, cluster_ids in by_run.items():
        _enqueue(run_id, cluster_ids)
    logger.warning("re-queued %d stale propagation target(s) of %d run(s)", len(found), len(by_run))
    return len(found)


def reconcile_waiting_clusters(*, actor=None) -> int:
    """Resources skipped on a cluster that was not Ready (or isolated) get a re-sync once it is
    Ready again; this is how a cluster that was down converges without anyone clicking."""
    waiting = (PropagatedVersion.objects.filter(
        status__in=[PropagationReason.CLUSTER_NOT_READY, PropagationReason.CLUSTER_ISOLATED],
        cluster__state=ClusterState.READY, cluster__isolated=False)
        .exclude(resource__runs__targets__state__in=[TargetState.PENDING, TargetState.RUNNING, TargetState.RETRYING])
        .select_related("resource", "cluster").distinct())
    count = 0
    for pv in waiting:
        try:
            resync_cluster(pv.resource, pv.cluster, actor=actor)
            count += 1
        except PropagationError as exc:
            logger.info("reconcile of %s on %s skipped: %s", pv.resource, pv.cluster.name, exc)
    return count
