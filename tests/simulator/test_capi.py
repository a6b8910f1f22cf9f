"""A Cluster API management cluster: CAPI's CRDs served with their schemas, and its controller
rolling control planes and MachineDeployments (clusters/simulator/capi.py)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from clusters.simulator.capi import scaled
from clusters.simulator.fleet import FleetSpecError, generate_fleet, parse_fleet
from tests.fleet_fixtures import start_fleet
from tests.simulator.conftest import make_client

KUBECTL = "/usr/bin/kubectl"
CAPI_FLEET = {
    # each Machine provisions (and is deleted) for this long: the roll test samples phases by polling
    # (a client, three requests, 0.1 s), and on a loaded host 0.4 s windows could all fall between samples
    "defaults": {"machineSeconds": 1.0},
    "clusters": [
        {"name": "mgmt", "role": "host", "version": "v1.30.2", "capi": True},
        {
            "name": "w1",
            "version": "v1.29.4",
            "managedBy": "mgmt",
            "labels": {"region": "eu-west-1"},
            "controlPlane": {"replicas": 3},
            "machineDeployments": [{"name": "md-0", "replicas": 3}, {"name": "md-1", "replicas": 2}],
        },
        {"name": "plain", "version": "v1.29.4"},
    ],
}


@pytest.fixture(scope="module")
def capi_fleet(tmp_path_factory):
    running = start_fleet(CAPI_FLEET, workdir=tmp_path_factory.mktemp("capi-fleet"), tls=True)
    yield running
    running.stop()


@pytest.fixture
def mgmt(capi_fleet):
    c = make_client(capi_fleet, "mgmt")
    yield client.CustomObjectsApi(c)
    c.close()


def _list(api, plural, group="cluster.x-k8s.io"):
    return api.list_namespaced_custom_object(group, "v1beta1", "default", plural)["items"]


def _nodes(fleet, name):
    c = make_client(fleet, name)
    try:
        return {n.metadata.name: n.status.node_info.kubelet_version for n in client.CoreV1Api(c).list_node().items}
    finally:
        c.close()


def _wait(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


@pytest.mark.parametrize(
    ("value", "up", "down"),
    [(2, 2, 2), ("3", 3, 3), ("25%", 2, 1), ("0%", 0, 0), ("²", 1, 0), ("²%", 1, 0), ("x%", 1, 0)],
)
def test_max_surge_and_unavailable_scale_like_intstr(value, up, down):
    # "²" passes str.isdigit() but int() refuses it: the rollout loop raised; a value that is not a
    # number is the default instead, as before for any other string
    assert (scaled(value, 6, round_up=True), scaled(value, 6, round_up=False)) == (up, down)


def test_fleet_file_capi_shape_and_errors():
    spec = parse_fleet(CAPI_FLEET)
    w1 = spec.clusters[1]
    assert spec.clusters[0].capi and w1.managed_by == "mgmt"
    assert w1.control_plane_replicas == 3 and w1.machine_deployments == [("md-0", 3), ("md-1", 2)]
    assert w1.machine_seconds == CAPI_FLEET["defaults"]["machineSeconds"] and w1.nodes == []
    bad = [
        ({"managedBy": "plain"}, "is not a cluster of the fleet with capi: true"),
        ({"managedBy": "nowhere"}, "is not a cluster of the fleet with capi: true"),
        ({"managedBy": "mgmt", "controlPlane": {"replicas": 2}}, "odd number"),
        ({"controlPlane": {"replicas": 3}}, "needs managedBy"),
        ({"managedBy": "mgmt", "machineDeployments": [{"name": "Bad_Name"}]}, "DNS-label"),
        ({"managedBy": "mgmt", "machineSeconds": -1}, "machineSeconds"),
    ]
    for extra, message in bad:
        raw = {
            **CAPI_FLEET,
            "clusters": [
                CAPI_FLEET["clusters"][0],
                CAPI_FLEET["clusters"][2],
                {"name": "x", "version": "v1.29.4", **extra},
            ],
        }
        with pytest.raises(FleetSpecError, match=message):
            parse_fleet(raw)
    generated = generate_fleet(4, "1.28-1.29", capi=True)
    assert generated.clusters[0].capi
    assert all(c.managed_by == "host" and c.machine_deployments == [("md-0", 2)] for c in generated.clusters[1:])


def test_crds_are_served_with_their_schemas(capi_fleet, mgmt):
    c = make_client(capi_fleet, "mgmt")
    try:
        groups = {g.name: g for g in client.ApisApi(c).get_api_versions().groups}
        assert groups["cluster.x-k8s.io"].preferred_version.version == "v1beta1"
        assert "controlplane.cluster.x-k8s.io" in groups
        crds = client.ApiextensionsV1Api(c).list_custom_resource_definition().items
        names = {crd.metadata.name for crd in crds}
        assert {"machinedeployments.cluster.x-k8s.io", "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io"} <= names
    finally:
        c.close()
    (cluster,) = _list(mgmt, "clusters")
    assert cluster["status"]["phase"] == "Provisioned"
    assert cluster["spec"]["controlPlaneRef"]["kind"] == "KubeadmControlPlane"
    # the schema is enforced: a MachineDeployment without its required template is 422 Invalid
    with pytest.raises(ApiException) as exc:
        mgmt.create_namespaced_custom_object(
            "cluster.x-k8s.io",
            "v1beta1",
            "default",
            "machinedeployments",
            {
                "apiVersion": "cluster.x-k8s.io/v1beta1",
                "kind": "MachineDeployment",
                "metadata": {"name": "broken"},
                "spec": {"clusterName": "w1", "selector": {}},
            },
        )
    assert exc.value.status == 422 and "spec.template" in exc.value.body
    with pytest.raises(ApiException) as exc:
        mgmt.patch_namespaced_custom_object(
            "cluster.x-k8s.io",
            "v1beta1",
            "default",
            "machinedeployments",
            "w1-md-0",
            {"spec": {"strategy": {"type": "Recreate"}}},
        )
    assert exc.value.status == 422 and "Unsupported value" in exc.value.body
    # the plain member serves no Cluster API
    plain = make_client(capi_fleet, "plain")
    try:
        assert "cluster.x-k8s.io" not in {g.name for g in client.ApisApi(plain).get_api_versions().groups}
    finally:
        plain.close()


def test_managed_cluster_nodes_are_its_machines(capi_fleet, mgmt):
    machines = _list(mgmt, "machines")
    assert len(machines) == 8 and {m["status"]["phase"] for m in machines} == {"Running"}
    assert set(_nodes(capi_fleet, "w1")) == {m["metadata"]["name"] for m in machines}
    (kcp,) = _list(mgmt, "kubeadmcontrolplanes", "controlplane.cluster.x-k8s.io")
    assert kcp["status"]["replicas"] == kcp["status"]["readyReplicas"] == kcp["status"]["updatedReplicas"] == 3
    assert kcp["status"]["version"] == "v1.29.4"
    mds = {md["metadata"]["name"]: md for md in _list(mgmt, "machinedeployments")}
    assert mds["w1-md-0"]["status"]["phase"] == "Running" and mds["w1-md-0"]["status"]["readyReplicas"] == 3


def test_control_plane_rolls_one_at_a_time_then_version_changes(capi_fleet, mgmt):
    mgmt.patch_namespaced_custom_object(
        "controlplane.cluster.x-k8s.io",
        "v1beta1",
        "default",
        "kubeadmcontrolplanes",
        "w1-control-plane",
        {"spec": {"version": "v1.30.2"}},
    )
    seen_counts, versions_seen = set(), set()

    def done():
        cp = [m for m in _list(mgmt, "machines") if "cluster.x-k8s.io/control-plane" in m["metadata"]["labels"]]
        seen_counts.add(len(cp))
        versions_seen.add(capi_fleet.version("w1"))
        return len(cp) == 3 and all(m["spec"]["version"] == "v1.30.2" and m["status"]["phase"] == "Running" for m in cp)

    _wait(done)
    assert max(seen_counts) == 4  # surge one, never more
    assert _wait(lambda: capi_fleet.version("w1") == "v1.30.2")
    (kcp,) = _list(mgmt, "kubeadmcontrolplanes", "controlplane.cluster.x-k8s.io")
    conditions = {c["type"]: c["status"] for c in kcp["status"]["conditions"]}
    assert conditions["MachinesSpecUpToDate"] == "True" and kcp["status"]["version"] == "v1.30.2"
    cp_nodes = {n: v for n, v in _nodes(capi_fleet, "w1").items() if "control-plane" in n}
    assert set(cp_nodes.values()) == {"v1.30.2"} and len(cp_nodes) == 3


def test_machine_deployment_rolls_per_strategy_with_mixed_kubelets(capi_fleet, mgmt):
    mgmt.patch_namespaced_custom_object(
        "cluster.x-k8s.io",
        "v1beta1",
        "default",
        "machinedeployments",
        "w1-md-0",
        {
            "spec": {
                "strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
                "template": {"spec": {"version": "v1.30.2"}},
            }
        },
    )
    mixed, totals, phases = False, set(), set()

    def done():
        nonlocal mixed
        workers = {n: v for n, v in _nodes(capi_fleet, "w1").items() if n.startswith("w1-md-0")}
        mixed = mixed or len(set(workers.values())) > 1
        machines = [m for m in _list(mgmt, "machines") if m["metadata"]["name"].startswith("w1-md-0")]
        totals.add(len(machines))
        phases.update(m["status"].get("phase") for m in machines)
        md = mgmt.get_namespaced_custom_object(
            "cluster.x-k8s.io", "v1beta1", "default", "machinedeployments", "w1-md-0"
        )
        status = md["status"]
        return (
            status.get("updatedReplicas") == 3
            and status.get("readyReplicas") == 3
            and status.get("replicas") == 3
            and set(workers.values()) == {"v1.30.2"}
            and status
        )

    status = _wait(done)
    assert mixed  # old and new kubelets side by side during the roll
    assert max(totals) <= 3  # maxSurge 0: never more machines than replicas
    assert {"Provisioning", "Running", "Deleting"} <= phases
    assert status["phase"] == "Running"
    sets = [
        ms
        for ms in _list(mgmt, "machinesets")
        if ms["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"] == "w1-md-0"
    ]
    assert len(sets) == 1 and sets[0]["spec"]["template"]["spec"]["version"] == "v1.30.2"
    # md-1 was left alone
    assert {v for n, v in _nodes(capi_fleet, "w1").items() if n.startswith("w1-md-1")} == {"v1.29.4"}


def test_stuck_machines_stay_provisioning(capi_fleet, mgmt):
    capi_fleet.admin("POST", "/clusters/w1/capi", {"machinesStuck": True})
    try:
        mgmt.patch_namespaced_custom_object(
            "cluster.x-k8s.io",
            "v1beta1",
            "default",
            "machinedeployments",
            "w1-md-1",
            {"spec": {"template": {"spec": {"version": "v1.30.2"}}}},
        )
        time.sleep(1.5)
        machines = [m for m in _list(mgmt, "machines") if m["metadata"]["name"].startswith("w1-md-1")]
        assert sorted(m["status"]["phase"] for m in machines) == ["Provisioning", "Running", "Running"]
    finally:
        capi_fleet.admin("POST", "/clusters/w1/capi", {"machinesStuck": False})
    _wait(lambda: {v for n, v in _nodes(capi_fleet, "w1").items() if n.startswith("w1-md-1")} == {"v1.30.2"})
    with pytest.raises(Exception, match="not managed"):
        capi_fleet.admin("POST", "/clusters/plain/capi", {"machinesStuck": True})


@pytest.mark.kubectl
@pytest.mark.skipif(not os.path.exists(KUBECTL), reason="kubectl not installed")
def test_kubectl_gets_capi_objects(capi_fleet):
    out = subprocess.run(
        [
            KUBECTL,
            "--kubeconfig",
            str(capi_fleet.kubeconfig_path),
            "--context",
            "mgmt",
            "get",
            "clusters,machinedeployments,machines,kcp",
            "-A",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "cluster.cluster.x-k8s.io/w1" in out and "machinedeployment.cluster.x-k8s.io/w1-md-0" in out
    assert "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/w1-control-plane" in out
    assert "Running" in out


@pytest.mark.parametrize("version", ["v1.029.0", "1.30.2", "skip two minors"])
def test_cluster_api_webhooks_refuse_what_they_refuse(mgmt, version):
    """Cluster API's admission: a version must be a KubeSemver (util/version: "v" and no leading
    zeros) and a control plane goes up one minor at a time (the KubeadmControlPlane webhook); a
    refused write changes nothing."""
    group, plural, name = "controlplane.cluster.x-k8s.io", "kubeadmcontrolplanes", "w1-control-plane"
    current = mgmt.get_namespaced_custom_object(group, "v1beta1", "default", plural, name)["spec"]["version"]
    if version == "skip two minors":
        minor = int(current.split(".")[1])
        version, reason = (
            f"v1.{minor + 2}.0",
            f"Forbidden: cannot update Kubernetes version from {current} to v1.{minor + 2}.0",
        )
    else:
        reason = "must be a valid semantic version"
    with pytest.raises(ApiException) as refused:
        mgmt.patch_namespaced_custom_object(group, "v1beta1", "default", plural, name, {"spec": {"version": version}})
    assert refused.value.status == 422 and reason in refused.value.body
    assert mgmt.get_namespaced_custom_object(group, "v1beta1", "default", plural, name)["spec"]["version"] == current
    with pytest.raises(ApiException) as md_refused:
        mgmt.patch_namespaced_custom_object(
            "cluster.x-k8s.io",
            "v1beta1",
            "default",
            "machinedeployments",
            "w1-md-0",
            {"spec": {"template": {"spec": {"version": "1.29.4"}}}},
        )
    assert md_refused.value.status == 422 and "must be a valid semantic version" in md_refused.value.body
