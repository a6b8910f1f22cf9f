"""Nothing reaches an isolated cluster (a review of the detect -> isolate -> repair loop): not a
target already queued or waiting for its retry when the cluster was isolated, and not a removal
planned because the placement no longer names it."""

import pytest

from drift.services import isolate_cluster, restore_cluster
from federation import propagation, services
from federation.choices import PropagationReason, Retention, TargetState
from federation.models import PropagatedVersion
from tests.federation.factories import WEB_TEMPLATE, drain, federate_namespace, register_fleet, web_deployment

pytestmark = pytest.mark.django_db
MEMBERS = ["m128", "m131"]


@pytest.fixture
def clusters(fleet):
    registered = register_fleet(fleet, MEMBERS)
    drain(propagation.propagate_revision(federate_namespace("shop", MEMBERS)))
    return registered


def live(fleet, cluster):
    return fleet.get_object(cluster, "apps/v1", "Deployment", "shop", "web")


def test_a_target_waiting_for_its_retry_is_not_applied_once_its_cluster_is_isolated(
    fleet, clusters, admin_user, settings
):
    settings.FEDERATION_RETRY_BASE_SECONDS = 0.1
    fleet.set_down("m131")
    resource = web_deployment(placement={"clusters": ["m131"]})
    run = propagation.propagate_revision(resource)
    drain(run, rounds=1)
    assert run.targets.get().state == TargetState.RETRYING
    isolate_cluster(clusters["m131"], actor=admin_user, reason="P0 skew")
    fleet.set_up("m131")

    drain(run)

    assert live(fleet, "m131") is None
    target = run.targets.get()
    assert (target.state, target.reason) == (TargetState.FAILED, PropagationReason.CLUSTER_ISOLATED)
    assert "P0 skew" in target.message
    pv = PropagatedVersion.objects.get(resource=resource, cluster__name="m131")
    assert pv.status == PropagationReason.CLUSTER_ISOLATED


def test_a_placement_change_removes_nothing_from_an_isolated_cluster(fleet, clusters, admin_user):
    resource = web_deployment(placement={"clusters": MEMBERS}, retention=Retention.DELETE)
    drain(propagation.propagate_revision(resource))
    isolate_cluster(clusters["m131"], actor=admin_user, reason="broken")
    services.update_resource(resource, template=WEB_TEMPLATE, placement={"clusters": ["m128"]})
    resource.refresh_from_db()

    run = propagation.propagate_revision(resource)
    drain(run)

    assert live(fleet, "m131") is not None
    assert run.targets.get(cluster__name="m131").reason == PropagationReason.CLUSTER_ISOLATED
    # lifted: the next propagation removes it, as the approved placement says
    restore_cluster(clusters["m131"], actor=admin_user)
    drain(propagation.propagate_revision(resource))
    assert live(fleet, "m131") is None
