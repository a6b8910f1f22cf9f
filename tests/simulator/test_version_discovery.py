"""/version, health endpoints and discovery per Kubernetes version, through the official client."""

import urllib.request

import pytest
from kubernetes import client

from tests.simulator.conftest import CONTRACT_FLEET, make_client


@pytest.mark.parametrize("spec", CONTRACT_FLEET["clusters"], ids=lambda c: c["name"])
def test_version_parses_into_version_info_with_every_field(sim, api, spec):
    info = client.VersionApi(api(spec["name"])).get_code()
    assert info.git_version == spec["version"]
    assert info.major == "1"
    assert info.minor == spec["version"].split(".")[1]
    for field in ("build_date", "compiler", "git_commit", "git_tree_state", "go_version", "platform"):
        assert getattr(info, field)


def test_version_from_133_carries_emulation_fields(fleet_factory):
    running = fleet_factory({"clusters": [{"name": "new", "version": "v1.33.1"}]})
    config = client.Configuration(host=running.url("new"))
    config.api_key = {"authorization": f"Bearer {running.token('new')}"}
    with client.ApiClient(config) as c:
        info = client.VersionApi(c).get_code()
    assert info.emulation_minor == "33" and info.min_compatibility_minor == "32"


@pytest.mark.parametrize("path", ["healthz", "readyz", "livez"])
def test_health_endpoints_answer_ok_without_credentials(sim, path):
    with urllib.request.urlopen(f"{sim.url('host')}/{path}", timeout=5) as resp:
        assert resp.status == 200 and resp.read() == b"ok"


def _group_versions(c) -> set[str]:
    groups = client.ApisApi(c).get_api_versions()
    return {v.group_version for g in groups.groups for v in g.versions}


def test_discovery_lists_only_group_versions_of_that_version(sim, api):
    gv125 = _group_versions(api("m125"))
    gv127 = _group_versions(api("m127"))
    gv128 = _group_versions(api("m128"))
    gv129 = _group_versions(api("host"))
    assert "autoscaling/v2beta2" in gv125
    assert "autoscaling/v2beta2" not in gv127
    assert "flowcontrol.apiserver.k8s.io/v1beta2" in gv128
    assert "flowcontrol.apiserver.k8s.io/v1beta2" not in gv129
    assert "flowcontrol.apiserver.k8s.io/v1" in gv129 and "flowcontrol.apiserver.k8s.io/v1" not in gv128
    for gv in (gv125, gv127, gv128, gv129):
        assert {"apps/v1", "batch/v1", "rbac.authorization.k8s.io/v1"} <= gv


def test_core_and_group_resource_lists_parse(sim, api):
    c = api("m127")
    assert client.CoreApi(c).get_api_versions().versions == ["v1"]
    core = {r.name: r for r in client.CoreV1Api(c).get_api_resources().resources}
    assert core["namespaces"].namespaced is False and core["configmaps"].namespaced is True
    assert core["nodes"].kind == "Node" and "list" in core["nodes"].verbs
    apps = {r.name: r for r in client.AppsV1Api(c).get_api_resources().resources}
    assert apps["deployments"].kind == "Deployment" and apps["deployments"].namespaced
    group = client.AppsApi(c).get_api_group()
    assert group.preferred_version.group_version == "apps/v1"


def test_missing_group_version_is_404(sim, api):
    with pytest.raises(client.ApiException) as exc:
        client.AutoscalingV2beta2Api(api("host")).get_api_resources() if hasattr(
            client, "AutoscalingV2beta2Api"
        ) else api("host").call_api(
            "/apis/autoscaling/v2beta2", "GET", auth_settings=["BearerToken"], response_type="object"
        )
    assert exc.value.status == 404


def test_nodes_come_from_the_fleet_file(sim, api):
    nodes = client.CoreV1Api(api("host")).list_node().items
    assert len(nodes) == 3
    assert {n.status.node_info.kubelet_version for n in nodes} == {"v1.29.4", "v1.28.9"}
    assert {n.metadata.labels["topology.kubernetes.io/region"] for n in nodes} == {"eu-west-1"}
    assert {n.metadata.labels["topology.kubernetes.io/zone"] for n in nodes} == {"eu-west-1a", "eu-west-1b"}


def test_a_node_upgrade_changes_the_kubelet_version_of_the_named_nodes(fleet_factory):
    from tests.fleet_fixtures import FleetError

    fleet = fleet_factory(
        {"clusters": [{"name": "up", "version": "v1.29.4", "nodes": {"count": 2, "kubeletVersions": ["v1.28.9"]}}]}
    )
    core = client.CoreV1Api(make_client(fleet, "up", "default"))
    first, second = sorted(n.metadata.name for n in core.list_node().items)
    before = core.read_node(first).metadata.resource_version
    assert fleet.set_kubelet_version("up", "v1.29.4", nodes=[first]) == [first]
    kubelets = {n.metadata.name: n.status.node_info.kubelet_version for n in core.list_node().items}
    assert kubelets == {first: "v1.29.4", second: "v1.28.9"}
    assert int(core.read_node(first).metadata.resource_version) > int(before)
    assert fleet.set_kubelet_version("up", "v1.29.5") == [first, second]
    for body, message in (
        ({"kubeletVersion": "nope"}, "bad Kubernetes version"),
        ({"kubeletVersion": "v1.29.5", "nodes": ["ghost"]}, "no node named ghost"),
        ({"kubeletVersion": "v1.29.5", "nodes": "all"}, "list of node names"),
    ):
        with pytest.raises(FleetError, match=message):
            fleet.admin("POST", "/clusters/up/kubelets", body)
    assert {n.status.node_info.kubelet_version for n in core.list_node().items} == {"v1.29.5"}
