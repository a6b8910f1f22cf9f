"""Recording: what finished targets did, written with their audit events in one transaction; the
PropagatedVersion rows a run reads and creates; closing a run once its last target is done."""

from dataclasses import dataclass, replace
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone

from federation.choices import (
    PropagationReason,
    RunState,
    SyncState,
    TargetState,
)
from federation.models import (
    FederatedResource,
    PropagatedVersion,
    PropagationRun,
    PropagationTarget,
    Revision,
)
from federation.propagation.common import (
    backoff_seconds,
    live_identity,
    max_attempts,
    object_version,
    remote_status,
)
from federation.propagation.network import (
    APPLIED,
    DELETED,
    FAILED,
    GONE,
    ISOLATED,
    ORPHANED,
    SUPERSEDED,
    UNCHANGED,
    Step,
)
from fedportal import bulk
from fedportal.audit import append_events, prepare_events


def pv_for(resource, cluster) -> PropagatedVersion:
    pv, _ = PropagatedVersion.objects.get_or_create(resource=resource, cluster=cluster)
    return pv


# what propagation reads of a PropagatedVersion (not the applied manifest or the drift)
_PV_FIELDS = (
    "id",
    "resource_id",
    "cluster_id",
    "status",
    "template_hash",
    "override_hash",
    "version",
    "revision_id",
    "remote_status",
    "live_uid",
)


def pvs_for(resource, clusters) -> dict[int, PropagatedVersion]:
    """PropagatedVersions of ``resource`` on ``clusters`` by cluster id, the missing ones created in
    bulk; their ``resource`` and ``cluster`` are the caller's instances (no query per row)."""
    by_id = {c.pk: c for c in clusters}

    def load(ids):
        return {
            pv.cluster_id: pv
            # no ordering: the model's (by cluster name) would join the clusters for a dict
            for pv in PropagatedVersion.objects.only(*_PV_FIELDS)
            .filter(resource=resource, cluster_id__in=ids)
            .order_by()
        }

    found = load(list(by_id))
    created = create_missing_pvs(resource, clusters, present=set(found))
    if created:
        found.update(load(created))
    resource_field, cluster_field = PropagatedVersion.resource.field, PropagatedVersion.cluster.field
    for pv in found.values():  # what assigning pv.resource and pv.cluster caches, without its checks per row
        resource_field.set_cached_value(pv, resource)
        cluster_field.set_cached_value(pv, by_id[pv.cluster_id])
    return found


def create_missing_pvs(resource, clusters, *, present: set[int]) -> list[int]:
    """Create the PropagatedVersions of ``resource`` on the ``clusters`` whose ids are not in
    ``present`` (Pending, as a new row is; one another process made meanwhile is left as it is).
    Returns those clusters' ids."""
    missing = [c for c in clusters if c.pk not in present]
    bulk.insert_values(
        PropagatedVersion, [{"resource_id": resource.pk, "cluster_id": c.pk} for c in missing], ignore_conflicts=True
    )
    return [c.pk for c in missing]


def create_run_pvs(run_id: int) -> None:
    """Create the PropagatedVersions (Pending) that a run's targets lack, in one statement that reads
    the targets: a thousand-cluster run's rows were built value by value in Python while every worker waited."""
    quote = connection.ops.quote_name
    pv, target, run = (quote(m._meta.db_table) for m in (PropagatedVersion, PropagationTarget, PropagationRun))
    bulk.insert_selected(
        PropagatedVersion,
        {"resource": "r.resource_id", "cluster": "t.cluster_id"},
        f"FROM {target} t JOIN {run} r ON r.id = t.run_id WHERE t.run_id = %s AND NOT EXISTS "
        f"(SELECT 1 FROM {pv} p WHERE p.resource_id = r.resource_id AND p.cluster_id = t.cluster_id)",
        [run_id],
        ignore_conflicts=True,  # one another process made meanwhile is left as it is
    )


@dataclass
class TargetOutcome:
    state: str = ""
    reason: str = ""
    message: str = ""
    changed: bool = False
    retry_in: float | None = None
    skipped: str = ""


