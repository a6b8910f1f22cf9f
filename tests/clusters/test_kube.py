"""clusters.kube against the fleet simulator (a real HTTP API server; nothing mocked)."""

import pytest

from clusters import kube


def conn(fleet, name, *, token=None, cache_key=None, **kwargs):
    return kube.ClusterConnection(
        name=name,
        api_server=fleet.url(name),
        token=token if token is not None else fleet.token(name),
        ca_data=open(fleet.ca_path).read() if fleet.ca_path else None,
        cache_key=cache_key,
        **kwargs,
    )


def test_get_version_returns_the_clusters_git_version(fleet):
    info = kube.get_version(conn(fleet, "m127"), timeout=3)
    assert info.git_version == "v1.27.3"
    assert (info.major, info.minor) == (1, 27)
    assert info.minor_version == "1.27"
    assert info.platform


def test_check_ready_and_list_nodes_read_kubelets_and_topology(fleet):
    c = conn(fleet, "host")
    assert kube.check_ready(c, timeout=3).ok
    nodes = kube.list_nodes(c, timeout=3)
    assert len(nodes) == 3
    assert {n.kubelet_version for n in nodes} <= {"v1.29.4", "v1.28.9"}
    assert all(n.region == "eu-west-1" for n in nodes)
    assert all(n.ready for n in nodes)


def test_wrong_token_is_a_permanent_unauthorized_error_without_the_token(fleet):
    with pytest.raises(kube.KubePermanentError) as info:
        kube.get_version(conn(fleet, "m128", token="not-the-token"), timeout=3)
    assert info.value.kind == kube.KIND_UNAUTHORIZED
    assert info.value.status == 401
    assert "not-the-token" not in str(info.value)


def test_connection_dropped_by_a_down_cluster_is_transient_and_unreachable(fleet):
    fleet.set_down("m130", mode="refused")  # the simulator drops the connection without an answer
    with pytest.raises(kube.KubeTransientError) as info:
        kube.get_version(conn(fleet, "m130"), timeout=2)
    assert info.value.kind in kube.UNREACHABLE_KINDS
    assert fleet.token("m130") not in info.value.message


def test_refused_port_is_a_transient_refused_error():
    from tests.fleet_fixtures import free_port

    c = kube.ClusterConnection(name="x", api_server=f"http://127.0.0.1:{free_port()}", token="t")
    with pytest.raises(kube.KubeTransientError) as info:
        kube.get_version(c, timeout=2)
    assert info.value.kind == kube.KIND_REFUSED
    assert "refused" in info.value.message.lower()


def test_503_makes_the_cluster_not_ready_but_reachable(fleet):
    fleet.set_down("m130", mode="503")
    result = kube.check_ready(conn(fleet, "m130"), timeout=2)
    assert not result.ok
    with pytest.raises(kube.KubeTransientError) as info:
        kube.get_version(conn(fleet, "m130"), timeout=2)
    assert info.value.kind == kube.KIND_SERVER_ERROR


def test_slow_cluster_times_out_within_the_timeout(fleet):
    import time

    fleet.set_latency("m131", 3000)
    started = time.monotonic()
    with pytest.raises(kube.KubeTransientError) as info:
        kube.get_version(conn(fleet, "m131"), timeout=0.5)
    assert info.value.kind == kube.KIND_TIMEOUT
    assert time.monotonic() - started < 2.5


def test_unresolvable_host_is_a_dns_error():
    c = kube.ClusterConnection(name="x", api_server="https://no-such-host.invalid:6443", token="t")
    with pytest.raises(kube.KubeTransientError) as info:
        kube.get_version(c, timeout=2)
    assert info.value.kind == kube.KIND_DNS


def test_clients_are_cached_per_cluster_and_credential_version(fleet):
    kube.clear_client_cache()
    kube.get_version(conn(fleet, "m127", cache_key=(1, 1)), timeout=3)
    kube.get_version(conn(fleet, "m127", cache_key=(1, 1)), timeout=3)
    assert kube.cached_client_count() == 1
    kube.get_version(conn(fleet, "m127", cache_key=(1, 2)), timeout=3)
    assert kube.cached_client_count() == 1  # the old version's client was dropped
    kube.get_version(conn(fleet, "m128", cache_key=(2, 1)), timeout=3)
    assert kube.cached_client_count() == 2
    kube.forget_client((1, 2))
    assert kube.cached_client_count() == 1
    kube.clear_client_cache()


def test_server_side_apply_get_list_delete_round_trip(fleet):
    c = conn(fleet, "m128")
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "fp-test", "namespace": "default", "labels": {"app": "fp"}},
        "data": {"a": "1"},
    }
    result = kube.apply_object(c, manifest, plural="configmaps", namespaced=True, timeout=3)
    assert result.object["data"] == {"a": "1"}
    assert kube.get_object(c, api_version="v1", plural="configmaps", namespace="default", name="fp-test", timeout=3)
    listed = kube.list_objects(c, api_version="v1", plural="configmaps", namespace="default", label_selector="app=fp", timeout=3)
    assert [o["metadata"]["name"] for o in listed] == ["fp-test"]
    assert kube.delete_object(c, api_version="v1", plural="configmaps", namespace="default", name="fp-test", timeout=3)
    assert not kube.delete_object(c, api_version="v1", plural="configmaps", namespace="default", name="fp-test", timeout=3)
    assert kube.get_object(c, api_version="v1", plural="configmaps", namespace="default", name="fp-test", timeout=3) is None


def test_strict_field_validation_rejects_unknown_fields_and_warn_returns_warnings(fleet):
    c = conn(fleet, "m127")
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            },
            "notAField": True,
        },
    }
    with pytest.raises(kube.KubePermanentError) as info:
        kube.apply_object(c, manifest, plural="deployments", namespaced=True, timeout=3)
    assert info.value.kind == kube.KIND_BAD_REQUEST
    assert "notAField" in info.value.message
    result = kube.apply_object(c, manifest, plural="deployments", namespaced=True, field_validation="Warn", timeout=3)
    assert any("notAField" in w for w in result.warnings)


def test_tls_fleet_verifies_with_the_ca_and_rejects_without_it(fleet_factory):
    from tests.fleet_fixtures import DEFAULT_FLEET

    tls_fleet = fleet_factory({"clusters": DEFAULT_FLEET["clusters"][:2]}, tls=True)
    assert kube.get_version(conn(tls_fleet, "m127"), timeout=3).git_version == "v1.27.3"
    bad_ca = kube.ClusterConnection(
        name="m127", api_server=tls_fleet.url("m127"), token=tls_fleet.token("m127"),
    )
    with pytest.raises(kube.KubePermanentError) as info:
        kube.get_version(bad_ca, timeout=3)
    assert info.value.kind == kube.KIND_TLS
    insecure = kube.ClusterConnection(
        name="m127", api_server=tls_fleet.url("m127"), token=tls_fleet.token("m127"), insecure_skip_tls_verify=True
    )
    assert kube.get_version(insecure, timeout=3).git_version == "v1.27.3"
