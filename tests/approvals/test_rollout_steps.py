"""How an advancing task moves a staged rollout, driven in this process against the fleet simulator:
waves in order within one advance when their gates pass at once, and a pause between two batches
of a wave stops the second one. (tests/approvals/test_rollout_integration.py drives the real worker.)"""

import threading
import time

import pytest
from django.db import connection

from clusters.choices import ClusterState
from clusters.models import Cluster
from federation import propagation
from federation import services as federation_services
from federation.approvals import rollout as rollouts
from federation.approvals import services
from federation.approvals.choices import ChangeState, RolloutState, WaveState
from federation.approvals.models import ChangeRequest, Rollout
from fedportal.models import AuditEvent
from tests.federation.factories import WEB_TEMPLATE, drain, federate_namespace, register_fleet, web_deployment
from tests.fleet_fixtures import DEFAULT_FLEET

pytestmark = pytest.mark.django_db

MEMBERS = ["m127", "m128", "m130", "m131"]
NEW_IMAGE = "registry.example/web:2.0"


@pytest.fixture
def ready_fleet(fleet_factory, settings):
    settings.FEDPORTAL_ROLLOUT_POLL_SECONDS = 0.05
    fleet = fleet_factory(DEFAULT_FLEET, rollout_seconds=0)  # Deployments available at once: gates pass
    register_fleet(fleet, MEMBERS)
    drain(propagation.propagate_revision(federate_namespace("shop", MEMBERS)))
    return fleet


def approved_change(operator, approvers, strategy) -> Rollout:
    """web everywhere at revision 1, then revision 2 (a new image) approved with ``strategy``."""
    resource = web_deployment(placement={"clusters": MEMBERS}, actor=operator)
    drain(propagation.propagate_revision(resource))
    federation_services.set_rollout_strategy(resource, strategy, actor=operator)
    containers = [{"name": "web", "image": NEW_IMAGE}]
    template = {**WEB_TEMPLATE, "spec": {**WEB_TEMPLATE["spec"], "template": {"spec": {"containers": containers}}}}
    template["spec"]["template"]["metadata"] = {"labels": {"app": "web"}}
    federation_services.update_resource(resource, template=template, placement={"clusters": MEMBERS}, actor=operator)
    resource.refresh_from_db()
    cr = services.submit(services.create_change_request(resource, actor=operator), actor=operator)
    for approver in approvers:
        cr = services.approve(cr, actor=approver)
    return Rollout.objects.get(change_request=cr)


def once_after(matches, action):
    """An execute wrapper calling ``action`` once, right after the first statement ``matches``; the
    list it returns holds True once it has."""
    done = []

    def wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not done and matches(sql):
            done.append(True)
            action()
        return result

    return wrapper, done


def image(fleet, cluster) -> str:
    return fleet.get_object(cluster, "apps/v1", "Deployment", "shop", "web")["spec"]["template"]["spec"]["containers"][
        0
    ]["image"]


def test_waves_whose_gates_pass_at_once_run_in_order_in_one_advance(ready_fleet, operator, approver, second_approver):
    strategy = {
        "autoRollback": False,
        "waves": [
            {"name": "first", "clusters": ["m128"], "maxParallel": 1},
            {"name": "second", "clusters": ["m131", "m127"], "maxParallel": "100%"},
        ],
    }
    rollout = approved_change(operator, [approver, second_approver], strategy)
    since = AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first()
    assert rollouts.advance_rollout(rollout.pk) == "done"
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.COMPLETED
    actions = [
        (action.removeprefix("approvals.rollout."), (after or {}).get("wave"))
        for action, after in AuditEvent.objects.filter(pk__gt=since, action__startswith="approvals.rollout.")
        .order_by("pk")
        .values_list("action", "after")
    ]
    # the implicit last wave holds m130, the placement's cluster no wave named
    assert actions == [
        (step, wave) for wave in ("first", "second", "rest") for step in ("wave_start", "wave_applied", "gate_passed")
    ] + [("complete", None)], actions
    waves = list(rollout.waves.order_by("index"))
    assert [w.state for w in waves] == [WaveState.PASSED] * 3
    # no bake time and gates healthy at the first check: Applying -> Passed, no Baking in between
    assert all(w.applied_at == w.finished_at == w.healthy_since for w in waves)
    for before, after in zip(waves, waves[1:]):
        assert before.finished_at <= after.started_at, "a wave starts once the one before has passed"
    assert all(w.cluster_states == {c: "Healthy" for c in w.clusters} for w in waves)
    assert {name: image(ready_fleet, name) for name in MEMBERS} == {name: NEW_IMAGE for name in MEMBERS}


def test_a_pause_while_a_batch_applies_stops_the_next_batch(ready_fleet, operator, approver, second_approver):
    strategy = {"autoRollback": False, "waves": [{"name": "all", "clusters": MEMBERS, "maxParallel": 2}]}
    rollout = approved_change(operator, [approver, second_approver], strategy)
    pause_once_the_first_batch_is_recorded, paused = once_after(
        lambda sql: sql.startswith('UPDATE "federation_propagationtarget"') and '"finished_at"' in sql,
        lambda: rollouts.pause_rollout(rollout.change_request, actor=operator),
    )
    with connection.execute_wrapper(pause_once_the_first_batch_is_recorded):
        rollouts.advance_rollout(rollout.pk)
    assert paused
    rollout.refresh_from_db()
    wave = rollout.waves.get()
    assert rollout.state == RolloutState.PAUSED
    assert wave.state == WaveState.APPLYING and wave.batch_count == 1
    first, rest = wave.clusters[:2], wave.clusters[2:]
    assert NEW_IMAGE not in {image(ready_fleet, name) for name in rest}  # no later batch started
    assert all(image(ready_fleet, name) == NEW_IMAGE for name in first)
    # the page and `fedctl rollout status` show the first batch applied, not still applying
    assert wave.cluster_states == {**{n: "Applied" for n in first}, **{n: "Pending" for n in rest}}
    rollouts.resume_rollout(rollout.change_request, actor=operator)
    assert rollouts.advance_rollout(rollout.pk) == "done"
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.COMPLETED
    assert {name: image(ready_fleet, name) for name in MEMBERS} == {name: NEW_IMAGE for name in MEMBERS}