def record_steps(
    run: PropagationRun, steps: list[tuple[PropagationTarget, Step]], *, last: bool = False
) -> dict[int, TargetOutcome]:
    """Write what a chunk's finished targets did, in one transaction with their audit events. What the
    applied targets write (most of a chunk) is prepared before the transaction, and written with one
    statement, so the write lock is held briefly while other chunks wait for it. ``last``: the
    chunk's last flush, which closes the run when no target of it is left (``close_run``)."""
    resource, revision, actor = run.resource, run.revision, run.actor
    outcomes, events, finished = {}, [], {}
    now = timezone.now()
    if newer := clusters_in_newer_runs(run, [step.cluster.pk for _, step in steps if step.outcome != SUPERSEDED]):
        # a newer run of the resource targets these clusters since this one claimed them (a rollback
        # made while this batch was in flight): its record stands, this one's would overwrite it
        steps = [(t, replace(step, outcome=SUPERSEDED) if step.cluster.pk in newer else step) for t, step in steps]
    applied = [
        (target, step, applied_fields(resource, revision, step, now=now))
        for target, step in steps
        if step.outcome == APPLIED
    ]
    applied_events = prepare_events(
        [
            applied_event(resource, revision, step, fields, replicas=target.replicas, actor=actor)
            for target, step, fields in applied
        ]
    )
    with transaction.atomic():
        write_applied({step.pv: fields for _, step, fields in applied})
        for target, step in steps:
            pv, cluster = step.pv, step.cluster
            if step.outcome == FAILED:
                failure = step.failure
                if failure.transient and target.attempts < max_attempts():
                    delay = backoff_seconds(target.attempts)
                    message = (
                        f"{failure.message} Retrying in {delay:g}s (attempt {target.attempts} of {max_attempts()})."
                    )
                    status_change(pv, failure.reason, message, actor=actor, events=events)  # audited when it changes
                    PropagationTarget.objects.filter(pk=target.pk).update(
                        state=TargetState.RETRYING,
                        lease_until=now + timedelta(seconds=delay),
                        reason=failure.reason,
                        message=message,
                    )
                    outcomes[target.cluster_id] = TargetOutcome(
                        state=TargetState.RETRYING, reason=failure.reason, message=message, retry_in=delay
                    )
                    continue
                status_change(pv, failure.reason, failure.message, actor=actor, events=events)
                result = (TargetState.FAILED, failure.reason, failure.message, False)
            elif step.outcome == APPLIED:
                verb = "Updated" if step.existed else "Created"
                result = (TargetState.DONE, PropagationReason.OK, "; ".join(step.warnings) or f"{verb}.", True)
            elif step.outcome == ISOLATED:
                status_change(pv, PropagationReason.CLUSTER_ISOLATED, step.failure.message, actor=actor, events=events)
                result = (TargetState.DONE, PropagationReason.CLUSTER_ISOLATED, step.failure.message, False)
            elif step.outcome == UNCHANGED:
                if step.remote_status is not None and step.remote_status != pv.remote_status:
                    PropagatedVersion.objects.filter(pk=pv.pk).update(remote_status=step.remote_status)
                    pv.remote_status = step.remote_status
                result = (TargetState.DONE, PropagationReason.OK, "Up to date.", False)
            elif step.outcome == ORPHANED:
                status_change(
                    pv,
                    PropagationReason.ORPHANED,
                    f"Left on {cluster.name} (retention Orphan).",
                    actor=actor,
                    events=events,
                    sync_state=SyncState.UNKNOWN,
                    drift=[],
                )
                result = (TargetState.DONE, PropagationReason.ORPHANED, "Orphaned.", False)
            elif step.outcome in (DELETED, GONE):
                deleted = step.outcome == DELETED
                gone = "; ".join(step.warnings) or f"Already gone from {cluster.name}."
                status_change(
                    pv,
                    PropagationReason.REMOVED,
                    f"Deleted from {cluster.name}." if deleted else gone,
                    actor=actor,
                    events=events,
                    applied_manifest=None,
                    sync_state=SyncState.UNKNOWN,
                    drift=[],
                    version="",
                    remote_status=None,
                    live_uid="",
                )
                result = (
                    TargetState.DONE,
                    PropagationReason.REMOVED,
                    "Deleted." if deleted else ("; ".join(step.warnings) or "Already gone."),
                    deleted,
                )
            else:  # SUPERSEDED
                result = (TargetState.DONE, "", "Superseded by a newer propagation run.", False)
            finished.setdefault(result, []).append(target.pk)
            state, reason, message, changed = result
            outcomes[target.cluster_id] = TargetOutcome(state=state, reason=reason, message=message, changed=changed)
        # most targets of a chunk end the same way: one UPDATE per distinct ending
        for (state, reason, message, changed), pks in finished.items():
            PropagationTarget.objects.filter(pk__in=pks).update(
                state=state, reason=reason, message=message, changed=changed, lease_until=None, finished_at=now
            )
        if last and (closed := close_run(run.pk, resource)):
            events.append(closed)
        append_events(applied_events + prepare_events(events))
    return outcomes


def clusters_in_newer_runs(run: PropagationRun, cluster_ids: list[int]) -> set[int]:
    """Which of ``cluster_ids`` a later run of the same resource also targets (that run's revision wins)."""
    if not cluster_ids:
        return set()
    # no list of the ids in the query: there is usually no newer run, and the list cost more than the rest
    newer = PropagationTarget.objects.filter(run__resource_id=run.resource_id, run_id__gt=run.pk)
    return set(cluster_ids).intersection(newer.values_list("cluster_id", flat=True))


