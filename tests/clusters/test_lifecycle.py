"""Lifecycle from Cluster API: the poll of a management cluster finds its CAPI Clusters, links them to
the registered members, and records the Machines' kubelets while a roll goes on (real simulator)."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse

from clusters import kube, lifecycle
from clusters.models import Cluster, ManagedCluster
from clusters.probing import probe_cluster
from clusters.services import register_cluster
from clusters.services.connections import connection_for
from drift import selectors
from fedportal.models import AuditEvent

pytestmark = pytest.mark.django_db(transaction=True)

CAPI_FLEET = {
    # each Machine provisions for this long: long enough that the roll test's sampling (a refresh,
    # several requests, then 0.2 s) sees a Machine Provisioning and mixed kubelets on a busy host
    # (with 0.5 s it missed them once while another test run shared the cores)
    "defaults": {"machineSeconds": 1.5},
    "clusters": [
        {"name": "host", "role": "host", "version": "v1.30.2", "capi": True},
        {
            "name": "w1",
            "version": "v1.30.2",
            "managedBy": "host",
            "controlPlane": {"replicas": 1},
            "machineDeployments": [{"name": "md-0", "replicas": 2}],
        },
        {"name": "w2", "version": "v1.29.4", "managedBy": "host", "machineDeployments": []},
        {"name": "plain", "version": "v1.29.4"},
    ],
}


def _register(fleet, names):
    rows = {}
    for name in names:
        rows[name] = register_cluster(
            name=name,
            api_server=fleet.url(name),
            role="host" if name == "host" else "member",
            token=fleet.token(name),
            verify=False,
            probe=False,
        )
    for row in rows.values():
        probe_cluster(row)
    return {name: Cluster.objects.get(pk=row.pk) for name, row in rows.items()}


@pytest.fixture
def capi(fleet_factory):
    fleet = fleet_factory(CAPI_FLEET)
    return fleet, _register(fleet, ["host", "w1", "plain"])


def test_poll_discovers_capi_clusters_and_links_by_name(capi):
    fleet, rows = capi
    assert lifecycle.is_management(rows["host"]) and not lifecycle.is_management(rows["w1"])
    found = {m.name: m for m in ManagedCluster.objects.all()}
    assert set(found) == {"w1", "w2"}
    assert found["w1"].member_id == rows["w1"].pk and found["w1"].link_source == "name"
    assert found["w2"].member is None  # not registered
    data = lifecycle.lifecycle_json(rows["w1"])
    assert data["controlPlane"] == {"version": "v1.30.2", "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1}
    assert [(md["name"], md["version"], md["replicas"]) for md in data["machineDeployments"]] == [
        ("w1-md-0", "v1.30.2", 2)
    ]
    assert len(data["machines"]) == 3 and {m["phase"] for m in data["machines"]} == {"Running"}
    assert set(data["machines"][0]) == {"name", "phase", "version"}
    with pytest.raises(lifecycle.LifecycleError, match="not managed by Cluster API"):
        lifecycle.lifecycle_json(rows["plain"])


def test_a_roll_is_recorded_with_mixed_kubelets(capi):
    fleet, rows = capi
    fleet.set_version("w1", "v1.30.2")
    conn = connection_for(rows["host"])
    # workers one minor behind first, then rolled forward: mixed kubelets while it goes
    kube.merge_patch_object(
        conn,
        api_version=lifecycle.CAPI_GV,
        plural="machinedeployments",
        namespace="default",
        name="w1-md-0",
        patch={"spec": {"template": {"spec": {"version": "v1.29.4"}}}},
    )
    seen_mixed, phases = False, set()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lifecycle.refresh(Cluster.objects.get(pk=rows["host"].pk))
        member = Cluster.objects.get(pk=rows["w1"].pk)
        workers = {n: v for n, v in member.kubelet_versions.items() if "md-0" in n}
        phases |= {m["phase"] for m in ManagedCluster.objects.get(name="w1").machines}
        if len(set(workers.values())) > 1:
            seen_mixed = True
            kubelets = {r.name: r for r in selectors.skew_overview().member_rows}["w1"].kubelets
            assert (kubelets.oldest.minor, kubelets.newest.minor) == (29, 30)
        if workers and set(workers.values()) == {"v1.29.4"} and len(workers) == 2:
            break
        time.sleep(0.2)
    assert seen_mixed and {"Provisioning", "Running"} <= phases
    row = ManagedCluster.objects.get(name="w1")
    assert not row.rolling and row.machine_deployments[0]["version"] == "v1.29.4"


def test_lifecycle_page_and_manual_link(capi, client, viewer, operator, admin_user):
    fleet, rows = capi
    client.force_login(viewer)
    page = client.get(reverse("clusters:lifecycle")).content.decode()
    assert "w1-control-plane" in page and "w1-md-0" in page and "Running" in page
    detail = client.get(reverse("clusters:cluster_detail", args=[rows["w1"].pk])).content.decode()
    assert "Lifecycle" in detail and "w1-md-0" in detail
    w2 = ManagedCluster.objects.get(name="w2")
    assert (
        client.post(reverse("clusters:lifecycle_link", args=[w2.pk]), {"member": rows["plain"].pk}).status_code == 403
    )
    # an operator neither: the link decides which control plane an upgrade of "plain" patches
    client.force_login(operator)
    assert "Link to" not in client.get(reverse("clusters:lifecycle")).content.decode()
    assert (
        client.post(reverse("clusters:lifecycle_link", args=[w2.pk]), {"member": rows["plain"].pk}).status_code == 403
    )
    assert ManagedCluster.objects.get(pk=w2.pk).member_id != rows["plain"].pk
    client.force_login(admin_user)
    assert "Link to" in client.get(reverse("clusters:lifecycle")).content.decode()
    client.post(reverse("clusters:lifecycle_link", args=[w2.pk]), {"member": rows["plain"].pk})
    w2.refresh_from_db()
    assert w2.member_id == rows["plain"].pk and w2.link_source == "manual"
    assert AuditEvent.objects.filter(action="cluster.lifecycle_link").count() == 1
    # a manual link survives the next poll; linking a cluster already linked elsewhere is refused
    lifecycle.refresh(Cluster.objects.get(pk=rows["host"].pk))
    w2.refresh_from_db()
    assert w2.member_id == rows["plain"].pk
    w1 = ManagedCluster.objects.get(name="w1")
    client.post(reverse("clusters:lifecycle_link", args=[w1.pk]), {"member": rows["plain"].pk})
    w1.refresh_from_db()
    assert w1.member_id == rows["w1"].pk
    assert AuditEvent.objects.filter(action="cluster.lifecycle_link").count() == 1


def test_a_stored_api_server_with_a_port_out_of_range_does_not_stop_the_refresh(capi):
    """A row stored before the port check (``https://10.9.9.9:99999``, which the API took with
    ``verify: false``) made every management cluster's refresh fail with "Port out of range"."""
    fleet, rows = capi
    ManagedCluster.objects.update(member=None, link_source="")
    Cluster.objects.bulk_create([Cluster(name="bad-port", api_server="https://10.9.9.9:99999")])
    found = {m.name: m for m in lifecycle.refresh(rows["host"])}
    assert found["w1"].member_id == rows["w1"].pk


