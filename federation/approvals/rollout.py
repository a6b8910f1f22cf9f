"""Staged rollouts: an approved change applied wave by wave, with health gates between waves.

Public API:

    effective_strategy(cr) -> dict             the request's override, else its resource's strategy
    is_staged(cr) -> bool                       whether applying ``cr`` goes through waves
    start_rollout(cr, *, actor) -> Rollout      (inside _apply's transaction) waves fixed, first advance queued
    advance_rollout(rollout_id) -> str          THE task body: every transition possible now; idempotent
    pause_rollout / resume_rollout / abort_rollout / rollback_rollout(cr, *, actor[, reason])
    approve_wave(cr, *, actor, comment="", wave_name=None)   an approval wave's approvals (author cannot)
    waiting_wave_name(status) -> str            the wave a rollout_status waits on for approval
    rollout_status(cr) -> dict | None           {"state", "waves": [{"name", "state", "clusters", "failedGate"}]}
    resume_stale_rollouts(*, stale_seconds=30) -> int   periodic safety net: re-queue lost advance tasks

How it stays correct when a task runs twice or a worker dies: one advancing task at a time holds
the rollout's lease (compare-and-set on ``lease_until``); every state change is a compare-and-set on
the expected state; a batch of clusters is started by a compare-and-set on the wave's
``batch_count`` in the same transaction that creates its PropagationRun, so a batch is sent once;
the run's targets are claimed with propagation's own leases (a killed worker's targets are re-queued
by propagation's stale sweep). A wave is entered only once the one before it is Passed.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Case, Exists, F, IntegerField, OuterRef, Q, Subquery, When
from django.utils import timezone

from clusters.models import Cluster
from federation import enqueue, propagation
from federation.approvals.choices import ChangeKind, ChangeState, RolloutState, WaveState
from federation.approvals.content import STAGED_KINDS, content_authors
from federation.approvals.models import ChangeRequest, Rollout, RolloutWave
from federation.approvals.selectors import outcome_rows
from federation.choices import PropagationReason, TargetAction, TargetState
from federation.models import FederatedResource, PropagatedVersion, PropagationRun, PropagationTarget, Revision
from federation.propagation.common import chunked
from federation.propagation.gates import EXCLUDED, FAILED, HEALTHY, SETTLED, check_gates
from federation.rollout_strategy import assign_waves, auto_rollback_for
from fedportal.audit import record_event, record_events
from fedportal.masking import is_secret_kind, scrub_message
from fedportal.roles import Role, require_role
from fedportal.text import with_article

logger = logging.getLogger(__name__)

STALE_SECONDS = 30
ADVANCE_SECONDS = 20  # how long one advance task keeps polling before handing over to the next
APPLYING_POLL_SECONDS = 0.02  # how often an advancing task looks whether the other chunks of its wave finished
MAX_STEPS = 50  # transitions per advance (a 20-wave rollout with no bake still needs several calls)

# a cluster's state within its wave (the page and `fedctl rollout status` show these)
C_PENDING, C_APPLYING, C_APPLIED, C_FAILED, C_HEALTHY, C_ROLLED_BACK, C_EXCLUDED = (
    "Pending",
    "Applying",
    "Applied",
    "Failed",
    "Healthy",
    "RolledBack",
    "Excluded",  # unjoined or isolated since the rollout started: not gated (federation.propagation.gates)
)


class RolloutError(Exception):
    """A rollout action not allowed now; the message says why (shown to the user, 4xx)."""


def lease_seconds() -> float:
    """How long one advancing task holds a rollout; past it (a killed worker) another one may."""
    return float(getattr(settings, "FEDPORTAL_ROLLOUT_LEASE_SECONDS", 130))


def poll_seconds() -> float:
    return float(getattr(settings, "FEDPORTAL_ROLLOUT_POLL_SECONDS", 1.0))


def _name(user) -> str:
    return user.get_username() if getattr(user, "pk", None) else "system"


def _event(action: str, cr: ChangeRequest, *, actor, summary: str, before=None, after=None) -> dict:
    """A rollout audit event, as ``record_events`` takes it."""
    return dict(action=f"approvals.rollout.{action}", actor=actor, obj=cr, summary=summary, before=before, after=after)


def _audit(action: str, cr: ChangeRequest, *, actor, summary: str, before=None, after=None) -> None:
    record_event(**_event(action, cr, actor=actor, summary=summary, before=before, after=after))


# --- strategy ---------------------------------------------------------------------------------


def effective_strategy(cr: ChangeRequest) -> dict:
    if cr.rollout_strategy is not None:
        return cr.rollout_strategy
    return (cr.resource.rollout_strategy or {}) if cr.resource_id else {}


def is_staged(cr: ChangeRequest) -> bool:
    """Resource changes with a strategy; never deletes, unjoins, emergencies or rollbacks of a rollout."""
    return (
        cr.kind in STAGED_KINDS
        and cr.resource_id is not None
        and not cr.emergency
        and cr.rollback_of_id is None
        and bool(effective_strategy(cr).get("waves"))
    )


def skips_waves(cr: ChangeRequest) -> bool:
    """Whether ``cr`` carries a strategy of its own without waves while its resource has waves: once
    approved it goes to every cluster at once (approvers are told; it is part of what they approve)."""
    return (
        cr.rollout_strategy is not None
        and cr.kind in STAGED_KINDS
        and cr.resource_id is not None
        and not cr.rollout_strategy.get("waves")
        and bool((cr.resource.rollout_strategy or {}).get("waves"))
    )


def planned_waves(cr: ChangeRequest):
    """The waves applying ``cr`` would go through now (for approvers, before it starts); [] unstaged."""
    if not is_staged(cr) or cr.proposed_revision is None:
        return []
    plans = propagation.plan_targets(cr.resource, cr.proposed_revision)
    return assign_waves(effective_strategy(cr), {p.cluster.name: p.cluster.labels or {} for p in plans})


# a rollout in these states still owns its resource's clusters: its next batch, or its rollback,
# sends its own revisions, and would undo another change applied meanwhile
UNFINISHED = (RolloutState.PROGRESSING, RolloutState.PAUSED, RolloutState.WAITING_APPROVAL, RolloutState.HALTED)


def resources_in_rollout(resource_ids) -> dict[int, int]:
    """{resource id: change request id} of the given resources that a staged rollout still owns."""
    return dict(
        Rollout.objects.filter(change_request__resource_id__in=list(resource_ids), state__in=UNFINISHED).values_list(
            "change_request__resource_id", "change_request_id"
        )
    )


def last_rollout_aborted(resource_id: int) -> bool:
    """The resource's newest staged rollout was aborted: its propagated revision reached the waves
    before the abort only, and a cluster that comes into its placement now gets nothing until the
    next change (as one that waited during the rollout): one that went to the whole placement
    (``overtaken_by_a_later_change``) ends that wait."""
    state = (
        deciding_rollouts(Rollout.objects.filter(change_request__resource_id=resource_id))
        .annotate(overtaken=overtaken_by_a_later_change())
        .order_by("-pk")
        .values_list("state", "overtaken")
    ).first()
    return state == (RolloutState.ABORTED, False)


def deciding_rollouts(rollouts):
    """The rollouts of a Rollout queryset that decide where their resource is: unfinished ones,
    and finished ones that sent something (a run). One aborted before its first batch sent nothing:
    the revision the resource had went to its whole placement, and the newest rollout that did send
    something (if any) decides; taken as the newest, it held back every later joiner, and a request
    for the propagated revision was refused as "already what the clusters have"."""
    sent = Exists(PropagationRun.objects.filter(change_requests=OuterRef("change_request_id")))
    return rollouts.filter(Q(state__in=UNFINISHED) | sent)


def overtaken_by_a_later_change() -> Exists:
    """For a Rollout queryset: a change of the same resource applied after it went to the whole
    placement at once (one a rollout strategy could have staged, not a rollout's own rollback, and
    with a propagation run). Its placement then says again where the resource is: the rollout no
    longer holds anything back. Its newest rollout stayed, aborted or rolled back, the newest all the
    same, and a cluster joining any time later got nothing, with a message naming that old request."""
    return Exists(
        ChangeRequest.objects.filter(
            resource_id=OuterRef("change_request__resource_id"),
            applied_at__gt=OuterRef("change_request__applied_at"),
            kind__in=STAGED_KINDS,
            rollback_of__isnull=True,
            rollout__isnull=True,
            runs__isnull=False,
        )
    )


def with_rollout_holding_back(resources):
    """``resources`` (a FederatedResource queryset) annotated with ``rollout_holding_back``: the
    change request of the resource's newest staged rollout (``deciding_rollouts``) unless it
    completed (or a later change went to the whole placement: ``overtaken_by_a_later_change``),
    else None. Until
    one completes, its propagated revision may not be where its placement says: waves not reached
    (unfinished), stopped (aborted), or clusters given back what they had (rolled back: the
    propagated revision is then the highest of those, and may be an aborted rollout's). What was
    sent where is then in its runs (``approved_revisions``), not in its placement."""
    newest = deciding_rollouts(Rollout.objects.filter(change_request__resource_id=OuterRef("pk"))).order_by("-pk")
    holding = Case(
        When(~Q(state=RolloutState.COMPLETED) & ~overtaken_by_a_later_change(), then=F("change_request_id")),
        default=None,
        output_field=IntegerField(),
    )
    return resources.annotate(rollout_holding_back=Subquery(newest.annotate(holding=holding).values("holding")[:1]))


def rollout_holding_back(resource_id: int) -> int | None:
    """``with_rollout_holding_back`` for one resource."""
    return (
        with_rollout_holding_back(FederatedResource.objects.filter(pk=resource_id))
        .values_list("rollout_holding_back", flat=True)
        .first()
    )


def refuse_during_rollout(resource_id: int | None, *, applying: ChangeRequest | None = None) -> None:
    """Raise RolloutError while another request's rollout of the resource is unfinished. Call it
    inside the applying transaction, after locking the resource's row (``lock_resource``)."""
    if resource_id is None:
        return
    other = (
        Rollout.objects.filter(change_request__resource_id=resource_id, state__in=UNFINISHED)
        .exclude(change_request_id=getattr(applying, "pk", None))
        .select_related("change_request")
        .first()
    )
    if other is not None:
        raise RolloutError(
            f"CR-{other.change_request_id} is rolling out {other.change_request.resource_repr} ({other.state}); "
            "it would overwrite this change wave by wave, or undo it if rolled back. Let it complete, or abort "
            "or roll it back first."
        )


def lock_resource(resource_id: int | None) -> None:
    """Inside a transaction: hold the resource's row, so two requests for it are applied one at a time."""
    if resource_id is not None:
        FederatedResource.objects.select_for_update().filter(pk=resource_id).exists()


def start_rollout(cr: ChangeRequest, *, actor) -> Rollout:
    """Fix the waves of an Applying request (called inside _apply's transaction) and queue the first advance."""
    strategy = effective_strategy(cr)
    revision = cr.proposed_revision
    plans = propagation.plan_targets(cr.resource, revision)
    labels = {p.cluster.name: p.cluster.labels or {} for p in plans}
    waves = assign_waves(strategy, labels)
    # what each cluster has now (a rollback restores it): not the request's base revision, which is
    # what the resource had when the request was drafted, before other changes may have been applied
    ids = [p.cluster.pk for p in plans]
    previous = propagation.approved_revisions(cr.resource, ids)
    # clusters holding an object no approved revision accounts for (orphaned, then taken back by this
    # change): None, so a rollback never deletes what was there before the change
    held = set(
        PropagatedVersion.objects.filter(resource_id=cr.resource_id, cluster_id__in=ids)
        .exclude(version="")
        .exclude(status=PropagationReason.REMOVED)
        .values_list("cluster_id", flat=True)
    )
    names = {p.cluster.pk: p.cluster.name for p in plans}
    rollout = Rollout.objects.create(
        change_request=cr,
        strategy=strategy,
        auto_rollback=auto_rollback_for(strategy, labels),
        previous_revisions={
            names[pk]: previous[pk].pk if pk in previous else None for pk in ids if pk in previous or pk in held
        },
    )
    RolloutWave.objects.bulk_create(
        [
            RolloutWave(
                rollout=rollout,
                index=i,
                name=w.name,
                clusters=w.clusters,
                cluster_states={c: C_PENDING for c in w.clusters},
                max_parallel=w.max_parallel,
                bake_seconds=w.bake_seconds,
                max_failures=w.max_failures,
                progress_deadline=w.progress_deadline,
                require_approval=w.require_approval,
            )
            for i, w in enumerate(waves)
        ]
    )
    _audit(
        "start",
        cr,
        actor=actor,
        summary=f"Staged rollout of CR-{cr.pk}: {len(waves)} wave(s) "
        + ", ".join(f"{w.name} ({len(w.clusters)})" for w in waves),
        after={"waves": {w.name: w.clusters for w in waves}, "autoRollback": rollout.auto_rollback},
    )
    enqueue.advance_rollout(rollout.pk)
    return rollout


# --- the executor -------------------------------------------------------------------------------


# what a step never reads of its change request: per-cluster diffs and outcome, preflight results
LARGE_REQUEST_FIELDS = ("diffs", "outcome", "preflight", "target_clusters")


def _claim(rollout_id: int) -> bool:
    now = timezone.now()
    return bool(
        Rollout.objects.filter(pk=rollout_id, state=RolloutState.PROGRESSING)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .update(lease_until=now + timedelta(seconds=lease_seconds()), updated_at=now)
    )


def _release(rollout_id: int) -> None:
    Rollout.objects.filter(pk=rollout_id).update(lease_until=None, updated_at=timezone.now())


def advance_rollout(rollout_id: int) -> str:
    """Do every transition the rollout can make now, and keep at it (polling the gates every
    FEDPORTAL_ROLLOUT_POLL_SECONDS) for up to ADVANCE_SECONDS, half the lease at most, so a wave
    follows the one before without a round trip through the broker. Returns what it waits for
    ("busy": another task holds it, "done": it no longer progresses). Safe to run twice, or at once."""
    if not _claim(rollout_id):
        state = Rollout.objects.filter(pk=rollout_id).values_list("state", flat=True).first()
        return "busy" if state == RolloutState.PROGRESSING else "done"
    deadline = time.monotonic() + min(ADVANCE_SECONDS, lease_seconds() / 2)
    outcome, steps = "again", 0
    try:
        while True:
            outcome = _step(rollout_id, until=deadline)
            steps += 1
            if outcome == "again" and steps < MAX_STEPS and time.monotonic() < deadline:
                continue
            if outcome in ("done", "halted", "waiting approval") or time.monotonic() + poll_seconds() > deadline:
                break
            if outcome == "applying":
                _wait_for_batches(rollout_id, poll_seconds())
            else:
                time.sleep(poll_seconds())
            steps = 0
    finally:
        _release(rollout_id)
    state = Rollout.objects.filter(pk=rollout_id).values_list("state", flat=True).first()
    if state == RolloutState.PROGRESSING:
        enqueue.advance_rollout(rollout_id, countdown=poll_seconds(), on_commit=False)
    return outcome if state == RolloutState.PROGRESSING else "done"


def _wait_for_batches(rollout_id: int, seconds: float) -> None:
    """Sleep until every run of the applying wave has finished, or ``seconds`` passed (one cheap
    query every APPLYING_POLL_SECONDS), so the wave's gates are checked as soon as it is applied."""
    batches = (
        RolloutWave.objects.filter(rollout_id=rollout_id, state=WaveState.APPLYING)
        .values_list("batches", flat=True)
        .first()
    )
    until = time.monotonic() + seconds
    while batches and time.monotonic() < until:
        if not PropagationRun.objects.filter(pk__in=batches, finished_at__isnull=True).exists():
            return
        time.sleep(APPLYING_POLL_SECONDS)
    if not batches:
        time.sleep(seconds)


def _step(rollout_id: int, *, until: float) -> str:
    """Move the rollout's first unfinished wave as far as it goes now: "again" when it moved (the next
    step reads the waves again), else what it waits for. The rollout is read with its unfinished
    waves (one query a step). Within the step a wave goes on from the state it just wrote without
    reading it again, and a wave that passes enters the next one in the same transaction, so a
    rollout whose clusters are healthy at once runs its waves in one step (enter, apply, gates, pass).
    No new batch or wave is started in the step past ``until`` (time.monotonic()): the advancing
    task checks its deadline between steps, and a task past its time limit is stopped mid-batch."""
    waves = list(
        RolloutWave.objects.select_related("rollout__change_request__resource__type")
        .select_related("rollout__change_request__proposed_revision")
        .defer(*(f"rollout__change_request__{name}" for name in LARGE_REQUEST_FIELDS))
        .filter(rollout_id=rollout_id)
        .exclude(state=WaveState.PASSED)
        .order_by("index")
    )
    if not waves:
        rollout = (
            Rollout.objects.select_related("change_request__resource__type")
            .defer(*(f"change_request__{name}" for name in LARGE_REQUEST_FIELDS))
            .get(pk=rollout_id)
        )
        if rollout.state == RolloutState.PROGRESSING:
            _complete(rollout)
        return "done"
    rollout = waves[0].rollout
    if rollout.state != RolloutState.PROGRESSING:
        return "done"
    for wave, following in zip(waves, [*waves[1:], None], strict=True):
        outcome = _advance_wave(rollout, wave, following, until)
        if outcome != "next" or time.monotonic() > until:
            return "again" if outcome == "next" else outcome
    return "again"


def _advance_wave(rollout: Rollout, wave: RolloutWave, following: RolloutWave | None, until: float) -> str:
    """What the wave's state allows now; "next" when it passed and ``following`` was entered."""
    if wave.state == WaveState.PENDING:
        return _enter_wave(rollout, wave, following, until)
    if wave.state == WaveState.APPLYING:
        return _apply_wave(rollout, wave, following, until)
    if wave.state == WaveState.BAKING:
        return _bake_wave(rollout, wave, following)
    return "halted"  # Failed / RolledBack with a Progressing rollout cannot happen; wait for an operator


def _wave_cas(wave: RolloutWave, expected: str, new: str, **fields) -> bool:
    """A step's move of its wave, only while the rollout still progresses: once paused, aborted or
    rolled back (committed before this statement) no wave is entered, applied or passed."""
    return bool(
        RolloutWave.objects.filter(pk=wave.pk, state=expected, rollout__state=RolloutState.PROGRESSING).update(
            state=new, **fields
        )
    )


def _enter_wave(rollout: Rollout, wave: RolloutWave, following: RolloutWave | None, until: float) -> str:
    cr = rollout.change_request
    if wave.require_approval:
        valid, required = wave_approval_count(cr, wave)
        if valid < required:
            with transaction.atomic():
                if Rollout.objects.filter(pk=rollout.pk, state=RolloutState.PROGRESSING).update(
                    state=RolloutState.WAITING_APPROVAL, updated_at=timezone.now()
                ):
                    _audit(
                        "waiting_approval",
                        cr,
                        actor=None,
                        summary=f"CR-{cr.pk} waits for {required} approval(s) before wave {wave.name}",
                        after={"wave": wave.name, "valid": valid, "required": required},
                    )
            return "waiting approval"
    now = timezone.now()
    with transaction.atomic():
        entered = _wave_cas(wave, WaveState.PENDING, WaveState.APPLYING, started_at=now)
        if entered:
            record_events([_start_event(cr, wave)])
    if not entered:
        return "again"
    wave.state, wave.started_at = WaveState.APPLYING, now
    return _apply_wave(rollout, wave, following, until)


def _start_event(cr: ChangeRequest, wave: RolloutWave) -> dict:
    return _event(
        "wave_start",
        cr,
        actor=None,
        summary=f"CR-{cr.pk} wave {wave.index + 1} {wave.name} started on {len(wave.clusters)} cluster(s)",
        after={"wave": wave.name, "clusters": wave.clusters, "maxParallel": wave.max_parallel},
    )


def _batch_states(wave: RolloutWave, cr: ChangeRequest) -> tuple[dict[str, str], bool, list[str]]:
    """Cluster states from the wave's runs; whether every started batch finished; failure lines. A
    cluster whose target failed counts as applied once a later run of the same revision (a re-sync
    of the failed clusters, before a resume) applied it there."""
    states = dict(wave.cluster_states)
    failures = {}
    if not wave.batches:
        return states, True, []
    finished_runs = PropagationRun.objects.filter(pk__in=wave.batches, finished_at__isnull=False).count()
    finished = finished_runs == len(set(wave.batches))
    targets = PropagationTarget.objects.filter(run_id__in=wave.batches).values_list(
        "cluster__name", "state", "reason", "message", "run_id"
    )
    for name, state, reason, message, run_id in targets:
        if state == TargetState.DONE:
            states[name] = C_APPLIED if states.get(name) != C_HEALTHY else C_HEALTHY
        elif state == TargetState.FAILED:
            states[name] = C_FAILED
            failures[name] = (run_id, f"{name}: {reason} {message}".strip())
        else:
            states[name] = C_APPLYING
    if failures:
        later = PropagationTarget.objects.filter(
            run__resource_id=cr.resource_id,
            run__revision_id=cr.proposed_revision_id,
            run_id__gt=min(run_id for run_id, _ in failures.values()),
            cluster__name__in=list(failures),
            state=TargetState.DONE,
            action=TargetAction.APPLY,
            reason=PropagationReason.OK,
        ).values_list("cluster__name", "run_id")
        for name, run_id in later:
            if name in failures and run_id > failures[name][0]:
                del failures[name]
                states[name] = C_APPLIED
    return states, finished, [line for _, line in failures.values()]


def _save_states(wave: RolloutWave, states: dict[str, str]) -> None:
    """The cluster states of a wave still in the state this step read (never over a rollback's)."""
    if states != wave.cluster_states:
        _wave_update(wave, cluster_states=states)
        wave.cluster_states = states


def _wave_update(wave: RolloutWave, **fields) -> None:
    """Write ``fields`` only while the wave is in the state this step knows: a rollback or halt
    written meanwhile is never overwritten by a step that read the wave before it."""
    RolloutWave.objects.filter(pk=wave.pk, state=wave.state).update(**fields)


def _apply_wave(rollout: Rollout, wave: RolloutWave, following: RolloutWave | None, until: float) -> str:
    """Start the wave's batches one after another (each waits for the one before), then check its gates."""
    while True:
        states, finished, failures = _batch_states(wave, rollout.change_request)
        if not finished:
            _save_states(wave, states)
            return "applying"
        if len(failures) > wave.max_failures:
            _save_states(wave, states)
            _halt(rollout, wave, f"applied: {len(failures)} cluster(s) failed ({'; '.join(failures)[:900]})")
            return "again"
        started = wave.batch_count * wave.max_parallel
        if started >= len(wave.clusters):
            return _finish_applying(rollout, wave, following, states, failures)
        if wave.batch_count and time.monotonic() > until:  # a wave's first batch always starts: progress
            _save_states(wave, states)
            return "again"  # the next step starts the next batch
        started_run = _start_batch(rollout, wave, wave.clusters[started : started + wave.max_parallel], states)
        if started_run is None:
            _save_states(wave, states)  # paused, aborted or halted meanwhile: the last batch's states stay
            return "applying"
        if started_run[0] is not None and not _apply_batch_here(*started_run):
            return "applying"
        # applied here (or nothing to apply: its clusters were unjoined): the batch's states are read at
        # once (and its gates checked when it was the last)


def _finish_applying(
    rollout: Rollout, wave: RolloutWave, following: RolloutWave | None, states: dict[str, str], failures: list[str]
) -> str:
    """Every batch of the wave is applied: its gates are checked now. A wave whose gates pass at once
    with no bake time goes straight to Passed (its "applied" and "passed" events in one append);
    otherwise it is Baking, and the same verdict is judged as a bake step judges it."""
    cr = rollout.change_request
    results = _wave_gates(cr, wave)
    applied = _event(
        "wave_applied",
        cr,
        actor=None,
        summary=f"CR-{cr.pk} wave {wave.name} applied to {len(wave.clusters)} cluster(s); gates checked"
        + (f", baking {wave.bake_seconds}s" if wave.bake_seconds else ""),
        after={"wave": wave.name, "failures": failures},
    )
    now = timezone.now()
    gate_states = _gate_states(states, results)
    if wave.bake_seconds == 0 and _gates_pass(wave, results, following):
        return _pass_wave(
            rollout,
            wave,
            following,
            expected=WaveState.APPLYING,
            events=[applied, _passed_event(cr, wave, gate_states)],
            applied_at=now,
            finished_at=now,
            healthy_since=now,
            gate_message="",
            cluster_states=gate_states,
        )
    with transaction.atomic():
        if not _wave_cas(wave, WaveState.APPLYING, WaveState.BAKING, applied_at=now, cluster_states=states):
            return "again"
        record_events([applied])
    wave.state, wave.applied_at, wave.cluster_states = WaveState.BAKING, now, states
    return _judge_gates(rollout, wave, following, results)


def _pass_wave(
    rollout: Rollout, wave: RolloutWave, following: RolloutWave | None, *, expected: str, events: list, **fields
) -> str:
    """The wave passed its gates: it is Passed and, in the same transaction (its wave_start event
    appended with the wave's own), the next wave is entered unless it waits for approval or the
    rollout was paused meanwhile. "next" when the step goes on with that wave; after the last wave
    the rollout is Completed ("done")."""
    cr = rollout.change_request
    now = fields["finished_at"]
    entered = False
    with transaction.atomic():
        if not _wave_cas(wave, expected, WaveState.PASSED, **fields):
            return "again"
        if following is not None and not following.require_approval:
            entered = bool(
                RolloutWave.objects.filter(
                    pk=following.pk, state=WaveState.PENDING, rollout__state=RolloutState.PROGRESSING
                ).update(state=WaveState.APPLYING, started_at=now)
            )
            if entered:
                events.append(_start_event(cr, following))
        record_events(events)
    wave.state = WaveState.PASSED
    if following is None:
        _complete(rollout)
        return "done"
    if not entered:
        return "again"
    following.state, following.started_at = WaveState.APPLYING, now
    return "next"


def _apply_batch_here(run_id: int | None, cluster_ids: list[int]) -> bool:
    """Apply the batch's first chunk in this task, so a wave does not wait for the broker; the chunk
    tasks queued with the run apply the rest. No task is queued for this chunk (``first_chunk_here``):
    one that found the targets claimed cost the other worker's CPU and locks while this one applied
    them; should this task die before its claim, the stale-target sweep queues them, and the rollout
    itself waits for its lease anyway. Sharing the first chunk with a task in another process was
    slower: both claims, both recordings and the audit chain's head then wait for each other's locks,
    and the wave waits for the later of the two. Transient failures are retried by tasks. True when
    it applied some."""
    first_chunk = next(iter(chunked(cluster_ids)), [])
    if not first_chunk:
        return False
    try:
        outcomes = propagation.propagate_targets(run_id, first_chunk)
    except Exception:
        # no task was queued for this chunk: one takes it now (its claim is a compare-and-set)
        enqueue.propagate_targets(run_id, first_chunk)
        raise
    for delay, retry_ids in propagation.retries_by_delay(outcomes).items():
        enqueue.propagate_targets(run_id, retry_ids, countdown=delay)
    return any(not outcome.skipped for outcome in outcomes.values())


def _start_batch(
    rollout: Rollout, wave: RolloutWave, names: list[str], states: dict[str, str]
) -> tuple[int | None, list[int]] | None:
    """Send the change to one batch of a wave: the compare-and-set on batch_count and the run are one
    transaction, so a batch is started once however many tasks try. ``states`` are the wave's cluster
    states as just read from its runs; the wave (row and instance) records the batch."""
    cr = rollout.change_request
    ids = list(Cluster.objects.filter(name__in=names).values_list("pk", flat=True))
    with transaction.atomic():
        # the rollout's row first, as every operator action and rollback lock it: a pause or rollback
        # waits for this batch to be recorded (a rollback then undoes it too), or this batch waits
        # for it and does not start
        if _lock_rollout(rollout) != RolloutState.PROGRESSING:
            return None  # paused or aborted since this step read it: no new batch
        locked = RolloutWave.objects.select_for_update().get(pk=wave.pk)
        if locked.batch_count != wave.batch_count or locked.state != WaveState.APPLYING:
            return None
        if not ids:  # every cluster of the batch was unjoined since the rollout started: nothing to send
            states = {**states, **{n: C_EXCLUDED for n in names}}
            RolloutWave.objects.filter(pk=wave.pk).update(batch_count=locked.batch_count + 1, cluster_states=states)
            wave.batch_count, wave.cluster_states = locked.batch_count + 1, states
            return None, []
        try:  # a refusal is raised before the run writes anything: no savepoint needed
            run = propagation.propagate_revision(
                cr.resource, actor=None, revision=cr.proposed_revision, only_clusters=ids, first_chunk_here=True
            )
        except propagation.PropagationError as exc:
            refusal = str(exc)
        else:
            refusal = ""
            cr.runs.add(run)
            states = {**states, **{n: C_APPLYING for n in names}}
            batches = [*locked.batches, run.pk]
            RolloutWave.objects.filter(pk=wave.pk).update(
                batch_count=locked.batch_count + 1, batches=batches, cluster_states=states
            )
    if refusal:  # halted (and rolled back) in transactions of their own, taking the locks in order
        _halt(rollout, wave, f"applied: {refusal}")
        return None
    wave.batch_count, wave.batches, wave.cluster_states = locked.batch_count + 1, batches, states
    return run.pk, run.queued_cluster_ids  # the skipped ones are done already


def _deadline_passed(wave: RolloutWave, results) -> str:
    since = wave.applied_at or wave.started_at or timezone.now()
    elapsed = (timezone.now() - since).total_seconds()
    for result in results.values():
        if result.verdict in SETTLED:
            continue  # a failure is judged against max_failures, not the deadline
        deadline = wave.progress_deadline or result.deadline or 600
        if elapsed > deadline:
            return f"rollout: {result.reason or result.cluster} (not complete within {deadline}s)"
    return ""


def _bake_wave(rollout: Rollout, wave: RolloutWave, following: RolloutWave | None) -> str:
    return _judge_gates(rollout, wave, following, _wave_gates(rollout.change_request, wave))


def _wave_gates(cr: ChangeRequest, wave: RolloutWave):
    """``check_gates`` for a wave: its revision, and the clusters its batches remove the resource from."""
    removed = set(
        PropagationTarget.objects.filter(
            run_id__in=wave.batches, action__in=(TargetAction.DELETE, TargetAction.ORPHAN)
        ).values_list("cluster__name", flat=True)
    )
    return check_gates(cr.resource, wave.clusters, revision_id=cr.proposed_revision_id, removed=removed)


def _gate_states(states: dict[str, str], results) -> dict[str, str]:
    states = dict(states)
    for name, result in results.items():
        states[name] = {HEALTHY: C_HEALTHY, FAILED: C_FAILED, EXCLUDED: C_EXCLUDED}.get(result.verdict, C_APPLIED)
    return states


def _gates_pass(wave: RolloutWave, results, following: RolloutWave | None) -> bool:
    """Every cluster healthy, but for the failures the wave allows (and, before another wave, at
    least one cluster checked)."""
    failed = sum(1 for r in results.values() if r.verdict == FAILED)
    return (
        failed <= wave.max_failures
        and all(r.verdict in SETTLED for r in results.values())
        and not _nothing_checked(results, following)
    )


def _nothing_checked(results, following: RolloutWave | None) -> str:
    """Why no cluster of the wave can vouch for the change before the next wave starts (every one
    Excluded: an isolated canary is no signal), else "". The last wave vouches for nothing further."""
    if following is not None and results and all(r.verdict == EXCLUDED for r in results.values()):
        return "no cluster of the wave could be checked: " + "; ".join(r.reason for r in results.values())
    return ""


def _passed_event(cr: ChangeRequest, wave: RolloutWave, states: dict[str, str]) -> dict:
    return _event(
        "gate_passed",
        cr,
        actor=None,
        summary=f"CR-{cr.pk} wave {wave.name} passed its gates"
        + (f" after baking {wave.bake_seconds}s" if wave.bake_seconds else "")
        + (f" ({excluded} cluster(s) excluded: unjoined or isolated)" if (excluded := _excluded(states)) else ""),
        after={"wave": wave.name, "clusters": states, "bakeSeconds": wave.bake_seconds},
    )


def _excluded(states: dict[str, str]) -> int:
    return sum(1 for state in states.values() if state == C_EXCLUDED)


def _judge_gates(rollout: Rollout, wave: RolloutWave, following: RolloutWave | None, results) -> str:
    """A Baking wave's gate verdicts: halt on a failed gate or a passed deadline, wait while a
    rollout is in progress, pass once healthy for the bake time."""
    cr = rollout.change_request
    failed = [r for r in results.values() if r.verdict == FAILED]
    states = _gate_states(wave.cluster_states, results)
    if len(failed) > wave.max_failures:
        _wave_update(wave, cluster_states=states)
        _halt(rollout, wave, "; ".join(f"{r.gate}: {r.reason}" for r in failed)[:1000])
        return "again"
    if expired := _deadline_passed(wave, results):
        _wave_update(wave, cluster_states=states)
        _halt(rollout, wave, expired)
        return "again"
    if unchecked := _nothing_checked(results, following):  # a wave is a signal: with none, later waves must not start
        _wave_update(wave, cluster_states=states)
        _halt(rollout, wave, unchecked[:1000])
        return "again"
    waiting = [r for r in results.values() if r.verdict not in SETTLED]
    now = timezone.now()
    if waiting:
        _wave_update(
            wave, cluster_states=states, healthy_since=None, gate_message="; ".join(r.reason for r in waiting)[:1000]
        )
        return "gates waiting"
    since = wave.healthy_since or now
    if (now - since).total_seconds() < wave.bake_seconds:
        _wave_update(wave, cluster_states=states, healthy_since=since, gate_message="")
        return "baking"
    return _pass_wave(
        rollout,
        wave,
        following,
        expected=WaveState.BAKING,
        events=[_passed_event(cr, wave, states)],
        finished_at=now,
        cluster_states=states,
        healthy_since=since,
        gate_message="",
    )


def _complete(rollout: Rollout) -> None:
    cr = rollout.change_request
    now = timezone.now()
    with transaction.atomic():
        if not Rollout.objects.filter(pk=rollout.pk, state=RolloutState.PROGRESSING).update(
            state=RolloutState.COMPLETED, finished_at=now, updated_at=now
        ):
            return
        rows = outcome_rows(cr.runs.all())
        ChangeRequest.objects.filter(pk=cr.pk, state=ChangeState.APPLYING).update(
            state=ChangeState.APPLIED, outcome=rows, finished_at=now, updated_at=now
        )
        _audit(
            "complete",
            cr,
            actor=None,
            summary=f"CR-{cr.pk} Applied: every wave passed its gates",
            before={"state": ChangeState.APPLYING},
            after={"state": ChangeState.APPLIED, "rollout": RolloutState.COMPLETED},
        )
        # clusters that joined the placement meanwhile waited for this (federation.membership)
        enqueue.reconcile_resource_membership(cr.resource_id)


def _halt(rollout: Rollout, wave: RolloutWave, reason: str) -> None:
    """A failed gate: the wave is Failed, no later wave starts; auto-rollback when the strategy says so."""
    cr = rollout.change_request
    now = timezone.now()
    with transaction.atomic():
        if not Rollout.objects.filter(pk=rollout.pk, state=RolloutState.PROGRESSING).update(
            state=RolloutState.HALTED, halt_reason=reason, updated_at=now
        ):
            return
        RolloutWave.objects.filter(pk=wave.pk).update(state=WaveState.FAILED, failed_gate=reason, finished_at=now)
        _audit(
            "halt",
            cr,
            actor=None,
            summary=f"CR-{cr.pk} halted: wave {wave.name} failed a gate: {reason}"[:500],
            after={"wave": wave.name, "failedGate": reason, "autoRollback": rollout.auto_rollback},
        )
    if rollout.auto_rollback:
        try:
            _roll_back(Rollout.objects.get(pk=rollout.pk), actor=None, reason=f"automatic: {reason}")
        except RolloutError as exc:
            logger.warning("automatic rollback of CR-%s not possible: %s", cr.pk, exc)
        except Exception:  # a database error: the rollout stays Halted, an operator can roll it back
            logger.exception("automatic rollback of CR-%s failed; roll it back from its page", cr.pk)


# --- rollback ---------------------------------------------------------------------------------


def _updated_clusters(waves: list[RolloutWave]) -> list[str]:
    """The clusters a wave got to: Excluded ones too, so that a rollback's run records the previous
    revision for them as well (re-sync repeats that once their isolation is lifted)."""
    return sorted({n for wave in waves for n, s in wave.cluster_states.items() if s != C_PENDING})


def _rollback_groups(rollout: Rollout, names: list[str], base: Revision) -> list[tuple[Revision, bool, list[int]]]:
    """The updated clusters' ids grouped by the revision each gets back and whether this change created
    the object there: the revision it had when the rollout started (``previous_revisions``), else (a
    cluster that had none: it joined the placement with this change) the request's base revision,
    whose placement removes it again: deleting it whatever the retention when the change created it
    (Orphan would leave the rolled-back revision running there), per the retention when an object
    was there before (orphaned earlier, taken back by this change: recorded as None)."""
    ids = dict(Cluster.objects.filter(name__in=names).values_list("name", "pk"))
    previous = rollout.previous_revisions or {}
    revisions = Revision.objects.in_bulk({previous[n] for n in ids if previous.get(n) is not None})
    groups: dict[tuple[Revision, bool], list[int]] = {}
    for name, pk in sorted(ids.items()):
        had = revisions.get(previous.get(name))
        groups.setdefault((had or base, name not in previous), []).append(pk)
    return sorted(
        ((revision, created, ids) for (revision, created), ids in groups.items()), key=lambda g: (g[0].pk, g[1])
    )


def _roll_back(rollout: Rollout, *, actor, reason: str) -> ChangeRequest:
    """The clusters already updated get the previous revision back: a Rollback request (no new
    approval: it restores what was approved and applied before), linked to the original."""
    cr = ChangeRequest.objects.select_related("resource__type", "base_revision").get(pk=rollout.change_request_id)
    base = cr.base_revision
    if base is None:
        raise RolloutError(f"CR-{cr.pk} created the resource: there is no earlier revision to roll back to.")
    now = timezone.now()
    with transaction.atomic():
        # locks in the order a batch's start takes them (rollout, then its waves): a batch being
        # started finishes first and is rolled back with the rest, and the clusters are read after it
        if not Rollout.objects.filter(
            pk=rollout.pk, state__in=(RolloutState.HALTED, RolloutState.PAUSED, RolloutState.WAITING_APPROVAL)
        ).update(state=RolloutState.ROLLED_BACK, finished_at=now, updated_at=now):
            raise RolloutError(
                f"CR-{cr.pk}'s rollout is {_state_now(rollout)}: only a halted, paused or waiting (for a wave's "
                "approval) one can be rolled back."
            )
        waves = list(RolloutWave.objects.select_for_update().filter(rollout_id=rollout.pk).order_by("index"))
        names = _updated_clusters(waves)
        groups = _rollback_groups(rollout, names, base)
        restored = sorted({revision.number for revision, _, _ in groups})
        rollback = ChangeRequest.objects.create(
            kind=ChangeKind.ROLLBACK,
            state=ChangeState.APPLYING,
            title=f"Roll back CR-{cr.pk} on {len(names)} cluster(s)"[:200],
            description=reason,
            author=actor if getattr(actor, "pk", None) else None,
            author_name=_name(actor),
            resource=cr.resource,
            resource_repr=cr.resource_repr,
            # the revision the clusters get back (the base when they had different ones: each run says which)
            proposed_revision=groups[0][0] if len({g[0] for g in groups}) == 1 else base,
            proposed_hash=cr.proposed_hash,
            base_revision=cr.proposed_revision,
            required_approvals=0,
            target_clusters=names,
            rollback_of=cr,
            submitted_at=now,
            decided_at=now,
            applied_at=now,
        )
        runs = []
        for revision, created, ids in groups:
            try:
                runs.append(
                    propagation.propagate_revision(
                        cr.resource, actor=actor, revision=revision, only_clusters=ids, delete_removed=created
                    )
                )
            except propagation.PropagationError as exc:
                raise RolloutError(str(exc)) from None
        rollback.runs.add(*runs)
        for wave in waves:
            if wave.state in WaveState.started():
                # a cluster the wave left out (isolated: Excluded) never had the revision to roll back
                states = {
                    n: (C_ROLLED_BACK if s not in (C_PENDING, C_EXCLUDED) else s)
                    for n, s in wave.cluster_states.items()
                }
                RolloutWave.objects.filter(pk=wave.pk).update(state=WaveState.ROLLED_BACK, cluster_states=states)
        ChangeRequest.objects.filter(pk=cr.pk, state=ChangeState.APPLYING).update(
            state=ChangeState.ROLLED_BACK, outcome=outcome_rows(cr.runs.all()), finished_at=now, updated_at=now
        )
        record_event(
            "approvals.change.create",
            actor=actor,
            obj=rollback,
            summary=f"CR-{rollback.pk} rolls back CR-{cr.pk}: revision {', '.join(map(str, restored)) or base.number} "
            f"to {', '.join(names) or 'no cluster'}",
            after={"kind": ChangeKind.ROLLBACK, "rollback_of": cr.pk, "clusters": names, "reason": reason},
        )
        _audit(
            "rollback",
            cr,
            actor=actor,
            summary=f"CR-{cr.pk} RolledBack by CR-{rollback.pk} ({reason})"[:500],
            before={"state": ChangeState.APPLYING},
            after={"state": ChangeState.ROLLED_BACK, "rollback": rollback.pk, "clusters": names},
        )
        enqueue.sync_change_request(rollback.pk, countdown=2)
        enqueue.reconcile_resource_membership(cr.resource_id)  # joiners that waited get what it restored
    return rollback


# --- operator actions -------------------------------------------------------------------------


def _rollout_of(cr: ChangeRequest | int) -> Rollout:
    pk = cr.pk if isinstance(cr, ChangeRequest) else cr
    rollout = Rollout.objects.select_related("change_request").filter(change_request_id=pk).first()
    if rollout is None:
        raise RolloutError(f"CR-{pk} has no staged rollout.")
    return rollout


def _lock_rollout(rollout: Rollout) -> str:
    """Inside a transaction: lock the rollout's row (the first lock of every path that takes its
    waves' too) and return its state as stored now."""
    return Rollout.objects.select_for_update().filter(pk=rollout.pk).values_list("state", flat=True).get()


def _state_now(rollout: Rollout) -> str:
    """The rollout's state as stored now (a refused compare-and-set found another than it read)."""
    return Rollout.objects.filter(pk=rollout.pk).values_list("state", flat=True).first() or rollout.state


def _operator_move(cr, *, actor, expected: tuple[str, ...], new: str, verb: str, **fields) -> Rollout:
    require_role(actor, Role.OPERATOR)
    rollout = _rollout_of(cr)
    now = timezone.now()
    with transaction.atomic():
        if not Rollout.objects.filter(pk=rollout.pk, state__in=expected).update(state=new, updated_at=now, **fields):
            allowed = " or ".join(expected)
            raise RolloutError(
                f"CR-{rollout.change_request_id}'s rollout is {_state_now(rollout)}: only {with_article(allowed)} one "
                f"can be {verb}."
            )
        _audit(
            verb.replace(" ", "_"),
            rollout.change_request,
            actor=actor,
            summary=f"{_name(actor)} {verb} the rollout of CR-{rollout.change_request_id}",
            before={"rollout": rollout.state},
            after={"rollout": new},
        )
    return Rollout.objects.get(pk=rollout.pk)


def pause_rollout(cr, *, actor) -> Rollout:
    """No new batch or wave starts (what is being applied finishes)."""
    return _operator_move(
        cr,
        actor=actor,
        expected=(RolloutState.PROGRESSING, RolloutState.WAITING_APPROVAL),
        new=RolloutState.PAUSED,
        verb="paused",
    )


def resume_rollout(cr, *, actor) -> Rollout:
    """Paused: go on. Halted: the failed wave's gates are checked again (fix the cause first)."""
    require_role(actor, Role.OPERATOR)
    rollout = _rollout_of(cr)
    with transaction.atomic():
        # locks in a batch's order: the rollout's row, its wave, the audit chain
        if _lock_rollout(rollout) == RolloutState.HALTED:
            failed = rollout.waves.filter(state=WaveState.FAILED).first()
            if failed is not None:
                RolloutWave.objects.filter(pk=failed.pk).update(
                    state=WaveState.BAKING if failed.applied_at else WaveState.APPLYING,
                    failed_gate="",
                    healthy_since=None,
                    applied_at=timezone.now() if failed.applied_at else None,
                    finished_at=None,
                )
        rollout = _operator_move(
            cr,
            actor=actor,
            expected=(RolloutState.PAUSED, RolloutState.HALTED),
            new=RolloutState.PROGRESSING,
            verb="resumed",
            halt_reason="",
        )
        enqueue.advance_rollout(rollout.pk)
    return rollout


def abort_rollout(cr, *, actor, reason: str = "") -> Rollout:
    """Stop for good: no further batch or wave; what was applied stays. The request ends
    PartiallyFailed (some clusters were updated) or Cancelled (none were)."""
    require_role(actor, Role.OPERATOR)
    rollout = _rollout_of(cr)
    with transaction.atomic():
        rollout = _operator_move(
            cr,
            actor=actor,
            expected=(
                RolloutState.PROGRESSING,
                RolloutState.PAUSED,
                RolloutState.WAITING_APPROVAL,
                RolloutState.HALTED,
            ),
            new=RolloutState.ABORTED,
            verb="aborted",
            finished_at=timezone.now(),
        )
        updated = _updated_clusters(list(rollout.waves.all()))  # read under the rollout's lock
        # the wave it stopped in is closed: it showed "Baking" with a clock that never stopped
        RolloutWave.objects.filter(rollout=rollout, state__in=(WaveState.APPLYING, WaveState.BAKING)).update(
            state=WaveState.ABORTED, finished_at=timezone.now()
        )
        final = ChangeState.PARTIALLY_FAILED if updated else ChangeState.CANCELLED
        ChangeRequest.objects.filter(pk=rollout.change_request_id, state=ChangeState.APPLYING).update(
            state=final,
            apply_error=f"Rollout aborted by {_name(actor)}" + (f": {reason}" if reason else ""),
            outcome=outcome_rows(rollout.change_request.runs.all()),
            finished_at=timezone.now(),
            updated_at=timezone.now(),
        )
    return rollout


def rollback_rollout(cr, *, actor, reason: str = "") -> ChangeRequest:
    """Operator: the halted (or paused) rollout's updated clusters get the previous revision back."""
    require_role(actor, Role.OPERATOR)
    rollout = _rollout_of(cr)
    return _roll_back(rollout, actor=actor, reason=reason or f"rolled back by {_name(actor)}")


# --- approval waves ---------------------------------------------------------------------------


def wave_approval_count(cr: ChangeRequest, wave: RolloutWave) -> tuple[int, int]:
    from federation.approvals.services import approvers_among, required_approvals_for

    required = required_approvals_for(Cluster.objects.filter(name__in=wave.clusters))
    # an approver removed from the role since no longer counts, as for the request's own approvals
    return len(approvers_among({a["user_id"] for a in wave.approvals})), required


def approve_wave(cr, *, actor, comment: str = "", wave_name: str | None = None) -> Rollout:
    """An approver lets the waiting wave start; the environment's count applies (env=prod needs
    FEDPORTAL_APPROVALS_PROD); whoever wrote the change cannot approve it. ``wave_name``: the wave
    the approver saw waiting (the page's form; the command's --wave); refused when another wave
    waits now (the one seen passed meanwhile)."""
    require_role(actor, Role.APPROVER)
    rollout = _rollout_of(cr)
    cr = ChangeRequest.objects.get(pk=rollout.change_request_id)
    if actor.pk in content_authors(cr):
        raise PermissionDenied("You wrote this change: another approver must approve its waves.")
    with transaction.atomic():
        locked = Rollout.objects.select_for_update().get(pk=rollout.pk)
        if locked.state != RolloutState.WAITING_APPROVAL:
            raise RolloutError(f"CR-{cr.pk}'s rollout is {locked.state}: no wave is waiting for approval.")
        wave = locked.waves.exclude(state=WaveState.PASSED).order_by("index").first()
        if wave_name is not None and wave_name != wave.name:
            raise RolloutError(
                f"Wave {wave_name} of CR-{cr.pk} is no longer waiting for approval; wave {wave.name} is. "
                "Review it before approving."
            )
        if any(a["user_id"] == actor.pk for a in wave.approvals):
            raise RolloutError(f"You already approved wave {wave.name} of CR-{cr.pk}.")
        approvals = [
            *wave.approvals,
            {"user_id": actor.pk, "username": _name(actor), "at": timezone.now().isoformat(), "comment": comment},
        ]
        RolloutWave.objects.filter(pk=wave.pk).update(approvals=approvals)
        wave.approvals = approvals
        valid, required = wave_approval_count(cr, wave)
        _audit(
            "wave_approve",
            cr,
            actor=actor,
            summary=f"{_name(actor)} approved wave {wave.name} of CR-{cr.pk} ({valid} of {required})",
            after={"wave": wave.name, "valid": valid, "required": required, "comment": comment},
        )
        if valid >= required:
            Rollout.objects.filter(pk=locked.pk, state=RolloutState.WAITING_APPROVAL).update(
                state=RolloutState.PROGRESSING, updated_at=timezone.now()
            )
            enqueue.advance_rollout(locked.pk)
    return Rollout.objects.get(pk=rollout.pk)


# --- status and the safety net ----------------------------------------------------------------


def rollout_status(cr) -> dict | None:
    rollout = Rollout.objects.filter(change_request_id=cr.pk if isinstance(cr, ChangeRequest) else cr).first()
    if rollout is None:
        return None
    now = timezone.now()
    shown = _secret_scrubber(rollout.change_request_id)
    waves = []
    for wave in rollout.waves.all():
        bake_left = None
        if wave.state == WaveState.BAKING and wave.healthy_since is not None:
            bake_left = max(0, round(wave.bake_seconds - (now - wave.healthy_since).total_seconds()))
        done = sum(
            1 for s in wave.cluster_states.values() if s in (C_APPLIED, C_HEALTHY, C_FAILED, C_ROLLED_BACK, C_EXCLUDED)
        )
        waves.append(
            {
                "name": wave.name,
                "state": wave.state,
                "clusters": dict(sorted(wave.cluster_states.items())),
                "failedGate": shown(wave.failed_gate) or None,
                "waiting": shown(wave.gate_message) or None,
                "maxParallel": wave.max_parallel,
                "bakeSeconds": wave.bake_seconds,
                "bakeRemaining": bake_left,
                "requireApproval": wave.require_approval,
                "approvals": [a["username"] for a in wave.approvals],
                "progress": round(100 * done / len(wave.clusters)) if wave.clusters else 100,
                "durationSeconds": round(((wave.finished_at or now) - wave.started_at).total_seconds())
                if wave.started_at
                else None,
                "startedAt": wave.started_at.isoformat() if wave.started_at else None,
                "finishedAt": wave.finished_at.isoformat() if wave.finished_at else None,
            }
        )
    rollbacks = list(
        ChangeRequest.objects.filter(rollback_of_id=rollout.change_request_id).values_list("pk", flat=True)
    )
    return {
        "changeRequest": rollout.change_request_id,
        "state": rollout.state,
        "autoRollback": rollout.auto_rollback,
        "haltReason": shown(rollout.halt_reason) or None,
        "rollbacks": rollbacks,
        "waves": waves,
    }


def waiting_wave(cr: ChangeRequest) -> RolloutWave | None:
    """The wave ``cr``'s rollout waits on for approval, None when it waits on none."""
    return (
        RolloutWave.objects.filter(rollout__change_request=cr, rollout__state=RolloutState.WAITING_APPROVAL)
        .exclude(state=WaveState.PASSED)
        .order_by("index")
        .first()
    )


def waiting_wave_name(status: dict | None) -> str:
    """The wave a rollout waits on for approval (``rollout_status``'s), "" when it waits on none."""
    if not status or status["state"] != RolloutState.WAITING_APPROVAL:
        return ""
    return next((wave["name"] for wave in status["waves"] if wave["state"] != WaveState.PASSED), "")


def _secret_scrubber(cr_id: int):
    """For a Secret's rollout: its gate texts quote member statuses, which rows written before API
    servers' refusals were scrubbed on write may hold a value in (``scrub_message``)."""
    cr = ChangeRequest.objects.select_related("resource__type", "proposed_revision", "base_revision").get(pk=cr_id)
    if cr.resource is None or not is_secret_kind(cr.resource.type.kind):
        return lambda text: text
    sources = [r.snapshot for r in (cr.proposed_revision, cr.base_revision) if r is not None]
    return lambda text: scrub_message(text, *sources) if text else text


def resume_stale_rollouts(*, stale_seconds: float = STALE_SECONDS) -> int:
    """Re-queue the advance of Progressing rollouts nobody moved for a while (a killed worker's), and
    roll back the Halted ones whose automatic rollback did not happen (the worker died, or the
    database failed, between the halt and the rollback, which are two transactions)."""
    cutoff = timezone.now() - timedelta(seconds=stale_seconds)
    ids = list(
        Rollout.objects.filter(state=RolloutState.PROGRESSING, updated_at__lt=cutoff)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=timezone.now()))
        .values_list("pk", flat=True)
    )
    for pk in ids:
        enqueue.advance_rollout(pk, on_commit=False)
    owed = Rollout.objects.filter(state=RolloutState.HALTED, auto_rollback=True, updated_at__lt=cutoff).exclude(
        change_request__rollbacks__isnull=False
    )
    for halted in owed:
        try:
            _roll_back(halted, actor=None, reason=f"automatic: {halted.halt_reason}")
        except RolloutError as exc:  # nothing to roll back to: it stays Halted, as after the halt
            logger.info("automatic rollback of CR-%s not possible: %s", halted.change_request_id, exc)
    return len(ids)


__all__ = [
    "RolloutError",
    "abort_rollout",
    "advance_rollout",
    "approve_wave",
    "effective_strategy",
    "is_staged",
    "pause_rollout",
    "planned_waves",
    "resume_rollout",
    "resume_stale_rollouts",
    "rollback_rollout",
    "rollout_status",
    "start_rollout",
]
