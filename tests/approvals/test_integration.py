"""End to end: change requests through the real Celery worker and the fleet simulator."""

import pytest

from clusters.models import Cluster
from federation import propagation
from federation.approvals import services
from federation.approvals.choices import ChangeKind, ChangeState
from federation.approvals.models import ChangeRequest
from federation.models import FederatedResource, PropagationRun
from tests.federation.factories import federate_namespace, register_fleet, web_deployment
from tests.utils import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MEMBERS = ["m127", "m128", "m130", "m131"]


def settled(cr):
    return ChangeRequest.objects.filter(pk=cr.pk).exclude(state=ChangeState.APPLYING).first()


def deployment(fleet, cluster, name):
    return fleet.get_object(cluster, "apps/v1", "Deployment", "shop", name)


@pytest.fixture
def ready_fleet(fleet, celery_worker):
    clusters = register_fleet(fleet, MEMBERS)
    ns = federate_namespace("shop", MEMBERS)
    run = propagation.propagate_revision(ns)
    wait_for(
        lambda: PropagationRun.objects.filter(pk=run.pk, finished_at__isnull=False).exists(),
        timeout=60,
        message="namespace propagation",
    )
    return clusters


def test_approved_request_reaches_the_clusters_with_per_cluster_results(
    fleet, ready_fleet, operator, approver, second_approver
):
    resource = web_deployment(name="web", placement={"clusters": ["m127", "m128"]}, actor=operator)
    cr = services.submit(services.create_change_request(resource, actor=operator), actor=operator)
    assert cr.required_approvals == 2, "m127 is labelled env=prod"
    assert {d["cluster"]: d["action"] for d in cr.diffs} == {"m127": "create", "m128": "create"}
    cr = services.approve(cr, actor=approver)
    assert cr.state == ChangeState.SUBMITTED and deployment(fleet, "m127", "web") is None
    cr = services.approve(cr, actor=second_approver, comment="go")
    assert cr.state == ChangeState.APPLYING
    cr = wait_for(lambda: settled(cr), timeout=90, message="request settled")
    assert cr.state == ChangeState.APPLIED
    assert {(r["cluster"], r["state"], r["reason"]) for r in cr.outcome} == {
        ("m127", "done", "OK"),
        ("m128", "done", "OK"),
    }
    assert deployment(fleet, "m127", "web") is not None and deployment(fleet, "m128", "web") is not None
    assert deployment(fleet, "m130", "web") is None


def test_rejected_request_never_reaches_a_cluster(fleet, ready_fleet, operator, approver):
    resource = web_deployment(name="nope", placement={"clusters": ["m128"]}, actor=operator)
    cr = services.submit(services.create_change_request(resource, actor=operator), actor=operator)
    services.reject(cr, actor=approver, comment="not this week")
    with pytest.raises(services.TransitionError):
        services.apply_change_request(cr, actor=operator)
    assert not PropagationRun.objects.filter(resource=resource).exists()
    assert deployment(fleet, "m128", "nope") is None


def test_blocking_preflight_overridden_then_field_unsupported_on_one_cluster_is_partially_failed(
    fleet, ready_fleet, operator, approver, second_approver, admin_user
):
    from tests.federation.factories import SIDECAR_TEMPLATE

    resource = web_deployment(
        name="sidecar", placement={"clusters": ["m127", "m128"]}, template=SIDECAR_TEMPLATE, actor=operator
    )
    cr = services.submit(services.create_change_request(resource, actor=operator), actor=operator)
    # drift's API-compatibility preflight (registered in drift's AppConfig) blocks v1.27
    assert [(p["cluster_name"], p["severity"]) for p in cr.preflight] == [("m127", "blocking")]
    with pytest.raises(services.TransitionError, match="blocking problems"):
        services.approve(cr, actor=approver)
    services.override_preflight(cr, actor=admin_user, reason="m127 is upgraded tonight; accept the failure there")
    services.approve(cr, actor=approver)
    services.approve(cr, actor=second_approver)
    cr = wait_for(lambda: settled(cr), timeout=90, message="settled")
    assert cr.state == ChangeState.PARTIALLY_FAILED
    assert {r["cluster"]: r["reason"] for r in cr.outcome} == {"m127": "FieldNotSupported", "m128": "OK"}


def test_delete_request_removes_objects_then_the_resource(fleet, ready_fleet, operator, approver):
    resource = web_deployment(name="gone", placement={"clusters": ["m128", "m131"]}, actor=operator)
    cr = services.approve(
        services.submit(services.create_change_request(resource, actor=operator), actor=operator), actor=approver
    )
    assert wait_for(lambda: settled(cr), timeout=90).state == ChangeState.APPLIED
    assert deployment(fleet, "m131", "gone") is not None
    delete = services.create_change_request(
        FederatedResource.objects.get(pk=resource.pk), actor=operator, kind=ChangeKind.DELETE
    )
    assert {d["cluster"]: d["action"] for d in delete.diffs} == {"m128": "delete", "m131": "delete"}
    delete = services.approve(services.submit(delete, actor=operator), actor=approver)
    delete = wait_for(lambda: settled(delete), timeout=90, message="delete settled")
    assert delete.state == ChangeState.APPLIED
    assert deployment(fleet, "m128", "gone") is None and deployment(fleet, "m131", "gone") is None
    assert not FederatedResource.objects.filter(pk=resource.pk).exists()


def test_unjoin_request_removes_propagated_objects_then_unjoins(
    fleet, ready_fleet, operator, approver, second_approver, admin_user
):
    resource = web_deployment(name="leaving", placement={"clusters": ["m131"]}, actor=operator)
    cr = services.approve(
        services.submit(services.create_change_request(resource, actor=operator), actor=operator), actor=approver
    )
    assert wait_for(lambda: settled(cr), timeout=90).state == ChangeState.APPLIED
    unjoin = services.create_change_request(
        kind=ChangeKind.UNJOIN, cluster=Cluster.objects.get(name="m131"), actor=admin_user
    )
    assert {d["resource"] for d in unjoin.diffs} >= {str(resource)}
    # it deletes Namespace shop from m131: the most severe change, the production approval count on a dev cluster
    assert unjoin.required_approvals == 2
    assert [d["severity"] for d in unjoin.diffs if d["resource"] == "Namespace shop"] == ["critical"]
    unjoin = services.approve(services.submit(unjoin, actor=admin_user), actor=approver)
    unjoin = services.approve(unjoin, actor=second_approver)
    unjoin = wait_for(lambda: settled(unjoin), timeout=90, message="unjoin settled")
    assert unjoin.state == ChangeState.APPLIED
    assert deployment(fleet, "m131", "leaving") is None
    assert not Cluster.objects.filter(name="m131").exists()
