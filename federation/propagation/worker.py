"""The task's body: claim a chunk of one run's targets (compare-and-set lease), do their network
half on the process's thread pool, and record what finished."""

import logging
import os
import random
import threading
from concurrent.futures import ALL_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import timedelta

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from clusters.models import Cluster
from clusters.services import FIELDS_READ_BY_CONNECTION_FOR, connection_for
from federation import enqueue
from federation.choices import (
    PropagationReason,
    RunTrigger,
    TargetAction,
    TargetState,
)
from federation.models import (
    FederatedResource,
    FederatedType,
    PropagatedVersion,
    PropagationRun,
    PropagationTarget,
    Revision,
)
from federation.propagation.common import lease_seconds, thread_count
from federation.propagation.fanout import approved_revisions
from federation.propagation.network import (
    APPLIED,
    FAILED,
    ISOLATED,
    NEEDS_NAMESPACE,
    ORPHANED,
    SUPERSEDED,
    Step,
    StepFailure,
    apply_step,
    delete_step,
    namespace_exists,
)
from federation.propagation.planning import plan_targets
from federation.propagation.record import (
    TargetOutcome,
    applied_event,
    applied_fields,
    clusters_in_newer_runs,
    pv_for,
    pvs_for,
    record_steps,
    write_applied,
)
from federation.propagation.sweep import retry_namespace_waiters
from fedportal.audit import record_events

logger = logging.getLogger(__name__)


# --- the task's body: a chunk of one run's targets -------------------------------------------------
#
# A run is fanned out as one task per chunk of clusters (FEDERATION_BATCH_SIZE). A task claims its
# targets with one compare-and-set UPDATE, does the network half of every target on its worker
# process's thread pool (FEDERATION_THREADS per process, shared by the chunks the process runs;
# threads never touch the database), and writes what has finished every
# FLUSH_SECONDS in one transaction: the PropagatedVersions, the targets and their audit events
# together, so a killed worker leaves either all of a target's record or none of it.

FLUSH_SECONDS = 1.0  # how long finished targets of a chunk may wait for slower ones before being written


# What a chunk reads of its targets and their clusters (a cluster row is wide: its inventory, probe
# state and labels are not needed to apply): the connection, and the version that failure messages name.
CHUNK_TARGET_FIELDS = (
    "id",
    "run_id",
    "cluster_id",
    "action",
    "replicas",
    "attempts",
    "lease_until",
    *(f"cluster__{name}" for name in (*FIELDS_READ_BY_CONNECTION_FOR, "server_version", "isolated", "isolated_reason")),
)


def claim_targets(run_id: int, cluster_ids: list[int]) -> list[PropagationTarget]:
    """Compare-and-set claim of a chunk's targets; returns the ones this call holds."""
    now = timezone.now()
    # a stamp unique to this call, so we can read back which rows we won
    stamp = now + timedelta(seconds=lease_seconds(), microseconds=random.randrange(1, 999_999))
    (
        PropagationTarget.objects.filter(
            run_id=run_id,
            cluster_id__in=cluster_ids,
            state__in=[TargetState.PENDING, TargetState.RETRYING, TargetState.RUNNING],
        )
        # RETRYING: nobody holds it (lease_until is when the retry is due); others: free or expired lease
        .filter(Q(state=TargetState.RETRYING) | Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .update(state=TargetState.RUNNING, lease_until=stamp, attempts=F("attempts") + 1)
    )
    return list(
        PropagationTarget.objects.select_related("cluster")
        .only(*CHUNK_TARGET_FIELDS)
        .filter(run_id=run_id, cluster_id__in=cluster_ids, state=TargetState.RUNNING, lease_until=stamp)
        .order_by("cluster_id")
    )


_pool_lock = threading.Lock()
_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid, size, pool)


def network_pool() -> ThreadPoolExecutor:
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


