"""A Secret's rollout: a halt reason or failed gate written before API servers' refusals were scrubbed
on write may quote a value; the change request's page shows it scrubbed (a review's finding)."""

import base64

import pytest
from django.urls import reverse

from federation import services
from tests.approvals.factories import staged
from tests.federation.factories import namespace_everywhere

ENCODED = base64.b64encode(b"sentinel-rollout-J2mQ7v").decode()

pytestmark = pytest.mark.django_db


def test_a_secrets_halt_reason_and_failed_gate_are_scrubbed(client, dev_cluster, prod_cluster, operator, viewer):
    namespace_everywhere("shop")
    resource = services.create_resource(
        services.find_type("Secret"),
        namespace="shop",
        name="db",
        actor=operator,
        template={"type": "Opaque", "data": {"password": ENCODED}},
        placement={"clusters": ["prod-a", "dev-a"]},
    )
    reason = f'applied: 1 cluster(s) failed (prod-a: CreationFailed data[password]: Invalid value: "{ENCODED}")'
    cr = staged(resource, operator, halt_reason=reason, failed_gate=reason, gate_message=reason)
    client.force_login(viewer)
    page = client.get(reverse("approvals:change_detail", args=[cr.pk])).content.decode()
    assert "Invalid value" in page and ENCODED not in page
