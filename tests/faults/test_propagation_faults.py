"""Propagation survives clusters going away, API errors and a worker killed mid fan-out."""

import time
from collections import Counter

import pytest

from federation import propagation
from federation.choices import PropagationReason, TargetState
from federation.models import PropagatedVersion, PropagationTarget
from federation.tasks import resume_stale_targets_task
from fedportal.models import AuditEvent
from tests.faults.helpers import (
    assert_converged,
    federate,
    finished_run,
    fleet_versions,
    register_clusters,
    wait_for_run,
)
from tests.federation.factories import WEB_TEMPLATE
from tests.utils import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_clusters_down_during_propagation_converge_when_back_and_say_why(fleet_factory, celery_worker):
    fleet = fleet_factory({"generate": 10, "versions": "1.27-1.31"})
    names = fleet.names
    register_clusters(fleet, names, versions=fleet_versions(fleet))
    ns = federate("Namespace", "shop", names)
    propagation.propagate_revision(ns)
    wait_for(
        lambda: PropagatedVersion.objects.filter(resource=ns, status=PropagationReason.OK).count() == 10,
        timeout=60,
        message="namespace everywhere",
    )
    down = names[:3]  # 30%
    for name in down:
        fleet.set_down(name)
    resource = federate("Deployment", "web", names, namespace="shop", template=WEB_TEMPLATE)
    run = propagation.propagate_revision(resource)
    went_down = time.monotonic()

    def statuses():
        return dict(PropagatedVersion.objects.filter(resource=resource).values_list("cluster__name", "status"))

    wait_for(
        lambda: all(statuses().get(n) == PropagationReason.OK for n in names[3:]),
        timeout=60,
        message="the 7 healthy clusters",
    )
    wait_for(
        lambda: all(statuses().get(n) == PropagationReason.CLUSTER_NOT_READY for n in down),
        timeout=30,
        message="the 3 down clusters report why",
    )
    for pv in PropagatedVersion.objects.filter(resource=resource, cluster__name__in=down):
        assert "unreachable" in pv.message and "Retrying in" in pv.message, pv.message
    assert finished_run(run) is None, "the run waits for the clusters that are down"
    time.sleep(max(0.0, 20 - (time.monotonic() - went_down)))
    for name in down:
        fleet.set_up(name)
    wait_for_run(run, timeout=120, worker=celery_worker)
    assert_converged(resource, run, names, fleet, api_version="apps/v1", kind="Deployment", namespace="shop")


@pytest.fixture
def session_worker_paused(session_worker):
    """The session's worker stopped for the test (a retry it recorded would take the default backoff
    and attempts), started again after it."""
    session_worker.stop()
    yield
    session_worker.start()


def test_one_api_call_in_five_failing_with_500_still_converges_with_backoff(
    fleet_factory, celery_worker_factory, session_worker_paused
):
    # two calls per attempt (a new object is read, then created): an attempt fails with 1 - 0.8**2 = 0.36.
    # With 60 clusters the chance that none meets an error is 0.64**60 (1 in 10**12). With the default
    # 8 attempts, 2 s doubling to 60 s, one cluster in 60 failing all of them was 0.36**8 * 60 = 1.7 %, and
    # the eighth attempt came after the 180 s this test waits (a CI run met it at the seventh): 12
    # attempts (0.36**12 * 60 = 3 in 10,000) a short backoff apart, the backoff all the same, on a worker
    # of its own (the session's would record some retries with the defaults)
    worker = celery_worker_factory(
        "flaky-api",
        env={
            "FEDERATION_MAX_ATTEMPTS": "12",
            "FEDERATION_RETRY_BASE_SECONDS": "0.5",
            "FEDERATION_RETRY_MAX_SECONDS": "4",
        },
    )
    fleet = fleet_factory({"generate": 60, "versions": "1.27-1.31"})
    names = fleet.names
    register_clusters(fleet, names, versions=fleet_versions(fleet))
    for name in names:
        fleet.set_error_rate(name, 0.2)
    resource = federate("Namespace", "payments", names)
    run = propagation.propagate_revision(resource)
    wait_for_run(run, timeout=180, worker=worker)
    assert_converged(resource, run, names, fleet, api_version="v1", kind="Namespace")
    retried = PropagationTarget.objects.filter(run=run, attempts__gt=1).count()
    assert retried >= 1, "with 20% errors some targets needed a retry"


def test_worker_killed_mid_fan_out_a_new_worker_finishes_it(fleet_factory, celery_worker_factory):
    fleet = fleet_factory({"generate": 200, "versions": "1.27-1.31"})
    names = fleet.names
    for name in names:
        fleet.set_latency(name, 600)  # slow enough that the kill lands mid fan-out (one apply per target)
    register_clusters(fleet, names, versions=fleet_versions(fleet))
    env = {"FEDERATION_LEASE_SECONDS": "8", "FEDPORTAL_KUBE_TIMEOUT_SECONDS": "3"}
    doomed = celery_worker_factory("doomed", env=env, concurrency=8)
    resource = federate("Namespace", "fanout", names)
    run = propagation.propagate_revision(resource)

    def done():
        return PropagationTarget.objects.filter(run=run, state=TargetState.DONE).count()

    wait_for(lambda: done() >= 20, timeout=120, message="some targets done")
    doomed.kill()
    at_kill = done()
    assert at_kill < len(names), "the worker was killed before the fan-out finished"
    celery_worker_factory("rescuer", env=env, concurrency=8)
    # beat runs the sweep every minute (inside detect_drift_task); here it is run more often
    deadline = time.monotonic() + 240
    while finished_run(run) is None and time.monotonic() < deadline:
        resume_stale_targets_task.delay(5)
        time.sleep(5)
    assert finished_run(run) is not None, Counter(
        PropagationTarget.objects.filter(run=run).values_list("state", flat=True)
    )
    assert_converged(resource, run, names, fleet, api_version="v1", kind="Namespace")
    # a finished target is never redone: at most the targets in flight at the kill were applied twice
    applies = Counter(
        AuditEvent.objects.filter(action="federation.propagation.apply", object_id=str(resource.pk)).values_list(
            "cluster", flat=True
        )
    )
    assert set(applies) == set(names)
    assert sum(n - 1 for n in applies.values()) <= 16, applies.most_common(5)