def release_targets(targets: list[PropagationTarget]) -> int:
    """Give back claimed ``targets`` whose outcome was not recorded and whose network half is not
    running (the call that claimed them failed: a database error its task retries). They are due for
    a retry now, so the task's retry claims them again; held until their lease ran out, that retry
    found them held, returned, and left them to the stale sweep minutes later while their run
    waited. The attempt is given back too: the cluster did not fail it, FedPortal's database did,
    and a database failing for a while must not use up a cluster's retries (the task's own retries
    are bounded instead)."""
    if not targets:
        return 0
    return PropagationTarget.objects.filter(
        run_id=targets[0].run_id,
        pk__in=[t.pk for t in targets],
        state=TargetState.RUNNING,
        lease_until=targets[0].lease_until,
    ).update(state=TargetState.RETRYING, lease_until=timezone.now(), attempts=F("attempts") - 1)


def propagate_targets(run_id: int, cluster_ids) -> dict[int, TargetOutcome]:
    """Do a chunk of one run's targets. Safe to call twice (compare-and-set claim on each target).
    Returns an outcome per cluster id; ``retry_in`` is set where a transient failure wants a retry.
    A call that fails gives back what it claimed and did not record (``release_targets``)."""
    ids = sorted({int(i) for i in cluster_ids})
    targets = claim_targets(run_id, ids)
    outcomes = {i: TargetOutcome(skipped="not pending, or another worker holds it") for i in ids}
    if not targets:
        return outcomes
    in_flight: dict[Future, PropagationTarget] = {}  # network halves submitted and not yet recorded
    try:
        return _do_claimed(run_id, ids, targets, outcomes, in_flight)
    except Exception:
        # a network half still running keeps its target held (its lease), so nobody applies it twice
        running = {t.pk for future, t in in_flight.items() if not future.cancel() and not future.done()}
        try:
            release_targets([t for t in targets if t.pk not in running])
        except Exception:  # the database is still failing: the lease runs out and the sweep takes them
            logger.exception("could not give back the targets of run %s", run_id)
        raise


def _do_claimed(
    run_id: int, ids: list[int], targets: list[PropagationTarget], outcomes, pending: dict
) -> dict[int, TargetOutcome]:
    # the placement is planning's (propagate_revision's), and may name every cluster of the fleet
    run = (
        PropagationRun.objects.select_related("resource__type", "revision", "actor")
        .defer("revision__placement")
        .annotate(
            has_newer_run=Exists(PropagationRun.objects.filter(resource=OuterRef("resource"), pk__gt=OuterRef("pk")))
        )
        .get(pk=run_id)
    )
    resource = run.resource
    pvs = pvs_for(resource, [t.cluster for t in targets])
    namespace_run = resource.type.group == "" and resource.type.kind == "Namespace"
    ok_before = (
        {cluster_id for cluster_id, pv in pvs.items() if pv.status == PropagationReason.OK} if namespace_run else set()
    )
    newer = _clusters_in_newer_runs(run, [t.cluster_id for t in targets])
    steps = [(t, Step(t.cluster, pvs[t.cluster_id], SUPERSEDED)) for t in targets if t.cluster_id in newer]
    todo = [t for t in targets if t.cluster_id not in newer]
    # the chunk's last flush closes the run when it was the last chunk: until then this chunk held
    # targets still running
    if steps:
        outcomes.update(record_steps(run, steps, last=not todo))
    if todo:
        pool = network_pool()
        pending.update({pool.submit(network_step, run, t, pvs[t.cluster_id]): t for t in todo})
        while pending:
            done, _ = wait(pending, timeout=FLUSH_SECONDS, return_when=ALL_COMPLETED)
            if done:
                finished = [(pending.pop(future), future.result()) for future in done]
                recorded = [(t, _complete_namespace(run, t, step)) for t, step in finished]
                outcomes.update(record_steps(run, recorded, last=not pending))
    if namespace_run:
        _retry_waiting_for(resource, ids)
        # the clusters this run brought the namespace to (its placement widened, or a wave of its
        # rollout got there): the resources in it are planned again for them, as for a join; a
        # re-sync of a namespace that was there already asks nothing
        if reached := sorted(i for i, pv in pvs.items() if i not in ok_before and pv.status == PropagationReason.OK):
            enqueue.reconcile_namespace_members(resource.name, reached)
    return outcomes