def test_the_poll_keeps_nodes_no_machine_backs_and_the_probe_and_poll_stop_writing_in_turn(capi):
    """A node added outside Cluster API is seen by the member's probe, not by its Machines: the poll
    wrote the Machines' nodes only, the probe all of them, each time a version sample (a reviewer's
    finding: the two wrote the member's nodes in turn)."""
    from clusters.models import VersionSample

    fleet, rows = capi
    member = Cluster.objects.get(pk=rows["w1"].pk)
    machines = dict(member.kubelet_versions)
    assert len(machines) == 3
    Cluster.objects.filter(pk=member.pk).update(kubelet_versions={**machines, "byo-1": "v1.29.4"})
    samples = VersionSample.objects.filter(cluster=member).count()
    for _ in range(2):
        lifecycle.refresh(rows["host"])
    member.refresh_from_db()
    assert member.kubelet_versions == {**machines, "byo-1": "v1.29.4"}
    assert VersionSample.objects.filter(cluster=member).count() == samples
    # a Machine's node the poll saw before and no longer lists is dropped, the others stay
    kept = sorted(machines)[0]
    row = ManagedCluster.objects.get(member=member)
    row.machines = [*row.machines, {"name": "old", "nodeName": "old-node", "kubelet": "v1.29.4", "phase": "Running"}]
    row.save(update_fields=["machines"])
    Cluster.objects.filter(pk=member.pk).update(
        kubelet_versions={**machines, "byo-1": "v1.29.4", "old-node": "v1.29.4"}
    )
    lifecycle.refresh(rows["host"])
    member.refresh_from_db()
    assert "old-node" not in member.kubelet_versions and kept in member.kubelet_versions
    assert "byo-1" in member.kubelet_versions