def test_an_advance_past_its_time_starts_no_further_batch(ready_fleet, operator, approver, second_approver, settings):
    # a step checks the advancing task's deadline before each further batch and wave (a task past
    # its time limit would be stopped mid-batch); a wave's first batch always starts
    strategy = {"autoRollback": False, "waves": [{"name": "all", "clusters": MEMBERS, "maxParallel": 1}]}
    rollout = approved_change(operator, [approver, second_approver], strategy)
    lease = settings.FEDPORTAL_ROLLOUT_LEASE_SECONDS
    settings.FEDPORTAL_ROLLOUT_LEASE_SECONDS = 0.001  # the deadline is half the lease: passed at once
    rollouts.advance_rollout(rollout.pk)
    wave = rollout.waves.get()
    assert wave.state == WaveState.APPLYING and wave.batch_count == 1
    first = wave.clusters[0]
    assert wave.cluster_states == {n: "Applied" if n == first else "Pending" for n in wave.clusters}
    settings.FEDPORTAL_ROLLOUT_LEASE_SECONDS = lease
    assert rollouts.advance_rollout(rollout.pk) == "done"
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.COMPLETED and rollout.waves.get().batch_count == len(MEMBERS)


@pytest.mark.django_db(transaction=True)
def test_a_rollback_while_a_batch_starts_rolls_that_batch_back_too(
    ready_fleet, operator, approver, second_approver, monkeypatch
):
    # a batch's start locks the rollout's row before its wave's: a pause and rollback made while the
    # batch's run is being written wait for it, then roll its clusters back with the rest, and the
    # advancing task's later writes never overwrite the rolled-back wave
    monkeypatch.setattr(rollouts.enqueue, "advance_rollout", lambda *args, **kwargs: None)  # this test advances
    strategy = {"autoRollback": False, "waves": [{"name": "all", "clusters": MEMBERS, "maxParallel": 2}]}
    rollout = approved_change(operator, [approver, second_approver], strategy)
    errors, paused, operator_pid = [], threading.Event(), []
    since = AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first()

    def pause_and_roll_back():
        try:
            connection.ensure_connection()
            operator_pid.append(getattr(getattr(connection.connection, "info", None), "backend_pid", None))
            rollouts.pause_rollout(rollout.change_request, actor=operator)
            paused.set()
            rollouts.rollback_rollout(rollout.change_request, actor=operator, reason="test")
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    operator_thread = threading.Thread(target=pause_and_roll_back)

    def roll_back_while_the_batch_is_written(execute, sql, params, many, context):
        if operator_thread.is_alive() and not connection.in_atomic_block and not paused.is_set():
            # the batch's transaction committed: the pause goes first (SQLite's one writer at a
            # time would otherwise let this task start the next batch before it)
            paused.wait(timeout=10)
        result = execute(sql, params, many, context)
        if sql.startswith('INSERT INTO "federation_propagationrun"') and operator_thread.ident is None:
            operator_thread.start()
            wait_until_the_operator_waits_for_this_transaction()
        return result

    def wait_until_the_operator_waits_for_this_transaction():
        if connection.vendor != "postgresql":
            time.sleep(0.5)  # SQLite: one writer at a time, the operator's first write waits anyway
            return
        batch_pid = connection.connection.info.backend_pid
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with connection.connection.cursor() as cursor:  # psycopg's own: not through this wrapper
                if operator_pid:
                    cursor.execute("SELECT %s = ANY(pg_blocking_pids(%s))", [batch_pid, operator_pid[0]])
                    if cursor.fetchone()[0]:
                        return
            time.sleep(0.02)
        pytest.fail("the operator's pause and rollback never waited for the batch being written")

    with connection.execute_wrapper(roll_back_while_the_batch_is_written):
        rollouts.advance_rollout(rollout.pk)
    operator_thread.join(timeout=60)
    assert not errors, errors
    rollout.refresh_from_db()
    wave = rollout.waves.get()
    started, rest = wave.clusters[:2], wave.clusters[2:]  # the batch being written when the operator acted
    assert rollout.state == RolloutState.ROLLED_BACK
    assert wave.state == WaveState.ROLLED_BACK and wave.batch_count == 1
    assert wave.cluster_states == {**{n: "RolledBack" for n in started}, **{n: "Pending" for n in rest}}
    rollback = ChangeRequest.objects.get(rollback_of=rollout.change_request)
    assert rollback.target_clusters == sorted(started)
    # the pause took effect after the batch was written (it waited for the rollout's lock)
    actions = list(AuditEvent.objects.filter(pk__gt=since).order_by("pk").values_list("action", flat=True))
    assert actions.index("federation.resource.propagate") < actions.index("approvals.rollout.paused"), actions


def test_a_refused_operator_action_names_the_state_it_found(ready_fleet, operator, approver, second_approver):
    # the rollout completes between the action's read of it and its compare-and-set: the refusal
    # reads the state again rather than naming the one the action read (Progressing)
    strategy = {"autoRollback": False, "waves": [{"name": "all", "clusters": MEMBERS, "maxParallel": 2}]}
    rollout = approved_change(operator, [approver, second_approver], strategy)
    moving = []

    def complete_just_before_the_move(execute, sql, params, many, context):
        if sql.startswith('UPDATE "approvals_rollout"') and not moving:
            moving.append(True)
            Rollout.objects.filter(pk=rollout.pk).update(state=RolloutState.COMPLETED)
        return execute(sql, params, many, context)

    for action in (rollouts.pause_rollout, rollouts.resume_rollout, rollouts.rollback_rollout):
        Rollout.objects.filter(pk=rollout.pk).update(state=RolloutState.PROGRESSING)
        moving.clear()
        with connection.execute_wrapper(complete_just_before_the_move):
            with pytest.raises(rollouts.RolloutError, match="rollout is Completed"):
                action(rollout.change_request, actor=operator)
        assert moving, action
    # a refused action writes nothing (the completion made inside its transaction went with it)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.PROGRESSING
    assert not ChangeRequest.objects.filter(rollback_of=rollout.change_request).exists()
    assert not AuditEvent.objects.filter(action__in=("approvals.rollout.paused", "approvals.rollout.resumed")).exists()