def _retry_waiting_for(namespace: FederatedResource, cluster_ids: list[int]) -> None:
    """The namespace is now on (some of) these clusters: the targets that failed waiting for it are
    re-synced (by the system, as the periodic sweep would)."""
    ready = list(
        PropagatedVersion.objects.filter(
            resource=namespace, cluster_id__in=cluster_ids, status=PropagationReason.OK
        ).values_list("cluster_id", flat=True)
    )
    if ready:
        retry_namespace_waiters(namespace.name, ready, actor=None)


def _clusters_in_newer_runs(run: PropagationRun, cluster_ids: list[int]) -> set[int]:
    """Which of ``cluster_ids`` a later run of the same resource also targets (that run's revision
    wins). Usually there is no later run, as the run's ``has_newer_run`` says."""
    if not run.has_newer_run:
        return set()
    return clusters_in_newer_runs(run, cluster_ids)


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


def network_step(run: PropagationRun, target: PropagationTarget, pv: PropagatedVersion) -> Step:
    """The network half of one target (runs on a pool thread: no database access). A cluster
    isolated (its target queued or waiting for a retry when it was, or a removal planned for it)
    gets nothing but an approved unjoin's removal: the target ends ClusterIsolated, as planning's
    skip does, and once the isolation is lifted the reconcile sweep repeats what was approved,
    removals included."""
    cluster = target.cluster
    if cluster.isolated and run.trigger != RunTrigger.UNJOIN:
        reason = f": {cluster.isolated_reason}" if cluster.isolated_reason else ""
        return Step(
            cluster,
            pv,
            ISOLATED,
            failure=StepFailure(
                PropagationReason.CLUSTER_ISOLATED,
                f"{cluster.name} was isolated{reason}; not propagated until the isolation is lifted.",
            ),
        )
    try:
        if target.action == TargetAction.APPLY:
            return apply_step(
                run.resource,
                run.revision,
                cluster,
                pv,
                connection_for(cluster),
                replicas=target.replicas,
                reapply=run.reapply,
            )
        if target.action == TargetAction.ORPHAN:
            return Step(cluster, pv, ORPHANED)
        return delete_step(run.resource, cluster, pv)
    except StepFailure as failure:
        return Step(cluster, pv, FAILED, failure=failure)
    except Exception as exc:  # noqa: BLE001 - a credential that cannot be decrypted and the like
        logger.exception("propagation of run %s to %s failed", run.pk, cluster.name)
        return Step(
            cluster,
            pv,
            FAILED,
            failure=StepFailure(
                PropagationReason.CLUSTER_NOT_READY, f"Cannot reach {cluster.name}: {type(exc).__name__}"
            ),
        )


def _complete_namespace(run: PropagationRun, target: PropagationTarget, step: Step) -> Step:
    """A namespaced object whose namespace is missing: federate the namespace first (database and
    network, so on the task's own thread; rare), then apply the object."""
    if step.outcome != NEEDS_NAMESPACE:
        return step
    try:
        conn = connection_for(step.cluster)
        _ensure_namespace(run.resource, step.cluster, conn, actor=run.actor)
        step = apply_step(
            run.resource,
            run.revision,
            step.cluster,
            step.pv,
            conn,
            replicas=target.replicas,
            reapply=run.reapply,
        )
        if step.outcome == NEEDS_NAMESPACE:
            raise StepFailure(
                PropagationReason.NAMESPACE_NOT_FEDERATED,
                f"Namespace {run.resource.namespace} is still missing on {step.cluster.name}.",
                transient=True,
            )
        return step
    except StepFailure as failure:
        return Step(step.cluster, step.pv, FAILED, failure=failure)


