"""Staged rollouts end to end: the real Celery worker, the fleet simulator, 12 clusters, 3 waves.

Concurrency and ordering are asserted from the simulator's own write log (GET /_fleet/clusters/<c>/log),
not from what FedPortal says it did.
"""

import time

import pytest

from federation import propagation
from federation import services as federation_services
from federation.approvals import rollout as rollouts
from federation.approvals import services
from federation.approvals.choices import ChangeKind, ChangeState, RolloutState, WaveState
from federation.approvals.models import ChangeRequest, Rollout
from federation.models import PropagationRun
from fedportal.models import AuditEvent
from tests.federation.factories import WEB_TEMPLATE, federate_namespace, register_fleet, web_deployment
from tests.utils import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

CANARY = ["c1", "c2"]
STAGING = ["s1", "s2", "s3", "s4"]
PROD = ["p1", "p2", "p3", "p4", "p5", "p6"]
ALL = CANARY + STAGING + PROD
NEW_IMAGE = "registry.example/web:2.0"


def _fleet_spec():
    labels = {n: {"env": "staging", "canary": "true"} for n in CANARY}
    labels.update({n: {"env": "staging"} for n in STAGING})
    labels.update({n: {"env": "prod"} for n in PROD})
    return {
        "defaults": {"version": "v1.30.1", "rolloutSeconds": 0.3},
        # every answer 150 ms late: writes in flight together overlap in the simulator's log
        "clusters": [{"name": n, "labels": labels[n], "faults": {"latencyMs": 150}} for n in ALL],
    }


STRATEGY = {
    "autoRollback": True,
    "waves": [
        {"name": "canary", "clusterSelector": {"matchLabels": {"canary": "true"}}, "maxParallel": 1, "bakeSeconds": 2},
        {
            "name": "staging",
            "clusterSelector": {"matchLabels": {"env": "staging"}},
            "maxParallel": "50%",
            "bakeSeconds": 1,
            "progressDeadlineSeconds": 6,
        },
        {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, "maxParallel": 3},
    ],
}
WAVES = {"canary": CANARY, "staging": STAGING, "prod": PROD}
PARALLEL = {"canary": 1, "staging": 2, "prod": 3}


@pytest.fixture
def twelve(fleet_factory, celery_worker):
    fleet = fleet_factory(_fleet_spec())
    register_fleet(fleet, ALL)
    ns = federate_namespace("shop", ALL)
    run = propagation.propagate_revision(ns)
    wait_for(lambda: PropagationRun.objects.filter(pk=run.pk, finished_at__isnull=False).exists(), timeout=90)
    return fleet


def _deployed(fleet, operator, strategy=STRATEGY):
    """web at revision 1 everywhere (propagated directly), then revision 2 (the new image) drafted."""
    resource = web_deployment(placement={"clusterSelector": {}}, actor=operator)
    run = propagation.propagate_revision(resource)
    wait_for(lambda: PropagationRun.objects.filter(pk=run.pk, finished_at__isnull=False).exists(), timeout=90)
    federation_services.set_rollout_strategy(resource, strategy, actor=operator)
    template = {
        **WEB_TEMPLATE,
        "spec": {
            **WEB_TEMPLATE["spec"],
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": NEW_IMAGE}]},
            },
        },
    }
    federation_services.update_resource(
        resource, template=template, placement={"clusterSelector": {}}, actor=operator, message="v2"
    )
    resource.refresh_from_db()
    return resource


def _approve(cr, *approvers):
    for approver in approvers:
        cr = services.approve(cr, actor=approver)
    return cr


def _writes(fleet, since: float) -> dict[str, list[tuple[float, float]]]:
    """Per cluster: the (start, end) of every write to the web Deployment after ``since``."""
    out = {}
    for name in ALL:
        writes = fleet.admin("GET", f"/clusters/{name}/log")["writes"]
        out[name] = [
            (w["start"], w["end"])
            for w in writes
            if w["start"] >= since and w["method"] in ("PATCH", "PUT", "POST") and "/deployments/web" in w["path"]
        ]
    return out


def _max_overlap(intervals) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    now = peak = 0
    for _, delta in events:
        now += delta
        peak = max(peak, now)
    return peak


def _image(fleet, cluster):
    obj = fleet.get_object(cluster, "apps/v1", "Deployment", "shop", "web")
    return obj["spec"]["template"]["spec"]["containers"][0]["image"]


def test_good_change_goes_wave_by_wave_with_max_parallel_respected(twelve, operator, approver, second_approver):
    fleet = twelve
    resource = _deployed(fleet, operator)
    cr = services.submit(services.create_change_request(resource, actor=operator), actor=operator)
    since = time.time()
    cr = _approve(cr, approver, second_approver)
    assert cr.state == ChangeState.APPLYING and Rollout.objects.filter(change_request=cr).exists()
    cr = wait_for(
        lambda: ChangeRequest.objects.filter(pk=cr.pk).exclude(state=ChangeState.APPLYING).first(),
        timeout=180,
        message="rollout finished",
    )
    assert cr.state == ChangeState.APPLIED
    status = rollouts.rollout_status(cr)
    assert status["state"] == RolloutState.COMPLETED
    assert [(w["name"], w["state"]) for w in status["waves"]] == [
        ("canary", WaveState.PASSED),
        ("staging", WaveState.PASSED),
        ("prod", WaveState.PASSED),
    ]
    assert {n: _image(fleet, n) for n in ALL} == {n: NEW_IMAGE for n in ALL}
    writes = _writes(fleet, since)
    assert all(len(writes[n]) >= 1 for n in ALL), writes
    spans = {}
    for wave, names in WAVES.items():
        intervals = [iv for n in names for iv in writes[n]]
        assert _max_overlap(intervals) <= PARALLEL[wave], f"{wave}: more than {PARALLEL[wave]} clusters at once"
        spans[wave] = (min(s for s, _ in intervals), max(e for _, e in intervals))
    # never two waves at once: every write of a wave ends before the next wave's first write, after its bake
    assert spans["canary"][1] + 2 <= spans["staging"][0]
    assert spans["staging"][1] + 1 <= spans["prod"][0]
    # observed concurrency reaches the limit where the wave is big enough to show it
    assert _max_overlap([iv for n in PROD for iv in writes[n]]) >= 2
    actions = set(AuditEvent.objects.filter(object_id=str(cr.pk)).values_list("action", flat=True))
    assert {"approvals.rollout.start", "approvals.rollout.wave_start", "approvals.rollout.gate_passed"} <= actions
    assert "approvals.rollout.complete" in actions