@pytest.mark.parametrize("max_failures, outcome", [(0, RolloutState.HALTED), (1, RolloutState.COMPLETED)])
def test_a_wave_allows_max_failures_failed_gates_whatever_its_deadline(
    ready_fleet, operator, approver, second_approver, max_failures, outcome
):
    # m130 fails its cluster-ready gate; the others are healthy at once and bake 2 s, past the wave's
    # 1 s progress deadline: a failure maxFailures allows is not "late", the wave passes after its bake
    strategy = {
        "autoRollback": False,
        "waves": [
            {
                "name": "all",
                "clusters": MEMBERS,
                "maxParallel": "100%",
                "maxFailures": max_failures,
                "bakeSeconds": 2,
                "progressDeadlineSeconds": 1,
            }
        ],
    }
    rollout = approved_change(operator, [approver, second_approver], strategy)
    Cluster.objects.filter(name="m130").update(state=ClusterState.NOT_READY)
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    wave = rollout.waves.get()
    assert rollout.state == outcome, (rollout.halt_reason, wave.failed_gate)
    assert wave.cluster_states["m130"] == "Failed"
    if outcome == RolloutState.HALTED:
        assert wave.state == WaveState.FAILED and wave.failed_gate.startswith("cluster-ready: m130 is NotReady")
    else:
        assert wave.state == WaveState.PASSED and wave.finished_at >= wave.applied_at
        assert {n for n, s in wave.cluster_states.items() if s == "Healthy"} == set(MEMBERS) - {"m130"}


def test_a_step_that_read_the_rollout_before_an_abort_moves_no_wave(ready_fleet, operator, approver, second_approver):
    # the abort commits between the step's read of the rollout and its first wave's move: a wave is
    # moved only while the rollout still progresses, so nothing starts after the abort
    strategy = {"autoRollback": False, "waves": [{"name": "all", "clusters": MEMBERS, "maxParallel": 2}]}
    rollout = approved_change(operator, [approver, second_approver], strategy)
    abort_once_the_step_has_read_its_waves, aborted = once_after(
        lambda sql: sql.startswith("SELECT") and 'FROM "approvals_rolloutwave"' in sql,
        lambda: rollouts.abort_rollout(rollout.change_request, actor=operator, reason="test"),
    )
    with connection.execute_wrapper(abort_once_the_step_has_read_its_waves):
        assert rollouts.advance_rollout(rollout.pk) == "done"
    assert aborted
    rollout.refresh_from_db()
    wave = rollout.waves.get()
    assert rollout.state == RolloutState.ABORTED
    assert wave.state == WaveState.PENDING and wave.batch_count == 0
    assert not AuditEvent.objects.filter(action="approvals.rollout.wave_start").exists()
    assert NEW_IMAGE not in {image(ready_fleet, name) for name in MEMBERS}  # no cluster got the change


def test_no_resync_gets_ahead_of_a_rollout_waiting_for_a_waves_approval(
    ready_fleet, operator, approver, second_approver
):
    """Re-sync repeats what was approved for a cluster: the clusters of a wave waiting for its
    approval get revision 1 back, not revision 2, whether an operator re-syncs them or the periodic
    sweep finds them Ready again; "re-sync all failed" leaves them to that; the resource's
    propagated revision stays 2."""
    from federation.choices import PropagationReason
    from federation.models import PropagatedVersion

    strategy = {
        "autoRollback": False,
        "waves": [
            {"name": "canary", "clusters": ["m128"]},
            {"name": "prod", "clusters": ["m131", "m127", "m130"], "requireApproval": True},
        ],
    }
    rollout = approved_change(operator, [approver, second_approver], strategy)
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.WAITING_APPROVAL
    resource = rollout.change_request.resource
    first, second = rollout.change_request.base_revision, rollout.change_request.proposed_revision
    prod = Cluster.objects.get(name="m131")
    old_image = image(ready_fleet, "m131")

    run = propagation.resync_cluster(resource, prod, actor=operator)
    assert run.revision == first
    drain(run)
    PropagatedVersion.objects.filter(resource=resource, cluster=prod).update(status=PropagationReason.UPDATE_FAILED)
    assert propagation.resync_failed(resource, actor=operator) is None
    PropagatedVersion.objects.filter(resource=resource, cluster=prod).update(status=PropagationReason.CLUSTER_NOT_READY)
    assert propagation.reconcile_waiting_clusters() == 1
    drain(resource.runs.order_by("-pk").first())
    assert run.revision == first and resource.runs.order_by("-pk").first().revision == first
    assert {image(ready_fleet, name) for name in ("m131", "m127", "m130")} == {old_image} != {NEW_IMAGE}
    resource.refresh_from_db()
    assert resource.propagated_revision == second

    # the canary got revision 2 from the rollout: re-syncing it repeats that
    run = propagation.resync_cluster(resource, Cluster.objects.get(name="m128"), actor=operator)
    assert run.revision == second
    drain(run)
    assert image(ready_fleet, "m128") == NEW_IMAGE


def test_an_earlier_revisions_author_cannot_approve_a_wave(ready_fleet, operator, approver, second_approver, make_user):
    """Once the first wave has gone out, the clusters' revision is the proposed one: who wrote the
    revisions it was built on must still not count as a wave's approver."""
    from django.core.exceptions import PermissionDenied

    from fedportal.roles import Role

    bob = make_user("bob-both", Role.OPERATOR, Role.APPROVER)
    strategy = {
        "autoRollback": False,
        "waves": [
            {"name": "canary", "clusters": ["m128"]},
            {"name": "prod", "clusters": ["m131", "m127", "m130"], "requireApproval": True},
        ],
    }
    resource = web_deployment(placement={"clusters": MEMBERS}, actor=operator)
    drain(propagation.propagate_revision(resource))
    federation_services.set_rollout_strategy(resource, strategy, actor=operator)
    pod = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": NEW_IMAGE}]}}
    template = {**WEB_TEMPLATE, "spec": {**WEB_TEMPLATE["spec"], "template": pod}}
    federation_services.update_resource(resource, template=template, placement={"clusters": MEMBERS}, actor=bob)
    resource.refresh_from_db()
    federation_services.update_resource(
        resource,
        template={**template, "metadata": {"labels": {"team": "shop"}}},
        placement={"clusters": MEMBERS},
        actor=operator,
    )
    resource.refresh_from_db()
    cr = services.submit(services.create_change_request(resource, actor=operator), actor=operator)
    assert bob.pk in services.content_authors(cr)
    for one in (approver, second_approver):
        cr = services.approve(cr, actor=one)
    rollout = Rollout.objects.get(change_request=cr)
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.WAITING_APPROVAL
    with pytest.raises(PermissionDenied):
        rollouts.approve_wave(cr, actor=bob)


