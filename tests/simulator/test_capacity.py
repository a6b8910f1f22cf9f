"""Per-cluster schedulable capacity: a Deployment on a full cluster reports fewer ready/available replicas."""

import time

import pytest
from django.core.management import call_command
from kubernetes import client

from clusters.simulator.fleet import FleetSpecError, parse_fleet
from clusters.simulator.kubeconfig import state_path_for
from tests.fleet_fixtures import start_fleet
from tests.simulator.conftest import make_client


def test_capacity_is_a_fleet_file_field_with_a_default():
    spec = parse_fleet(
        {
            "defaults": {"version": "v1.29.4", "capacity": 5},
            "clusters": [{"name": "a"}, {"name": "b", "capacity": None}, {"name": "c", "capacity": 0}],
        }
    )
    assert [c.capacity for c in spec.clusters] == [5, None, 0]
    assert parse_fleet({"clusters": [{"name": "a", "version": "v1.29.4"}]}).clusters[0].capacity is None


@pytest.mark.parametrize("bad", [-1, "3", 2.5, True])
def test_bad_capacity_is_refused(bad):
    with pytest.raises(FleetSpecError, match="capacity must be a whole number >= 0 or null"):
        parse_fleet({"clusters": [{"name": "a", "version": "v1.29.4", "capacity": bad}]})


def deployment(name, replicas):
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }


def test_a_full_cluster_leaves_replicas_unready_and_fleetctl_switches_capacity(tmp_path):
    fleet = start_fleet(
        {"defaults": {"rolloutSeconds": 0.2}, "clusters": [{"name": "full", "version": "v1.29.4", "capacity": 3}]},
        workdir=tmp_path,
    )
    try:
        api = client.AppsV1Api(make_client(fleet, "full"))
        api.create_namespaced_deployment("default", deployment("one", 2))
        time.sleep(0.5)
        assert api.read_namespaced_deployment("one", "default").status.ready_replicas == 2
        api.create_namespaced_deployment("default", deployment("two", 2))
        time.sleep(0.5)
        status = api.read_namespaced_deployment("two", "default").status
        assert (status.replicas, status.ready_replicas, status.available_replicas, status.unavailable_replicas) == (
            2,
            1,
            1,
            1,
        )
        available = next(c for c in status.conditions if c.type == "Available")
        progressing = next(c for c in status.conditions if c.type == "Progressing")
        assert (available.status, available.reason) == ("False", "MinimumReplicasUnavailable")
        assert progressing.reason == "ReplicaSetUpdated"
        state = str(state_path_for(fleet.kubeconfig_path))
        call_command("fleetctl", "--state", state, "capacity", "full", "none")
        assert fleet.admin("GET", "/clusters/full/")["capacity"] is None
        api.patch_namespaced_deployment("two", "default", {"spec": {"replicas": 3}})
        time.sleep(0.5)
        assert api.read_namespaced_deployment("two", "default").status.ready_replicas == 3
        call_command("fleetctl", "--state", state, "capacity", "full", "4")
        assert fleet.admin("GET", "/clusters/full/")["capacity"] == 4
    finally:
        fleet.stop()
