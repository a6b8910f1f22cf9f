"""When a MachineDeployment counts as still rolling out: Cluster API's own rule (the topology
controller's MachineDeploymentState.IsRollingOut over mdutil.DeploymentComplete, cluster-api
internal/controllers/topology/cluster/scope/state.go and internal/controllers/machinedeployment/mdutil,
Apache-2.0), carried over here as a table. A new upgrade is refused while one rolls; an upgrade's
MachineDeployment step is done by the same rule (drift.upgrades)."""

import pytest

from clusters.models import machine_deployment_rolling_out
from drift import upgrades
from tests.clusters.factories import ClusterFactory
from tests.drift.test_upgrades import capi_managed

DONE = dict(
    replicas=3,
    statusReplicas=3,
    updatedReplicas=3,
    readyReplicas=3,
    availableReplicas=3,
    unavailableReplicas=0,
    generation=2,
    observedGeneration=2,
)


@pytest.mark.parametrize(
    "change,rolling",
    [
        ({}, False),  # complete
        ({"observedGeneration": 3}, False),  # observedGeneration >= generation
        ({"observedGeneration": 1}, True),  # a new spec the controller has not acted on yet
        ({"updatedReplicas": 2}, True),  # a replica still on the old template
        ({"statusReplicas": 4}, True),  # a surge machine not yet removed
        ({"availableReplicas": 2}, True),
        ({"readyReplicas": 2}, True),
        ({"unavailableReplicas": 1}, True),
    ],
)
def test_a_machine_deployment_rolls_out_until_cluster_api_calls_it_complete(change, rolling):
    assert machine_deployment_rolling_out({**DONE, **change}) is rolling


@pytest.mark.django_db
def test_no_upgrade_starts_while_a_machine_deployment_has_a_spec_its_controller_has_not_observed(operator):
    member = ClusterFactory(name="md-stale")
    managed = capi_managed(member, "v1.29.4", {"md-stale-md-0": "v1.29.4"})
    # its template was just changed: the status still counts the old one's machines as updated
    managed.machine_deployments[0].update(generation=5, observedGeneration=4)
    managed.save()
    with pytest.raises(upgrades.UpgradeRefused, match="still rolling"):
        upgrades.request_upgrade(member, "v1.30.0", actor=operator)
