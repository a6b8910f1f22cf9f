"""What a fleet poll reads (clusters/probing.py): /version at every poll; /readyz and the node list
only when the inventory is due. Against the fleet simulator, no mocks."""

from datetime import timedelta

import pytest
from django.utils import timezone

from clusters import kube, probing, services
from clusters.choices import ClusterState
from clusters.models import Cluster, VersionSample
from tests.fleet_fixtures import DEFAULT_FLEET

pytestmark = pytest.mark.django_db


@pytest.fixture
def own_fleet(fleet_factory):
    return fleet_factory(DEFAULT_FLEET)  # its nodes are edited: not the module's shared fleet


def register(fleet, name: str) -> Cluster:
    return services.register_cluster(name=name, api_server=fleet.url(name), token=fleet.token(name), labels={})


def poll(cluster: Cluster) -> Cluster:
    [outcome] = probing.probe_clusters([cluster.pk])
    assert not outcome.skipped
    return Cluster.objects.get(pk=cluster.pk)


def age_inventory(cluster: Cluster, seconds: float) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(inventory_at=timezone.now() - timedelta(seconds=seconds))


def test_first_poll_reads_the_inventory_and_later_polls_only_the_version(own_fleet, settings):
    settings.FEDPORTAL_INVENTORY_REFRESH_SECONDS = 60
    cluster = poll(register(own_fleet, "m128"))
    assert cluster.state == ClusterState.READY and cluster.inventory_at is not None
    assert set(cluster.kubelet_versions.values()) == {"v1.28.2"}
    first_inventory = cluster.inventory_at

    own_fleet.set_kubelet_version("m128", "v1.28.9")
    cluster = poll(cluster)
    # a poll between refreshes: probed, still Ready, the node list not read again
    assert cluster.last_probe_at > first_inventory and cluster.state == ClusterState.READY
    assert cluster.inventory_at == first_inventory
    assert set(cluster.kubelet_versions.values()) == {"v1.28.2"}

    age_inventory(cluster, 61)
    cluster = poll(cluster)
    assert set(cluster.kubelet_versions.values()) == {"v1.28.9"}
    assert cluster.inventory_at > first_inventory
    assert VersionSample.objects.filter(cluster=cluster).count() == 2  # the kubelet change is a sample


def test_an_upgrade_reads_the_nodes_at_once(own_fleet, settings):
    settings.FEDPORTAL_INVENTORY_REFRESH_SECONDS = 3600
    cluster = poll(register(own_fleet, "m130"))
    own_fleet.set_version("m130", "v1.31.2")
    own_fleet.set_kubelet_version("m130", "v1.31.2")
    cluster = poll(cluster)
    assert cluster.server_version == "v1.31.2" and cluster.version_minor == 31
    assert set(cluster.kubelet_versions.values()) == {"v1.31.2"}
    assert VersionSample.objects.filter(cluster=cluster, git_version="v1.31.2").exists()


def test_rejected_credentials_are_seen_by_a_version_only_poll(own_fleet, settings):
    settings.FEDPORTAL_INVENTORY_REFRESH_SECONDS = 3600
    cluster = poll(register(own_fleet, "m131"))
    cluster.set_credentials({"token": "revoked"})
    cluster.save(update_fields=["credentials_encrypted"])
    cluster = poll(cluster)
    assert cluster.state == ClusterState.NOT_READY
    assert "401" in cluster.last_error or "Unauthorized" in cluster.last_error


def test_a_cluster_that_is_not_ready_reads_readyz_until_it_recovers(own_fleet, settings):
    settings.FEDPORTAL_INVENTORY_REFRESH_SECONDS = 3600
    cluster = poll(register(own_fleet, "m127"))
    inventory = cluster.inventory_at
    own_fleet.set_down("m127", mode="503")
    cluster = poll(cluster)
    assert cluster.state == ClusterState.NOT_READY
    own_fleet.set_up("m127")
    cluster = poll(cluster)
    # back to Ready only through a full probe (readyz ok, nodes read again)
    assert cluster.state == ClusterState.READY and cluster.inventory_at > inventory


def test_refresh_zero_reads_the_inventory_at_every_poll(own_fleet, settings):
    settings.FEDPORTAL_INVENTORY_REFRESH_SECONDS = 0
    cluster = poll(register(own_fleet, "m128"))
    own_fleet.set_kubelet_version("m128", "v1.28.9")
    assert set(poll(cluster).kubelet_versions.values()) == {"v1.28.9"}


def test_refreshes_spread_over_the_period(settings):
    settings.FEDPORTAL_INVENTORY_REFRESH_SECONDS = 60
    now = timezone.now()
    due_after = []
    for pk in range(1, 101):
        cluster = Cluster(pk=pk, state=ClusterState.READY, server_version="v1.30.1", inventory_at=now)
        version = kube.VersionInfo(git_version="v1.30.1", major=1, minor=30, platform="linux/amd64")
        due_after.append(
            next(s for s in range(0, 61) if probing.inventory_due(cluster, version, now + timedelta(seconds=s)))
        )
    assert min(due_after) >= 30 and max(due_after) <= 60
    assert len(set(due_after)) >= 10  # not one poll for the whole fleet