def _namespace_type() -> FederatedType | None:
    return FederatedType.objects.filter(group="", kind="Namespace").first()


def _ensure_namespace(resource: FederatedResource, cluster: Cluster, conn, *, actor) -> None:
    """Namespaced types need their namespace first: present already, or federated to this cluster."""
    if namespace_exists(resource, cluster, conn):
        return
    ns_type = _namespace_type()
    ns_resource = None
    if ns_type is not None:
        ns_resource = (
            FederatedResource.objects.select_related("type", "current_revision", "propagated_revision")
            .filter(type=ns_type, name=resource.namespace)
            .first()
        )
    revision = ns_resource and (ns_resource.propagated_revision or _plain_namespace(ns_resource))
    if revision is not None:
        revision = _namespace_revision_for(ns_resource, revision, cluster)
    if revision is None or cluster.name not in {
        p.cluster.name for p in plan_targets(ns_resource, revision) if p.action == TargetAction.APPLY
    }:
        raise StepFailure(
            PropagationReason.NAMESPACE_NOT_FEDERATED,
            f"Namespace {resource.namespace} does not exist on {cluster.name} and is not federated to it; "
            f"federate Namespace {resource.namespace} with {cluster.name} in its placement first.",
        )
    _apply_on_cluster(ns_resource, revision, cluster, replicas=None, actor=actor, conn=conn)


def _namespace_revision_for(ns_resource: FederatedResource, revision: Revision, cluster: Cluster) -> Revision:
    """The Namespace's revision to create it with on ``cluster``: ``revision`` (its propagated one,
    or the bare namespace never propagated on its own), unless its newest staged rollout has not
    completed (``with_rollout_holding_back``): then what an approved run last sent the cluster, and
    a cluster none sent it to is refused (creating the namespace there with a workload would get
    ahead of the waves, or past an abort)."""
    from federation.approvals.rollout import rollout_holding_back  # approvals builds on propagation

    if (held_by := rollout_holding_back(ns_resource.pk)) is None:
        return revision
    approved = approved_revisions(ns_resource, [cluster.pk]).get(cluster.pk)
    if approved is None:
        raise StepFailure(
            PropagationReason.NAMESPACE_NOT_FEDERATED,
            f"Namespace {ns_resource.name} is not on {cluster.name} yet: no approved run has sent it there (its "
            f"newest staged rollout, CR-{held_by}, has not completed); the resources waiting for it are retried "
            "once it is there.",
        )
    return approved


def _plain_namespace(ns_resource: FederatedResource) -> Revision | None:
    """A FederatedNamespace never propagated on its own is created with the first workload placed in
    it only while its revision is the bare namespace (no template, no overrides): labels, annotations
    or overrides nobody approved (a Pod Security level, say) would otherwise reach the cluster with
    an approved workload."""
    revision = ns_resource.current_revision
    if revision is None or not (revision.template or revision.overrides):
        return revision
    raise StepFailure(
        PropagationReason.NAMESPACE_NOT_FEDERATED,
        f"Namespace {ns_resource.name} has content no change request approved (its template or overrides); "
        f"request a change for FederatedNamespace {ns_resource.name} first.",
    )


def _apply_on_cluster(
    resource: FederatedResource, revision: Revision, cluster: Cluster, *, replicas, actor, conn
) -> None:
    """Apply one resource on one cluster and record it at once (the namespace a chunk found missing)."""
    step = apply_step(resource, revision, cluster, pv_for(resource, cluster), conn, replicas=replicas)
    if step.outcome == APPLIED:
        fields = applied_fields(resource, revision, step, now=timezone.now())
        event = applied_event(resource, revision, step, fields, replicas=replicas, actor=actor)
        with transaction.atomic():
            write_applied({step.pv: fields})
            record_events([event])
