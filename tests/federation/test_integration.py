"""End to end through the real Celery worker (queue "propagation") and the fleet simulator."""

import pytest

from federation import propagation, services
from federation.choices import DriftPolicy, PropagationReason, Retention, RunState, SyncState
from federation.models import PropagatedVersion, PropagationRun
from federation.tasks import detect_drift_task
from tests.federation.factories import (
    SIDECAR_TEMPLATE,
    WEB_TEMPLATE,
    federate_namespace,
    register_fleet,
    web_deployment,
)
from tests.utils import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MEMBERS = ["m127", "m128", "m130", "m131"]
IMAGE = "/spec/template/spec/containers/0/image"


def finished(run):
    return PropagationRun.objects.filter(pk=run.pk, finished_at__isnull=False).first()


def status(resource, cluster):
    return (
        PropagatedVersion.objects.filter(resource=resource, cluster__name=cluster)
        .values_list("status", flat=True)
        .first()
    )


@pytest.fixture
def ready_fleet(fleet, celery_worker):
    clusters = register_fleet(fleet, MEMBERS)
    ns = federate_namespace("shop", MEMBERS)
    wait_for(
        lambda: (
            finished(propagation.propagate_revision(ns))
            or PropagationRun.objects.filter(resource=ns, finished_at__isnull=False).exists()
        ),
        timeout=60,
        message="namespace propagation",
    )
    return clusters


def test_deployment_with_override_and_weighted_rsp_lands_on_four_clusters(fleet, ready_fleet, operator):
    resource = web_deployment(
        placement={"clusters": MEMBERS},
        overrides=[{"clusterName": "m131", "clusterOverrides": [{"path": IMAGE, "value": "nginx:1.27-alpine"}]}],
        scheduling={"totalReplicas": 10, "rebalance": True, "clusters": {"m127": {"weight": 2}, "*": {"weight": 1}}},
        actor=operator,
    )
    run = propagation.propagate_revision(resource, actor=operator)
    run = wait_for(lambda: finished(run), timeout=60, message="run finished")
    assert run.state == RunState.SUCCEEDED
    objects = {n: fleet.get_object(n, "apps/v1", "Deployment", "shop", "web") for n in MEMBERS}
    assert {n: o["spec"]["replicas"] for n, o in objects.items()} == {"m127": 4, "m128": 2, "m130": 2, "m131": 2}
    assert {n: o["spec"]["template"]["spec"]["containers"][0]["image"] for n, o in objects.items()} == {
        "m127": "nginx:1.25",
        "m128": "nginx:1.25",
        "m130": "nginx:1.25",
        "m131": "nginx:1.27-alpine",
    }
    # the same revision again writes nothing (status updates by the roll-out bump resourceVersion,
    # so compare generations, and no target reports a write)
    second = propagation.propagate_revision(resource)
    second = wait_for(lambda: finished(second), timeout=60, message="second run finished")
    assert second.state == RunState.SUCCEEDED and not second.targets.filter(changed=True).exists()
    assert {
        n: fleet.get_object(n, "apps/v1", "Deployment", "shop", "web")["metadata"]["generation"] for n in MEMBERS
    } == {n: o["metadata"]["generation"] for n, o in objects.items()}


def test_cluster_down_during_propagation_converges_after_it_returns(fleet, ready_fleet, settings):
    fleet.set_down("m130")
    resource = web_deployment(placement={"clusters": MEMBERS})
    run = propagation.propagate_revision(resource)
    wait_for(
        lambda: status(resource, "m130") == PropagationReason.CLUSTER_NOT_READY, timeout=60, message="m130 retrying"
    )
    wait_for(lambda: all(status(resource, n) == PropagationReason.OK for n in ("m127", "m128", "m131")), timeout=60)
    assert finished(run) is None, "the run waits for the down cluster"
    fleet.set_up("m130")
    run = wait_for(lambda: finished(run), timeout=90, message="run finished after m130 returned")
    assert run.state == RunState.SUCCEEDED and status(resource, "m130") == PropagationReason.OK
    assert fleet.get_object("m130", "apps/v1", "Deployment", "shop", "web") is not None