# --- after a review: a rollout owns its resource until it is finished ------------------------------------


def image_template(name: str) -> dict:
    pod = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": name}]}}
    return {**WEB_TEMPLATE, "spec": {**WEB_TEMPLATE["spec"], "template": pod}}


def drafted(resource, operator, image_name: str, strategy=None, placement=MEMBERS) -> ChangeRequest:
    federation_services.update_resource(
        resource, template=image_template(image_name), placement={"clusters": list(placement)}, actor=operator
    )
    resource.refresh_from_db()
    return services.create_change_request(resource, actor=operator, rollout_strategy=strategy)


def approved(cr, operator, approvers) -> ChangeRequest:
    cr = services.submit(cr, actor=operator)
    for approver in approvers:
        cr = services.approve(cr, actor=approver)
    return cr


CANARY_THEN_PROD = {
    "autoRollback": False,
    "waves": [
        {"name": "canary", "clusters": ["m128"]},
        {"name": "prod", "clusters": ["m127", "m130", "m131"], "requireApproval": True},
    ],
}


def test_no_other_change_is_applied_while_a_rollout_of_its_resource_is_unfinished(
    ready_fleet, operator, approver, second_approver, admin_user
):
    """Its later waves would overwrite that change with the rollout's revision (or a rollback undo it)."""
    resource = web_deployment(placement={"clusters": MEMBERS}, actor=operator)
    drain(propagation.propagate_revision(resource))
    before = image(ready_fleet, "m131")
    federation_services.set_rollout_strategy(resource, CANARY_THEN_PROD, actor=operator)
    resource.refresh_from_db()
    staged = approved(drafted(resource, operator, "web:A"), operator, [approver, second_approver])
    rollout = Rollout.objects.get(change_request=staged)
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.WAITING_APPROVAL and image(ready_fleet, "m128") == "web:A"
    newer = services.submit(drafted(resource, operator, "web:B", strategy={}), actor=operator)
    services.approve(newer, actor=approver)
    with pytest.raises(services.TransitionError, match=f"CR-{staged.pk} is rolling out"):
        services.approve(newer, actor=second_approver)
    assert ChangeRequest.objects.get(pk=newer.pk).state == "Approved", "the approval was lost"
    with pytest.raises(services.TransitionError, match="rolling out"):
        services.emergency_apply(resource, actor=admin_user, reason="hotfix")
    assert {n: image(ready_fleet, n) for n in MEMBERS} == {**dict.fromkeys(MEMBERS, before), "m128": "web:A"}
    rollouts.abort_rollout(staged, actor=operator, reason="superseded")
    applied = services.apply_change_request(ChangeRequest.objects.get(pk=newer.pk), actor=operator)
    drain(applied.runs.first())
    assert {image(ready_fleet, n) for n in MEMBERS} == {"web:B"}


def test_a_rollback_restores_what_each_cluster_had_when_the_rollout_started(
    ready_fleet, operator, approver, second_approver
):
    """Not the request's base revision: both requests were drafted on revision 1, the other applied
    first, so the clusters held its revision when this one started."""
    resource = web_deployment(placement={"clusters": MEMBERS}, actor=operator)
    drain(propagation.propagate_revision(resource))
    other = drafted(resource, operator, "web:B", strategy={})
    federation_services.set_rollout_strategy(resource, CANARY_THEN_PROD, actor=operator)
    resource.refresh_from_db()
    staged = drafted(resource, operator, "web:A")
    assert other.base_revision == staged.base_revision
    drain(approved(other, operator, [approver, second_approver]).runs.first())
    staged = approved(staged, operator, [approver, second_approver])
    rollouts.advance_rollout(Rollout.objects.get(change_request=staged).pk)
    assert image(ready_fleet, "m128") == "web:A"
    rollback = rollouts.rollback_rollout(staged, actor=operator, reason="canary looks wrong")
    assert rollback.proposed_revision_id == other.proposed_revision_id, "the request names another revision"
    for run in rollback.runs.all():
        drain(run)
    assert {image(ready_fleet, n) for n in MEMBERS} == {"web:B"}, "the rollback undid the other approved change"


def test_a_staged_change_that_shrinks_the_placement_passes_its_gate_once_removed(
    ready_fleet, operator, approver, second_approver
):
    resource = web_deployment(placement={"clusters": MEMBERS}, actor=operator)
    drain(propagation.propagate_revision(resource))
    strategy = {"autoRollback": True, "waves": [{"name": "all", "clusters": MEMBERS, "maxParallel": "100%"}]}
    federation_services.set_rollout_strategy(resource, strategy, actor=operator)
    resource.refresh_from_db()
    cr = approved(drafted(resource, operator, "web:A", placement=MEMBERS[:3]), operator, [approver, second_approver])
    rollout = Rollout.objects.get(change_request=cr)
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.COMPLETED, rollout.halt_reason
    assert ready_fleet.get_object(MEMBERS[3], "apps/v1", "Deployment", "shop", "web") is None
    assert {image(ready_fleet, n) for n in MEMBERS[:3]} == {"web:A"}


