"""Issue 16, finding 16: objects in protected namespaces (FEDPORTAL_PROTECTED_NAMESPACES, default
kube-system, kube-public, kube-node-lease) are propagated only through an admin's audited
emergency apply. (No network: the clusters are not Ready.)"""

import pytest
from django.urls import reverse

from federation import propagation
from federation import services as federation_services
from federation.approvals import services
from federation.approvals.choices import ChangeKind, ChangeState
from federation.approvals.models import ChangeRequest
from federation.models import FederatedResource, PropagationRun
from federation.protected import protected_namespaces
from fedportal.models import AuditEvent
from tests.federation.factories import WEB_TEMPLATE, ftype

pytestmark = pytest.mark.django_db


@pytest.fixture
def system_resource(dev_cluster, operator):
    return federation_services.create_resource(
        ftype("Deployment"),
        namespace="kube-system",
        name="agent",
        template=WEB_TEMPLATE,
        placement={"clusters": ["dev-a"]},
        actor=operator,
    )


def test_default_protected_namespaces():
    assert protected_namespaces() == {"kube-system", "kube-public", "kube-node-lease"}


def test_no_change_request_for_an_object_in_a_protected_namespace(system_resource, operator):
    with pytest.raises(
        services.TransitionError,
        match="kube-system is a protected namespace: .* only through an admin's emergency apply",
    ):
        services.create_change_request(system_resource, actor=operator)
    with pytest.raises(services.TransitionError, match="protected namespace"):
        services.create_change_request(system_resource, actor=operator, kind=ChangeKind.DELETE)
    assert not ChangeRequest.objects.exists()


def test_a_federated_namespace_named_like_a_protected_one_is_protected(dev_cluster, operator):
    namespace = federation_services.create_resource(
        ftype("Namespace"),
        namespace="",
        name="kube-public",
        template={},
        placement={"clusters": ["dev-a"]},
        actor=operator,
    )
    with pytest.raises(services.TransitionError, match="kube-public is a protected namespace"):
        services.create_change_request(namespace, actor=operator)


def test_propagation_itself_refuses_protected_objects_except_in_an_emergency(
    system_resource, dev_cluster, operator, admin_user
):
    with pytest.raises(propagation.PropagationError, match="kube-system is a protected namespace"):
        propagation.propagate_revision(system_resource, actor=operator)
    with pytest.raises(propagation.PropagationError, match="kube-system is a protected namespace"):
        propagation.propagate_revision(system_resource, actor=admin_user)  # admins too, outside the emergency path
    FederatedResource.objects.filter(pk=system_resource.pk).update(propagated_revision=system_resource.current_revision)
    with pytest.raises(propagation.PropagationError, match="protected namespace"):
        propagation.resync_cluster(system_resource, dev_cluster, actor=operator)
    assert not PropagationRun.objects.exists()


def test_emergency_apply_propagates_a_protected_object_and_audits_it(system_resource, admin_user):
    cr = services.emergency_apply(system_resource, actor=admin_user, reason="CNI agent broken fleet-wide")
    assert cr.emergency and cr.state == ChangeState.APPLYING and cr.runs.count() == 1
    event = AuditEvent.objects.get(action="approvals.change.emergency_apply")
    assert event.actor_name == "adam-admin" and event.after["protected_namespace"] == "kube-system"


def test_the_setting_decides_which_namespaces_are_protected(dev_resource, system_resource, operator, settings):
    settings.FEDPORTAL_PROTECTED_NAMESPACES = ["shop"]
    with pytest.raises(services.TransitionError, match="shop is a protected namespace"):
        services.create_change_request(dev_resource, actor=operator)
    assert services.create_change_request(system_resource, actor=operator).state == ChangeState.DRAFT


def test_request_change_page_says_why_with_a_409(client, system_resource, operator):
    client.force_login(operator)
    response = client.post(
        reverse("approvals:change_create", args=[system_resource.pk]), {"title": "", "kind": "", "revision": ""}
    )
    assert response.status_code == 409
    assert "kube-system is a protected namespace" in response.content.decode()
    assert not ChangeRequest.objects.exists()