def test_image_failure_in_wave_two_halts_and_rolls_back_waves_one_and_two(twelve, operator, approver, second_approver):
    fleet = twelve
    fleet.admin("POST", "/clusters/s3/faults", {"imageFail": "registry.example/web:2.*"})
    resource = _deployed(fleet, operator)
    cr = services.submit(services.create_change_request(resource, actor=operator), actor=operator)
    since = time.time()
    cr = _approve(cr, approver, second_approver)
    cr = wait_for(
        lambda: ChangeRequest.objects.filter(pk=cr.pk).exclude(state=ChangeState.APPLYING).first(),
        timeout=180,
        message="rollout halted and rolled back",
    )
    assert cr.state == ChangeState.ROLLED_BACK
    status = rollouts.rollout_status(cr)
    assert status["state"] == RolloutState.ROLLED_BACK
    staging = status["waves"][1]
    assert staging["failedGate"] and "s3" in staging["failedGate"], staging
    assert status["waves"][2]["state"] == WaveState.PENDING
    rollback = ChangeRequest.objects.get(rollback_of=cr)
    assert rollback.kind == ChangeKind.ROLLBACK and status["rollbacks"] == [rollback.pk]
    rollback = wait_for(
        lambda: ChangeRequest.objects.filter(pk=rollback.pk, state=ChangeState.APPLIED).first(),
        timeout=120,
        message="rollback applied",
    )
    assert sorted(rollback.target_clusters) == sorted(CANARY + STAGING)
    assert {n: _image(fleet, n) for n in CANARY + STAGING} == {n: "nginx:1.25" for n in CANARY + STAGING}
    writes = _writes(fleet, since)
    assert all(writes[n] == [] for n in PROD), "wave-3 clusters never saw the new revision"
    assert {n: _image(fleet, n) for n in PROD} == {n: "nginx:1.25" for n in PROD}
    actions = set(AuditEvent.objects.filter(object_id=str(cr.pk)).values_list("action", flat=True))
    assert {"approvals.rollout.halt", "approvals.rollout.rollback"} <= actions
    assert AuditEvent.objects.filter(object_id=str(rollback.pk), action="approvals.change.create").exists()


APPROVAL_STRATEGY = {
    "autoRollback": False,
    "waves": [
        {"name": "canary", "clusterSelector": {"matchLabels": {"canary": "true"}}},
        {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, "requireApproval": True},
    ],
}


def test_approval_wave_pauses_until_the_prod_count_is_met_and_the_author_cannot_approve(
    twelve, make_user, approver, second_approver
):
    from django.core.exceptions import PermissionDenied

    from fedportal.roles import Role

    fleet = twelve
    author = make_user("dual-author", Role.OPERATOR, Role.APPROVER)  # both roles: authorship still forbids it
    resource = _deployed(fleet, author, strategy=APPROVAL_STRATEGY)
    cr = services.submit(services.create_change_request(resource, actor=author), actor=author)
    since = time.time()
    cr = _approve(cr, approver, second_approver)
    wait_for(
        lambda: Rollout.objects.filter(change_request=cr, state=RolloutState.WAITING_APPROVAL).exists(),
        timeout=120,
        message="rollout waits for the prod wave's approvals",
    )
    status = rollouts.rollout_status(cr)
    assert [w["state"] for w in status["waves"]] == [WaveState.PASSED, WaveState.PENDING, WaveState.PENDING]
    with pytest.raises(PermissionDenied):
        rollouts.approve_wave(cr, actor=author)
    rollouts.approve_wave(cr, actor=approver)
    with pytest.raises(rollouts.RolloutError, match="already approved"):
        rollouts.approve_wave(cr, actor=approver)
    time.sleep(2)
    assert Rollout.objects.get(change_request=cr).state == RolloutState.WAITING_APPROVAL, "1 of 2 is not enough"
    assert all(_writes(fleet, since)[n] == [] for n in PROD), "no prod write before the wave is approved"
    rollouts.approve_wave(cr, actor=second_approver)
    cr = wait_for(
        lambda: ChangeRequest.objects.filter(pk=cr.pk, state=ChangeState.APPLIED).first(),
        timeout=180,
        message="rollout completed after the wave approvals",
    )
    assert {n: _image(fleet, n) for n in ALL} == {n: NEW_IMAGE for n in ALL}
    assert rollouts.rollout_status(cr)["waves"][1]["approvals"] == [approver.username, second_approver.username]