def test_an_automatic_rollback_owed_by_a_halt_is_made_by_the_sweep(ready_fleet, operator, approver, second_approver):
    """The halt and its automatic rollback are two transactions: a worker that died (or a database
    that failed) between them left the rollout Halted with the new revision on its clusters."""
    resource = web_deployment(placement={"clusters": MEMBERS}, actor=operator)
    drain(propagation.propagate_revision(resource))
    before = image(ready_fleet, "m128")
    federation_services.set_rollout_strategy(resource, {**CANARY_THEN_PROD, "autoRollback": True}, actor=operator)
    resource.refresh_from_db()
    staged = approved(drafted(resource, operator, "web:A"), operator, [approver, second_approver])
    rollout = Rollout.objects.get(change_request=staged)
    rollouts.advance_rollout(rollout.pk)
    assert image(ready_fleet, "m128") == "web:A"
    # halted, its rollback never made (as a worker killed right after the halt's commit leaves it)
    Rollout.objects.filter(pk=rollout.pk).update(state=RolloutState.HALTED, halt_reason="gate failed on m128")
    assert rollouts.resume_stale_rollouts(stale_seconds=0) == 0
    rollback = ChangeRequest.objects.get(rollback_of=staged)
    for run in rollback.runs.all():
        drain(run)
    assert image(ready_fleet, "m128") == before
    assert Rollout.objects.get(pk=rollout.pk).state == RolloutState.ROLLED_BACK
    rollouts.resume_stale_rollouts(stale_seconds=0)
    assert ChangeRequest.objects.filter(rollback_of=staged).count() == 1, "rolled back twice"


def test_a_rollout_halted_by_a_failed_apply_resumes_once_the_failed_clusters_were_re_synced(
    ready_fleet, operator, approver, second_approver, monkeypatch
):
    """Resume re-checks the wave: a cluster whose apply failed counts as applied once a re-sync of
    the failed clusters applied the same revision there (before, it halted again at once, forever)."""
    from federation.choices import PropagationReason
    from federation.propagation import worker
    from federation.propagation.network import FAILED, Step, StepFailure

    real = worker.network_step

    def refused_on_m130(run, target, pv):
        if target.cluster.name == "m130":
            return Step(target.cluster, pv, FAILED, failure=StepFailure(PropagationReason.UPDATE_FAILED, "denied"))
        return real(run, target, pv)

    resource = web_deployment(placement={"clusters": MEMBERS}, actor=operator)
    drain(propagation.propagate_revision(resource))
    strategy = {"autoRollback": False, "waves": [{"name": "all", "clusters": MEMBERS, "maxParallel": "100%"}]}
    federation_services.set_rollout_strategy(resource, strategy, actor=operator)
    resource.refresh_from_db()
    cr = approved(drafted(resource, operator, "web:A"), operator, [approver, second_approver])
    rollout = Rollout.objects.get(change_request=cr)
    monkeypatch.setattr(worker, "network_step", refused_on_m130)
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.HALTED and "m130" in rollout.halt_reason
    rollouts.resume_rollout(cr, actor=operator)  # not fixed yet: halts again
    rollouts.advance_rollout(rollout.pk)
    assert Rollout.objects.get(pk=rollout.pk).state == RolloutState.HALTED
    monkeypatch.setattr(worker, "network_step", real)  # the cause fixed
    drain(propagation.resync_failed(resource, actor=operator))
    assert image(ready_fleet, "m130") == "web:A"
    rollouts.resume_rollout(cr, actor=operator)
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.COMPLETED, rollout.halt_reason


# --- a cluster that joins the placement while a rollout owns the resource ---------------------------

WEB_TIER = {"clusterSelector": {"matchLabels": {"tier": "web"}}}


def _label_web(*names):
    for cluster in Cluster.objects.filter(name__in=names):
        cluster.labels = {**cluster.labels, "tier": "web"}
        cluster.save()


def _web_tier_edited_to_web2(operator):
    """web on m127, m128, m130 (tier=web) at nginx:1.25, with a canary wave (m128) and a prod wave
    needing approval; revision 2 (web:2) written, not yet requested."""
    _label_web("m127", "m128", "m130")
    resource = web_deployment(placement=WEB_TIER, actor=operator)
    drain(propagation.propagate_revision(resource))
    strategy = {
        "autoRollback": True,
        "waves": [
            {"name": "canary", "clusters": ["m128"]},
            {"name": "prod", "clusterSelector": {"matchLabels": {"tier": "web"}}, "requireApproval": True},
        ],
    }
    federation_services.set_rollout_strategy(resource, strategy, actor=operator)
    resource.refresh_from_db()
    federation_services.update_resource(resource, template=image_template("web:2"), placement=WEB_TIER, actor=operator)
    resource.refresh_from_db()
    return resource


def _staged_to_web_tier(fleet, operator, approvers):
    """``_web_tier_edited_to_web2``, its revision 2 approved: the rollout waits at prod."""
    resource = _web_tier_edited_to_web2(operator)
    cr = approved(services.create_change_request(resource, actor=operator), operator, approvers)
    rollout = Rollout.objects.get(change_request=cr)
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.WAITING_APPROVAL
    assert image(fleet, "m128") == "web:2" and image(fleet, "m127") == "nginx:1.25"
    return resource, cr, rollout


@pytest.fixture
def queued_reconciles(monkeypatch):
    """The resource ids whose membership reconcile a rollout's end queued."""
    from federation import enqueue

    queued = []
    monkeypatch.setattr(enqueue, "reconcile_resource_membership", queued.append)
    return queued


def test_a_cluster_joining_mid_rollout_waits_and_gets_what_a_rollback_restores(
    ready_fleet, operator, approver, second_approver, queued_reconciles
):
    from federation.membership import reconcile_cluster_membership, reconcile_resource_membership

    resource, cr, rollout = _staged_to_web_tier(ready_fleet, operator, [approver, second_approver])
    _label_web("m131")
    assert reconcile_cluster_membership(Cluster.objects.get(name="m131"), reason="labels changed") == []
    assert ready_fleet.get_object("m131", "apps/v1", "Deployment", "shop", "web") is None  # not ahead of the waves
    deferred = AuditEvent.objects.filter(action="federation.resource.membership", cluster="m131").get()
    assert f"waits for CR-{cr.pk}'s staged rollout to end" in deferred.summary
    assert reconcile_resource_membership(resource.pk) == []  # still rolling out: nothing yet

    rollback = rollouts.rollback_rollout(cr, actor=operator, reason="canary looks wrong")
    for run in rollback.runs.all():
        drain(run)
    assert queued_reconciles == [resource.pk]
    runs = reconcile_resource_membership(resource.pk)  # what the rollback queued
    assert len(runs) == 1
    drain(runs[0])
    assert {name: image(ready_fleet, name) for name in MEMBERS} == dict.fromkeys(MEMBERS, "nginx:1.25")