def test_v128_field_fails_on_v127_only(fleet, ready_fleet):
    resource = web_deployment(placement={"clusters": MEMBERS}, template=SIDECAR_TEMPLATE)
    started = propagation.propagate_revision(resource)
    run = wait_for(lambda: finished(started), timeout=60, message="run finished")
    assert run.state == RunState.PARTIALLY_FAILED
    pv = PropagatedVersion.objects.get(resource=resource, cluster__name="m127")
    assert pv.status == PropagationReason.FIELD_NOT_SUPPORTED and "initContainers[0].restartPolicy" in pv.message
    assert all(status(resource, n) == PropagationReason.OK for n in ("m128", "m130", "m131"))


def test_drift_detected_by_the_periodic_task_and_enforce_repairs(fleet, ready_fleet):
    report = web_deployment(name="reported", placement={"clusters": ["m128"]})
    enforce = web_deployment(name="enforced", placement={"clusters": ["m128"]}, drift_policy=DriftPolicy.ENFORCE)
    for resource in (report, enforce):
        run = propagation.propagate_revision(resource)
        wait_for(lambda run=run: finished(run), timeout=60)
    for name in ("reported", "enforced"):
        fleet.external_edit("m128", "apps/v1", "Deployment", "shop", name, {"spec": {"replicas": 7}})
    detect_drift_task.delay()
    drifted = wait_for(
        lambda: PropagatedVersion.objects.filter(resource=report, sync_state=SyncState.OUT_OF_SYNC).first(),
        timeout=60,
        message="drift reported",
    )
    assert drifted.drift == [{"path": "/spec/replicas", "before": 1, "after": 7, "change": "changed"}]
    repaired = wait_for(
        lambda: PropagatedVersion.objects.filter(resource=enforce, drift_repaired_at__isnull=False).first(),
        timeout=60,
        message="drift repaired",
    )
    assert repaired.sync_state == SyncState.IN_SYNC
    assert fleet.get_object("m128", "apps/v1", "Deployment", "shop", "enforced")["spec"]["replicas"] == 1
    assert fleet.get_object("m128", "apps/v1", "Deployment", "shop", "reported")["spec"]["replicas"] == 7


def test_orphan_leaves_and_delete_removes_on_clusters_leaving_the_placement(fleet, ready_fleet):
    deleted = web_deployment(name="deleted", placement={"clusters": ["m128", "m130"]}, retention=Retention.DELETE)
    orphaned = web_deployment(name="orphaned", placement={"clusters": ["m128", "m130"]}, retention=Retention.ORPHAN)
    for resource in (deleted, orphaned):
        run = propagation.propagate_revision(resource)
        wait_for(lambda run=run: finished(run), timeout=60)
        services.update_resource(resource, template=WEB_TEMPLATE, placement={"clusters": ["m128"]})
        resource.refresh_from_db()
        run = propagation.propagate_revision(resource)
        wait_for(lambda run=run: finished(run), timeout=60)
    assert fleet.get_object("m130", "apps/v1", "Deployment", "shop", "deleted") is None
    assert fleet.get_object("m130", "apps/v1", "Deployment", "shop", "orphaned") is not None
    assert status(deleted, "m130") == PropagationReason.REMOVED
    assert status(orphaned, "m130") == PropagationReason.ORPHANED


def test_fedctl_propagate_wait_reports_each_cluster(fleet, ready_fleet, admin_user):
    from io import StringIO

    from django.core.management import call_command

    web_deployment(placement={"clusters": ["m128", "m130"]})
    out = StringIO()
    call_command(
        "fedctl",
        "propagate",
        "shop/web",
        "--as",
        admin_user.username,
        "--wait",
        "--timeout",
        "60",
        stdout=out,
        stderr=StringIO(),
    )
    text = out.getvalue()
    assert "m128: OK" in text and "m130: OK" in text and "Succeeded" in text