def close_run(run_id: int, resource: FederatedResource) -> dict | None:
    """Inside the caller's transaction: mark the run finished once none of its targets is left to
    do, and return its audit event (None: not finished now). The run's row is locked first, so two
    chunks finishing at once take turns and the later one counts the earlier one's targets."""
    if not list(
        PropagationRun.objects.select_for_update().filter(pk=run_id, finished_at__isnull=True).values_list("pk")
    ):
        return None  # finished already
    unfinished = (TargetState.PENDING, TargetState.RUNNING, TargetState.RETRYING)
    counts = dict(PropagationTarget.objects.filter(run_id=run_id).values_list("state").annotate(n=Count("id")))
    if any(counts.get(state) for state in unfinished):
        return None  # every chunk but a run's last one stops here
    failed = counts.get(TargetState.FAILED, 0)
    done = counts.get(TargetState.DONE, 0)
    state = RunState.SUCCEEDED if not failed else (RunState.FAILED if not done else RunState.PARTIALLY_FAILED)
    PropagationRun.objects.filter(pk=run_id).update(state=state, finished_at=timezone.now())
    return dict(
        action="federation.run.finish",
        actor=None,
        obj=resource,
        summary=f"Propagation run {run_id} of {resource} finished: {state} ({done} done, {failed} failed)",
        after={"run": run_id, "state": state, "done": done, "failed": failed},
    )


def finish_run_if_complete(run_id: int, *, resource: FederatedResource | None = None) -> None:
    """``close_run`` in a transaction of its own (a chunk closes its run in its last flush's).
    ``resource``: the run's, when the caller has it."""
    if resource is None:
        resource = FederatedResource.objects.select_related("type").get(runs__pk=run_id)
    with transaction.atomic():
        if event := close_run(run_id, resource):
            append_events(prepare_events([event]))


def status_change(pv: PropagatedVersion, reason: str, message: str, *, actor, events: list, **extra) -> None:
    """Update a PropagatedVersion's status; an audit event (appended to ``events``) when it changes."""
    before = pv.status
    fields = {"status": reason, "message": message, "last_attempt_at": timezone.now(), **extra}
    PropagatedVersion.objects.filter(pk=pv.pk).update(**fields)
    for key, value in fields.items():
        setattr(pv, key, value)
    if before != reason:
        events.append(
            dict(
                action="federation.propagation.status",
                actor=actor,
                obj=pv.resource,
                cluster=pv.cluster.name,
                summary=f"{pv.resource} on {pv.cluster.name}: {before} -> {reason}"
                + (f" ({message})" if message else ""),
                before={"status": before},
                after={"status": reason, "message": message},
            )
        )


def applied_fields(resource: FederatedResource, revision: Revision, step: Step, *, now) -> dict:
    """What an applied target writes on its PropagatedVersion (the same fields for every target)."""
    obj = step.obj
    return dict(
        revision=revision,
        template_hash=step.template_hash,
        override_hash=step.override_hash,
        version=object_version(obj),
        status=PropagationReason.OK,
        message="; ".join(step.warnings),
        applied_manifest=step.manifest,
        sync_state=SyncState.IN_SYNC,
        drift=[],
        **live_identity(obj),
        propagated_at=now,
        last_attempt_at=now,
        remote_status=remote_status(resource.type, obj),
    )


def applied_event(
    resource: FederatedResource, revision: Revision, step: Step, fields: dict, *, replicas, actor
) -> dict:
    verb = "Updated" if step.existed else "Created"
    return dict(
        action="federation.propagation.apply",
        actor=actor,
        obj=resource,
        cluster=step.cluster.name,
        summary=f"{verb} {resource.type.kind} {resource.qualified_name} on {step.cluster.name} "
        f"(revision {revision.number}, {fields['version']})",
        before={"status": step.pv.status, "version": step.pv.version},
        after={"status": PropagationReason.OK, "version": fields["version"], "replicas": replicas},
    )


def write_applied(fields_by_pv: dict[PropagatedVersion, dict]) -> None:
    """Write applied targets' PropagatedVersions with one statement for the lot (fedportal.bulk). A
    row deleted meanwhile (its cluster unjoined) is not there to update, so it is not made again."""
    now = timezone.now()
    bulk.update_rows(PropagatedVersion, {pv.pk: {**fields, "updated_at": now} for pv, fields in fields_by_pv.items()})
    for pv, fields in fields_by_pv.items():
        for key, value in fields.items():
            setattr(pv, key, value)
