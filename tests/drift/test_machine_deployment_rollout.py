"""When a MachineDeployment counts as still rolling out: Cluster API's own rule (the topology
controller's MachineDeploymentState.IsRollingOut over mdutil.DeploymentComplete, cluster-api
internal/controllers/topology/cluster/scope/state.go and internal/controllers/machinedeployment/mdutil,
Apache-2.0), carried over here as a table. A new upgrade is refused while one rolls; an upgrade's
MachineDeployment step is done by the same rule (drift.upgrades)."""

import pytest

from clusters.models import ManagedCluster, machine_deployment_rolling_out
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
    with pytest.raises(upgrades.UpgradeRefused, match="still rolling") as refused:
        upgrades.request_upgrade(member, "v1.30.0", actor=operator)
    # the refusal says what is rolling, so an operator knows what to wait for (or to fix)
    assert "MachineDeployment md-stale-md-0" in str(refused.value)
    assert "latest spec not yet observed" in str(refused.value)


def test_what_is_still_rolling_is_named():
    managed = ManagedCluster(
        control_plane={"name": "east-cp", "replicas": 3, "updatedReplicas": 2, "readyReplicas": 3},
        machines=[{"name": "east-cp-abc", "phase": "Provisioning"}, {"name": "east-cp-def", "phase": "Running"}],
        machine_deployments=[
            {**DONE, "name": "md-done"},
            {**DONE, "name": "md-0", "statusReplicas": 4, "updatedReplicas": 2, "unavailableReplicas": 1},
        ],
    )
    assert managed.rolling and managed.rolling_reasons == [
        "control plane east-cp: 2 of 3 machines updated, 3 ready",
        "Machine east-cp-abc is Provisioning",
        "MachineDeployment md-0: 2 of 3 updated, 3 available, 3 ready, 4 machines for 3 wanted, 1 unavailable",
    ]
    assert not ManagedCluster(machine_deployments=[{**DONE, "name": "md-done"}]).rolling
