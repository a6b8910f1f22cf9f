"""KubeFed's capacity rule end to end: a real worker, the fleet simulator with a full cluster, and the
overflow moving to the other clusters."""

import pytest

from federation import propagation, schedule
from federation.models import PropagatedVersion, PropagationRun
from tests.federation.factories import federate_namespace, register_fleet, web_deployment
from tests.utils import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MEMBERS = ["m127", "m128", "m130", "m131"]


def finished(run):
    return PropagationRun.objects.filter(pk=run.pk, finished_at__isnull=False).first()


def live(fleet, name):
    return fleet.get_object(name, "apps/v1", "Deployment", "shop", "web")


def ready(fleet):
    return {n: ((live(fleet, n) or {}).get("status") or {}).get("readyReplicas", 0) for n in MEMBERS}


def test_replicas_that_do_not_fit_on_a_full_cluster_move_to_the_others(fleet, celery_worker, settings):
    register_fleet(fleet, MEMBERS)
    namespace = federate_namespace("shop", MEMBERS)
    first = propagation.propagate_revision(namespace)
    wait_for(lambda: finished(first), timeout=60, message="namespace propagated")
    fleet.admin("POST", "/clusters/m128/capacity", {"pods": 1})  # m128 can run one pod
    resource = web_deployment(
        placement={"clusters": MEMBERS},
        scheduling={"totalReplicas": 8, "rebalance": True, "clusters": {"*": {"weight": 1}}},
    )
    run = propagation.propagate_revision(resource)
    wait_for(lambda: finished(run), timeout=60, message="first run")
    assert {n: live(fleet, n)["spec"]["replicas"] for n in MEMBERS} == {"m127": 2, "m128": 2, "m130": 2, "m131": 2}
    wait_for(lambda: ready(fleet) == {"m127": 2, "m128": 1, "m130": 2, "m131": 2}, timeout=30, message="roll-outs done")
    # the member's status is collected (the drift sweep reads it), and the unready replica is older than the
    # threshold (0 s here; KubeFed's 60 s by default)
    propagation.detect_drift(resource=resource)
    pv = PropagatedVersion.objects.get(resource=resource, cluster__name="m128")
    assert pv.remote_status["readyReplicas"] == 1 and pv.remote_status["unavailableReplicas"] == 1
    settings.FEDERATION_UNSCHEDULABLE_SECONDS = 0
    row = next(r for r in schedule.decide_for(resource).schedule if r.cluster == "m128")
    assert (row.current, row.capacity, row.planned, row.overflow) == (1, 1, 1, 1)
    receiver = [n for n in MEMBERS if n != "m128"]
    run = propagation.propagate_revision(resource)
    wait_for(lambda: finished(run), timeout=60, message="re-planned run")
    replicas = {n: live(fleet, n)["spec"]["replicas"] for n in MEMBERS}
    assert replicas["m128"] == 2, "planned 1 plus the overflow 1, as KubeFed writes it"
    assert sorted(replicas[n] for n in receiver) == [2, 2, 3], "the replica m128 cannot run moved to another cluster"
    wait_for(lambda: sum(ready(fleet).values()) == 8, timeout=30, message="all 8 replicas ready across the fleet")
    assert row.reason.startswith("capacity 1: 1 moved to ")