def test_a_cluster_joining_mid_rollout_gets_the_new_revision_once_the_rollout_completes(
    ready_fleet, operator, approver, second_approver, queued_reconciles
):
    from federation.membership import reconcile_cluster_membership, reconcile_resource_membership

    resource, cr, rollout = _staged_to_web_tier(ready_fleet, operator, [approver, second_approver])
    _label_web("m131")
    assert reconcile_cluster_membership(Cluster.objects.get(name="m131"), reason="labels changed") == []
    rollouts.approve_wave(cr, actor=approver, wave_name="prod")
    rollouts.approve_wave(cr, actor=second_approver, wave_name="prod")
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.COMPLETED, rollout.halt_reason
    assert ready_fleet.get_object("m131", "apps/v1", "Deployment", "shop", "web") is None
    assert queued_reconciles == [resource.pk]
    runs = reconcile_resource_membership(resource.pk)  # what completing queued
    drain(runs[0])
    assert {name: image(ready_fleet, name) for name in MEMBERS} == dict.fromkeys(MEMBERS, "web:2")
    assert reconcile_resource_membership(resource.pk) == []  # once is enough


def _widening_canary_on_m131(fleet, operator, approvers):
    """web on m127, m128, m130 with retention Orphan; a change (web:BAD) that adds m131, approved and
    rolled out to its canary wave (m131) only: the prod wave waits for approval."""
    from federation.choices import Retention
    from federation.models import FederatedResource

    resource = web_deployment(placement={"clusters": MEMBERS[:3]}, actor=operator)
    drain(propagation.propagate_revision(resource))
    FederatedResource.objects.filter(pk=resource.pk).update(
        retention=Retention.ORPHAN, approved_retention=Retention.ORPHAN
    )
    strategy = {
        "waves": [
            {"name": "canary", "clusters": ["m131"]},
            {"name": "prod", "clusters": MEMBERS, "requireApproval": True},
        ]
    }
    federation_services.set_rollout_strategy(resource, strategy, actor=operator)
    resource.refresh_from_db()
    cr = approved(drafted(resource, operator, "web:BAD"), operator, approvers)
    rollout = Rollout.objects.get(change_request=cr)
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.WAITING_APPROVAL, rollout.halt_reason
    assert image(fleet, "m131") == "web:BAD"
    return cr


def test_rolling_back_a_wider_placement_deletes_what_it_created_even_with_retention_orphan(
    ready_fleet, operator, approver, second_approver
):
    """Retention Orphan keeps an object on a cluster that leaves the placement; a rollback of the change
    that put it there in the first place takes it back (it was not there before the rollout)."""
    cr = _widening_canary_on_m131(ready_fleet, operator, [approver, second_approver])
    rollback = rollouts.rollback_rollout(cr, actor=operator, reason="bad image")
    for run in rollback.runs.all():
        drain(run)
    assert ready_fleet.get_object("m131", "apps/v1", "Deployment", "shop", "web") is None
    assert [(t.cluster.name, t.action) for run in rollback.runs.all() for t in run.targets.all()] == [
        ("m131", "delete")
    ]
    assert {name: image(ready_fleet, name) for name in MEMBERS[:3]} == dict.fromkeys(MEMBERS[:3], "nginx:1.25")


@pytest.mark.parametrize("how", ["unjoined", "isolated"])
def test_a_cluster_unjoined_or_isolated_mid_rollout_is_excluded_not_a_failed_gate(
    ready_fleet, operator, approver, second_approver, admin_user, how
):
    """An admin's action on one cluster of a later wave does not halt (and auto-roll back) a healthy
    change everywhere: the cluster is excluded from the gate (an isolated one is held back and gets
    the revision when restored)."""
    from clusters.services import unjoin_cluster

    resource = web_deployment(placement={"clusters": MEMBERS}, actor=operator)
    drain(propagation.propagate_revision(resource))
    strategy = {
        "autoRollback": True,
        "waves": [
            {"name": "canary", "clusters": ["m128"]},
            {"name": "prod", "clusters": ["m127", "m130"], "requireApproval": True},
            {"name": "last", "clusters": ["m131"]},
        ],
    }
    federation_services.set_rollout_strategy(resource, strategy, actor=operator)
    resource.refresh_from_db()
    cr = approved(drafted(resource, operator, "web:2"), operator, [approver, second_approver])
    rollout = Rollout.objects.get(change_request=cr)
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.WAITING_APPROVAL
    if how == "unjoined":
        unjoin_cluster(Cluster.objects.get(name="m131"), actor=admin_user)
    else:
        Cluster.objects.filter(name="m131").update(isolated=True, isolated_reason="incident")
    rollouts.approve_wave(cr, actor=approver, wave_name="prod")
    rollouts.approve_wave(cr, actor=second_approver, wave_name="prod")
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.COMPLETED, rollout.halt_reason
    assert {name: image(ready_fleet, name) for name in ("m127", "m128", "m130")} == dict.fromkeys(
        ("m127", "m128", "m130"), "web:2"
    )
    assert image(ready_fleet, "m131") == "nginx:1.25"  # unjoined: left alone; isolated: held back
    states = {wave.name: wave.cluster_states for wave in rollout.waves.all()}
    assert states["last"] == {"m131": "Excluded"}
    assert ChangeRequest.objects.get(pk=cr.pk).state == ChangeState.APPLIED


