"""A worker SIGKILLed in the middle of a staged rollout: a new worker carries on from where it was,
no batch of a wave is sent twice and no wave is skipped."""

import time
from collections import Counter

import pytest

from federation import propagation
from federation import services as federation_services
from federation.approvals import rollout as rollouts
from federation.approvals import services
from federation.approvals.choices import ChangeState, RolloutState, WaveState
from federation.approvals.models import ChangeRequest, Rollout, RolloutWave
from federation.models import PropagationRun, PropagationTarget
from federation.tasks import resume_stale_targets_task
from tests.federation.factories import WEB_TEMPLATE, federate_namespace, register_fleet, web_deployment
from tests.utils import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

NAMES = [f"k{i:02d}" for i in range(12)]
STRATEGY = {
    "waves": [
        {"name": "one", "clusters": NAMES[:2], "maxParallel": 1},
        {"name": "two", "clusters": NAMES[2:8], "maxParallel": 2, "bakeSeconds": 1},
        {"name": "three", "clusters": NAMES[8:], "maxParallel": 2},
    ]
}


def test_worker_killed_mid_wave_resumes_without_repeating_or_skipping(
    fleet_factory, celery_worker_factory, operator, approver
):
    fleet = fleet_factory(
        {
            "defaults": {"version": "v1.30.1", "rolloutSeconds": 0.3},
            "clusters": [{"name": n, "labels": {"env": "staging"}, "faults": {"latencyMs": 400}} for n in NAMES],
        }
    )
    register_fleet(fleet, NAMES)
    env = {
        "FEDERATION_LEASE_SECONDS": "6",
        "FEDPORTAL_ROLLOUT_LEASE_SECONDS": "6",
        "FEDPORTAL_KUBE_TIMEOUT_SECONDS": "3",
    }
    doomed = celery_worker_factory("rollout-doomed", env=env, concurrency=4)
    ns = federate_namespace("shop", NAMES)
    run = propagation.propagate_revision(ns)
    wait_for(lambda: PropagationRun.objects.filter(pk=run.pk, finished_at__isnull=False).exists(), timeout=120)
    resource = web_deployment(placement={"clusterSelector": {}}, actor=operator)
    run = propagation.propagate_revision(resource)
    wait_for(lambda: PropagationRun.objects.filter(pk=run.pk, finished_at__isnull=False).exists(), timeout=120)
    federation_services.set_rollout_strategy(resource, STRATEGY, actor=operator)
    template = {**WEB_TEMPLATE, "metadata": {"labels": {"app": "web", "release": "2"}}}
    federation_services.update_resource(resource, template=template, placement={"clusterSelector": {}}, actor=operator)
    resource.refresh_from_db()
    cr = services.submit(services.create_change_request(resource, actor=operator), actor=operator)
    since = time.time()
    cr = services.approve(cr, actor=approver)  # env=staging: one approval
    assert cr.state == ChangeState.APPLYING
    rollout = Rollout.objects.get(change_request=cr)

    def wave_two_started():
        wave = RolloutWave.objects.get(rollout=rollout, name="two")
        return wave.state == WaveState.APPLYING and wave.batch_count >= 2

    wait_for(wave_two_started, timeout=120, message="wave two half way")
    doomed.kill()
    celery_worker_factory("rollout-rescuer", env=env, concurrency=4)
    deadline = time.monotonic() + 240
    while not ChangeRequest.objects.filter(pk=cr.pk).exclude(state=ChangeState.APPLYING).exists():
        assert time.monotonic() < deadline, rollouts.rollout_status(cr)
        resume_stale_targets_task.delay(3)
        rollouts.resume_stale_rollouts(stale_seconds=3)
        time.sleep(3)
    cr.refresh_from_db()
    assert cr.state == ChangeState.APPLIED
    status = rollouts.rollout_status(cr)
    assert status["state"] == RolloutState.COMPLETED
    assert [w["state"] for w in status["waves"]] == [WaveState.PASSED] * 3, "no wave skipped"
    # every cluster was in exactly one batch of one wave: never sent the change twice
    batches = Counter(PropagationTarget.objects.filter(run__in=cr.runs.all()).values_list("cluster__name", flat=True))
    assert batches == Counter(NAMES), batches
    # and the waves did not overlap, as the simulator saw the writes
    spans = {}
    for wave in ("one", "two", "three"):
        names = next(w for w in STRATEGY["waves"] if w["name"] == wave)["clusters"]
        writes = [
            w
            for n in names
            for w in fleet.admin("GET", f"/clusters/{n}/log")["writes"]
            if w["start"] >= since and "/deployments/web" in w["path"]
        ]
        assert writes, wave
        spans[wave] = (min(w["start"] for w in writes), max(w["end"] for w in writes))
    assert spans["one"][1] <= spans["two"][0] and spans["two"][1] <= spans["three"][0], spans
