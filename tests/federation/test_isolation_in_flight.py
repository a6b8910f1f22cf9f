"""Nothing reaches an isolated cluster (a review of the detect -> isolate -> repair loop): not a
target already queued or waiting for its retry when the cluster was isolated, and not a removal
planned because the placement no longer names it. Once the isolation is lifted, the reconcile
sweep repeats what was approved, removals included (a second review found removals held back for
ever)."""

import pytest

from drift.services import isolate_cluster, restore_cluster
from federation import propagation, services
from federation.choices import PropagationReason, Retention, TargetState
from federation.models import PropagatedVersion
from federation.propagation.sweep import reconcile_waiting_clusters
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
    assert (target.state, target.reason) == (TargetState.DONE, PropagationReason.CLUSTER_ISOLATED)
    assert "P0 skew" in target.message
    pv = PropagatedVersion.objects.get(resource=resource, cluster__name="m131")
    assert pv.status == PropagationReason.CLUSTER_ISOLATED
    # lifted: the reconcile sweep applies what was approved
    restore_cluster(clusters["m131"], actor=admin_user)
    reconcile_and_drain(resource)
    assert live(fleet, "m131") is not None


def reconcile_and_drain(resource):
    reconcile_waiting_clusters()
    for run in resource.runs.all():
        drain(run)


@pytest.mark.parametrize("when", ["planned", "queued"])
def test_a_removal_held_back_by_isolation_is_made_once_it_is_lifted(fleet, clusters, admin_user, settings, when):
    settings.FEDERATION_RETRY_BASE_SECONDS = 0.1
    resource = web_deployment(placement={"clusters": MEMBERS}, retention=Retention.DELETE)
    drain(propagation.propagate_revision(resource))
    services.update_resource(resource, template=WEB_TEMPLATE, placement={"clusters": ["m128"]})
    resource.refresh_from_db()
    if when == "planned":
        isolate_cluster(clusters["m131"], actor=admin_user, reason="broken")
        drain(propagation.propagate_revision(resource))
    else:  # the delete waits for its retry when the cluster is isolated
        fleet.set_down("m131")
        run = propagation.propagate_revision(resource)
        drain(run, rounds=1)
        isolate_cluster(clusters["m131"], actor=admin_user, reason="broken")
        fleet.set_up("m131")
        drain(run)
    assert live(fleet, "m131") is not None
    assert PropagatedVersion.objects.get(resource=resource, cluster__name="m131").status == (
        PropagationReason.CLUSTER_ISOLATED
    )

    restore_cluster(clusters["m131"], actor=admin_user)
    reconcile_and_drain(resource)

    assert live(fleet, "m131") is None
    assert PropagatedVersion.objects.get(resource=resource, cluster__name="m131").status == PropagationReason.REMOVED


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


def test_an_approved_unjoins_removal_reaches_an_isolated_cluster(fleet, clusters, admin_user):
    """Isolate, then let it go: the unjoin's removals are what its admin decided for that cluster."""
    resource = web_deployment(placement={"clusters": MEMBERS}, retention=Retention.DELETE)
    drain(propagation.propagate_revision(resource))
    isolate_cluster(clusters["m131"], actor=admin_user, reason="decommissioning")

    drain(propagation.remove_from_cluster(resource, cluster=clusters["m131"]))

    assert live(fleet, "m131") is None and live(fleet, "m128") is not None
    assert PropagatedVersion.objects.get(resource=resource, cluster__name="m131").status == PropagationReason.REMOVED