def test_a_wave_whose_every_cluster_is_excluded_halts_rather_than_vouching_for_the_change(
    ready_fleet, operator, approver, second_approver
):
    """An isolated canary is no signal: the rollout halts there (and, with autoRollback, rolls back)
    instead of passing the canary with nothing checked and sending the change to prod."""
    resource = web_deployment(placement={"clusters": MEMBERS}, actor=operator)
    drain(propagation.propagate_revision(resource))
    strategy = {
        "autoRollback": True,
        "waves": [{"name": "canary", "clusters": ["m128"]}, {"name": "prod", "clusters": ["m127", "m130", "m131"]}],
    }
    federation_services.set_rollout_strategy(resource, strategy, actor=operator)
    resource.refresh_from_db()
    Cluster.objects.filter(name="m128").update(isolated=True, isolated_reason="incident")
    cr = approved(drafted(resource, operator, "web:BAD"), operator, [approver, second_approver])
    rollout = Rollout.objects.get(change_request=cr)
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.ROLLED_BACK
    assert "no cluster of the wave could be checked: m128 is isolated" in rollout.halt_reason
    assert {name: image(ready_fleet, name) for name in MEMBERS} == dict.fromkeys(MEMBERS, "nginx:1.25")
    # it never had the revision: still Excluded, not "RolledBack" (a reviewer's finding)
    assert rollout.waves.get(name="canary").cluster_states == {"m128": "Excluded"}


def test_an_abort_closes_the_wave_it_stopped_in(ready_fleet, operator, approver, second_approver):
    """The wave an abort stopped in showed "Baking" with a clock that kept counting."""
    strategy = {
        "waves": [
            {"name": "canary", "clusters": ["m128"], "bakeSeconds": 3600},
            {"name": "others", "clusters": ["m127", "m130", "m131"]},
        ]
    }
    rollout = approved_change(operator, [approver, second_approver], strategy)
    rollouts.advance_rollout(rollout.pk)
    assert rollout.waves.get(name="canary").state == WaveState.BAKING
    rollouts.abort_rollout(rollout.change_request, actor=operator, reason="test")
    canary = rollout.waves.get(name="canary")
    assert canary.state == WaveState.ABORTED and canary.finished_at is not None
    assert rollout.waves.get(name="others").state == WaveState.PENDING
    [shown, _] = rollouts.rollout_status(rollout.change_request)["waves"]
    assert shown["state"] == "Aborted" and shown["bakeRemaining"] is None


def test_a_rollback_never_deletes_an_object_that_was_there_before_the_change(
    ready_fleet, operator, approver, second_approver
):
    """Retention Orphan: m131 left the placement earlier and its object was left running; a staged
    change takes m131 back; rolling that change back removes it per the retention (orphans), never
    deleting what predates the change."""
    from federation.choices import Retention
    from federation.models import FederatedResource

    resource = web_deployment(placement={"clusters": MEMBERS}, actor=operator)
    drain(propagation.propagate_revision(resource))
    FederatedResource.objects.filter(pk=resource.pk).update(
        retention=Retention.ORPHAN, approved_retention=Retention.ORPHAN
    )
    resource.refresh_from_db()
    first = approved(
        drafted(resource, operator, "nginx:1.25", placement=MEMBERS[:3]), operator, [approver, second_approver]
    )
    for run in first.runs.all():
        drain(run)
    assert ready_fleet.get_object("m131", "apps/v1", "Deployment", "shop", "web") is not None  # orphaned, running
    strategy = {
        "waves": [
            {"name": "canary", "clusters": ["m131"]},
            {"name": "prod", "clusters": MEMBERS, "requireApproval": True},
        ]
    }
    federation_services.set_rollout_strategy(resource, strategy, actor=operator)
    resource.refresh_from_db()
    cr = approved(drafted(resource, operator, "web:2"), operator, [approver, second_approver])
    rollout = Rollout.objects.get(change_request=cr)
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.previous_revisions["m131"] is None  # held an object no approved revision accounts for
    rollback = rollouts.rollback_rollout(cr, actor=operator, reason="bad")
    for run in rollback.runs.all():
        drain(run)
    assert [(t.cluster.name, t.action) for run in rollback.runs.all() for t in run.targets.all()] == [
        ("m131", "orphan")
    ]
    assert ready_fleet.get_object("m131", "apps/v1", "Deployment", "shop", "web") is not None


def test_a_rollbacks_delete_held_back_by_isolation_is_made_as_a_delete_once_restored(
    ready_fleet, operator, approver, second_approver
):
    """The rollback owes m131 a Delete (the change created the object there); m131 is isolated, so the
    worker holds it back; once restored, the reconcile sweep repeats the Delete, not an Orphan per
    the retention, which would leave the rolled-back revision running."""
    from federation.models import PropagationRun, PropagationTarget
    from federation.propagation.sweep import reconcile_waiting_clusters

    cr = _widening_canary_on_m131(ready_fleet, operator, [approver, second_approver])
    Cluster.objects.filter(name="m131").update(isolated=True, isolated_reason="incident")
    rollback = rollouts.rollback_rollout(cr, actor=operator, reason="bad image")
    for run in rollback.runs.all():
        drain(run)
    assert ready_fleet.get_object("m131", "apps/v1", "Deployment", "shop", "web") is not None  # held back
    Cluster.objects.filter(name="m131").update(isolated=False, isolated_reason="")
    reconcile_waiting_clusters()
    for run in PropagationRun.objects.filter(finished_at__isnull=True):
        drain(run)
    newest = PropagationTarget.objects.filter(cluster__name="m131").order_by("-run_id").first()
    assert newest.action == "delete"
    assert ready_fleet.get_object("m131", "apps/v1", "Deployment", "shop", "web") is None


