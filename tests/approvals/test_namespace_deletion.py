"""Deleting a Namespace from a member is the most severe change: flagged, and it needs the production
approval count whatever the environment (the clusters here are dev, not Ready: no network)."""

import pytest

from federation import services as federation_services
from federation.approvals.choices import ChangeKind
from federation.choices import PropagationReason
from federation.models import PropagatedVersion
from tests.approvals.factories import draft
from tests.federation.factories import ftype

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop_namespace(dev_cluster, operator):
    namespace = federation_services.create_resource(
        ftype("Namespace"), namespace="", name="shop", template={}, placement={"clusters": ["dev-a"]}, actor=operator
    )
    PropagatedVersion.objects.create(
        resource=namespace,
        cluster=dev_cluster,
        status=PropagationReason.OK,
        applied_manifest={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    )
    return namespace


def test_deleting_a_federated_namespace_needs_the_production_count_on_dev(shop_namespace, operator, settings):
    settings.FEDPORTAL_APPROVALS_DEFAULT, settings.FEDPORTAL_APPROVALS_PROD = 1, 3
    cr = draft(shop_namespace, operator, kind=ChangeKind.DELETE)
    assert cr.required_approvals == 3
    (row,) = cr.diffs
    assert row["severity"] == "critical"
    assert row["message"].startswith(
        "Deletes Namespace shop from dev-a and everything in it: the most severe kind of change."
    )


def test_a_placement_that_drops_a_namespace_from_a_member_needs_the_production_count(
    shop_namespace, operator, settings
):
    settings.FEDPORTAL_APPROVALS_DEFAULT, settings.FEDPORTAL_APPROVALS_PROD = 1, 3
    revision = federation_services.update_resource(
        shop_namespace, template={}, placement={"clusters": []}, actor=operator
    )
    cr = draft(shop_namespace, operator, revision=revision)
    assert cr.required_approvals == 3


def test_other_deletions_on_dev_keep_the_default_count(dev_resource, dev_cluster, operator, settings):
    settings.FEDPORTAL_APPROVALS_DEFAULT, settings.FEDPORTAL_APPROVALS_PROD = 1, 3
    PropagatedVersion.objects.create(
        resource=dev_resource, cluster=dev_cluster, status=PropagationReason.OK, applied_manifest={"kind": "Deployment"}
    )
    cr = draft(dev_resource, operator, kind=ChangeKind.DELETE)
    assert cr.required_approvals == 1 and "severity" not in cr.diffs[0]
