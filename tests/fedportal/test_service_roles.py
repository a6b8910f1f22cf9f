"""Roles are enforced in the services as well as the views: a caller that skips the view (a
command, another service) still cannot act beyond its role. ``actor=None`` is the system itself."""

import pytest
from django.core.exceptions import PermissionDenied

from clusters import services as cluster_services
from clusters.models import Cluster
from federation import services as federation_services
from federation.models import FederatedResource, FederatedType
from fedportal.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_registering_a_cluster_needs_the_admin_role(operator):
    with pytest.raises(PermissionDenied, match="admin"):
        cluster_services.register_cluster(
            name="c1", api_server="https://127.0.0.1:6443", token="t", actor=operator, verify=False
        )
    assert not Cluster.objects.exists() and not AuditEvent.objects.filter(action__startswith="cluster.").exists()


def test_editing_a_federated_resource_needs_the_operator_role(viewer):
    with pytest.raises(PermissionDenied, match="operator"):
        federation_services.create_resource(
            federation_services.find_type("ConfigMap"),
            namespace="shop",
            name="cfg",
            template={"data": {"a": "b"}},
            actor=viewer,
        )
    assert not FederatedResource.objects.exists()


def test_enabling_a_federated_type_needs_the_admin_role(operator):
    with pytest.raises(PermissionDenied, match="admin"):
        federation_services.enable_type(kind="CronJob", group="batch", version="v1", actor=operator)
    assert not FederatedType.objects.filter(kind="CronJob").exists()


def test_the_system_itself_passes_without_an_actor():
    federation_services.enable_type(kind="CronJob", group="batch", version="v1", actor=None)
    assert FederatedType.objects.filter(kind="CronJob").exists()