@pytest.mark.django_db(transaction=True)
def test_a_cluster_joining_while_a_rollout_starts_waits_for_that_rollout(
    ready_fleet, operator, approver, second_approver, monkeypatch, queued_reconciles
):
    """The membership reconcile and a rollout's start both hold the resource's row: a reconcile made
    while the rollout is being started (its row written, not yet committed) waits for it and defers to
    it, where it read "no rollout" and applied the old revision to the joiner as the newest run, which
    the rollout's own wave would then have recorded as superseded."""
    from federation.membership import reconcile_cluster_membership
    from federation.models import PropagationRun

    monkeypatch.setattr(rollouts.enqueue, "advance_rollout", lambda *args, **kwargs: None)
    resource = _web_tier_edited_to_web2(operator)
    cr = services.approve(
        services.submit(services.create_change_request(resource, actor=operator), actor=operator), actor=approver
    )
    _label_web("m131")  # joins the placement; its reconcile runs while the last approval starts the rollout
    runs_before = set(PropagationRun.objects.filter(resource=resource).values_list("pk", flat=True))
    starting, outcome, errors = threading.Event(), [], []

    def reconcile_the_joiner():
        try:
            assert starting.wait(timeout=30)
            outcome.extend(reconcile_cluster_membership(Cluster.objects.get(name="m131"), reason="labels changed"))
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    joiner = threading.Thread(target=reconcile_the_joiner)
    joiner.start()

    def hold_the_rollouts_start(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.startswith('INSERT INTO "approvals_rollout"') and not starting.is_set():
            starting.set()
            time.sleep(1.0)  # the reconcile reads and decides meanwhile
        return result

    try:
        with connection.execute_wrapper(hold_the_rollouts_start):
            cr = services.approve(cr, actor=second_approver)
    finally:
        starting.set()
        joiner.join(timeout=60)
    assert not errors, errors
    assert Rollout.objects.filter(change_request=cr).exists()
    assert outcome == []  # deferred to the rollout, which plans m131 in its prod wave
    deferred = AuditEvent.objects.filter(action="federation.resource.membership", cluster="m131").get()
    assert f"waits for CR-{cr.pk}'s staged rollout to end" in deferred.summary
    resyncs = PropagationRun.objects.filter(resource=resource).exclude(pk__in=runs_before)
    assert not resyncs.filter(targets__cluster__name="m131", trigger="resync").exists()


def test_a_cluster_joining_after_an_abort_waits_for_the_next_change(
    ready_fleet, operator, approver, second_approver, queued_reconciles
):
    """The aborted rollout's revision (web:2) stopped at its canary: a cluster joining the placement
    after the abort got it all the same (the resource's propagated revision is the aborted one),
    while one that joined during the rollout waited for the next change. Both wait now; the next
    change, sent to the whole placement, reaches it."""
    from federation.membership import reconcile_cluster_membership

    resource, cr, rollout = _staged_to_web_tier(ready_fleet, operator, [approver, second_approver])
    rollouts.abort_rollout(cr, actor=operator, reason="canary looks wrong")
    m127 = Cluster.objects.get(name="m127")
    m127.labels = {k: v for k, v in m127.labels.items() if k != "tier"}  # it leaves the placement
    m127.save()
    _label_web("m131")
    assert reconcile_cluster_membership(Cluster.objects.get(name="m131"), reason="labels changed") == []
    assert ready_fleet.get_object("m131", "apps/v1", "Deployment", "shop", "web") is None
    deferred = AuditEvent.objects.filter(action="federation.resource.membership", cluster="m131").get()
    assert "waits for its next change (its newest staged rollout was aborted)" in deferred.summary

    federation_services.update_resource(resource, template=image_template("web:3"), placement=WEB_TIER, actor=operator)
    resource.refresh_from_db()
    later = approved(
        services.create_change_request(resource, actor=operator, rollout_strategy={}),
        operator,
        [approver, second_approver],
    )
    for run in later.runs.all():
        drain(run)
    assert {name: image(ready_fleet, name) for name in MEMBERS[1:]} == dict.fromkeys(MEMBERS[1:], "web:3")
    assert ready_fleet.get_object("m127", "apps/v1", "Deployment", "shop", "web") is None

    _label_web("m127")  # back in the placement: that change overtook the aborted rollout
    assert _joined_image(ready_fleet, "m127") == "web:3"


def _joined_image(fleet, name: str) -> str:
    """The image ``name`` runs once the one run its membership reconcile starts has been done."""
    from federation.membership import reconcile_cluster_membership

    runs = reconcile_cluster_membership(Cluster.objects.get(name=name), reason="labels changed")
    assert len(runs) == 1
    drain(runs[0])
    return image(fleet, name)


def test_a_rollout_aborted_before_it_sent_anything_holds_no_joiner_back(
    ready_fleet, operator, approver, second_approver, queued_reconciles
):
    """Aborted before its first batch, the rollout sent nothing: the revision the resource had is on
    its whole placement, and a cluster joining gets it (a reviewer's finding: taken as the newest
    rollout, it held every later joiner back)."""

    resource = _web_tier_edited_to_web2(operator)
    cr = approved(services.create_change_request(resource, actor=operator), operator, [approver, second_approver])
    rollouts.abort_rollout(cr, actor=operator, reason="not now")
    assert not cr.runs.exists()
    _label_web("m131")
    assert _joined_image(ready_fleet, "m131") == "nginx:1.25"


def test_after_an_abort_a_request_for_the_propagated_revision_is_the_next_change(
    ready_fleet, operator, approver, second_approver, queued_reconciles
):
    """The clusters the aborted rollout never reached left the placement: every cluster placed has
    its revision, and a request for it was refused ("already what the clusters have") while a
    cluster joining since waited for the next change (a reviewer's finding). It is that change."""
    from federation.membership import reconcile_cluster_membership

    resource, cr, rollout = _staged_to_web_tier(ready_fleet, operator, [approver, second_approver])
    rollouts.abort_rollout(cr, actor=operator, reason="keep the canary")
    for cluster in Cluster.objects.filter(name__in=["m127", "m130"]):
        cluster.labels = {k: v for k, v in cluster.labels.items() if k != "tier"}
        cluster.save()
        for run in reconcile_cluster_membership(cluster, reason="labels changed"):
            drain(run)
    assert ready_fleet.get_object("m127", "apps/v1", "Deployment", "shop", "web") is None
    _label_web("m131")
    assert reconcile_cluster_membership(Cluster.objects.get(name="m131"), reason="labels changed") == []

    resource.refresh_from_db()
    assert resource.propagated_revision_id == resource.current_revision_id
    request = services.submit(
        services.create_change_request(resource, actor=operator, rollout_strategy={}), actor=operator
    )
    for approver_ in (approver, second_approver):  # as many as the clusters placed now need
        if request.state == ChangeState.SUBMITTED:
            request = services.approve(request, actor=approver_)
    assert request.state == ChangeState.APPLYING
    for run in request.runs.all():
        drain(run)
    assert image(ready_fleet, "m131") == "web:2"
