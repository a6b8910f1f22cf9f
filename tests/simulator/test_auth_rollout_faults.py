"""Auth, deployment roll-out status, and run-time faults (down, 503, latency, 500s, version change)."""

import json
import time

import pytest
import urllib3
from kubernetes import client
from kubernetes.client import ApiException

from tests.simulator.conftest import deployment


def test_no_token_is_401_on_resources(api):
    with pytest.raises(ApiException) as exc:
        client.CoreV1Api(api("host", token=None)).list_namespace()
    assert exc.value.status == 401 and json.loads(exc.value.body)["reason"] == "Unauthorized"


def test_wrong_token_is_401_even_on_version(api):
    with pytest.raises(ApiException) as exc:
        client.VersionApi(api("host", token="not-a-token")).get_code()
    assert exc.value.status == 401


def test_token_of_another_cluster_is_rejected(sim, api):
    with pytest.raises(ApiException) as exc:
        client.CoreV1Api(api("m127", token=sim.token("host"))).list_namespace()
    assert exc.value.status == 401


def test_readonly_token_reads_but_gets_403_on_writes(sim, api):
    core = client.CoreV1Api(api("host", token=sim.readonly_token("host")))
    assert any(n.metadata.name == "default" for n in core.list_namespace().items)
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("default", {"metadata": {"name": "ro"}})
    body = json.loads(exc.value.body)
    assert exc.value.status == 403 and body["reason"] == "Forbidden" and "cannot create" in body["message"]


def test_deployment_rolls_out_after_the_configured_delay(api):
    apps = client.AppsV1Api(api("m131"))
    d = apps.create_namespaced_deployment("default", deployment("roll", replicas=3))
    first = d.status  # as created: a read after the roll-out delay (a loaded machine) would see it done
    assert first.observed_generation == 1 and first.replicas == 3
    assert not first.updated_replicas and not first.available_replicas
    conditions = {c.type: c for c in first.conditions}
    assert conditions["Progressing"].reason == "ReplicaSetUpdated"
    assert conditions["Available"].status == "False"
    time.sleep(0.7)
    done = apps.read_namespaced_deployment("roll", "default")
    assert done.status.ready_replicas == 3 and done.status.available_replicas == 3
    assert done.status.updated_replicas == 3
    conditions = {c.type: c for c in done.status.conditions}
    assert conditions["Available"].status == "True"
    assert conditions["Progressing"].reason == "NewReplicaSetAvailable"
    assert int(done.metadata.resource_version) > int(d.metadata.resource_version)
    scaled = apps.patch_namespaced_deployment("roll", "default", {"spec": {"replicas": 5}})
    # a scaling event resizes the current ReplicaSet: every replica is up to date at once
    assert scaled.status.observed_generation == 2 and scaled.status.updated_replicas == 5
    assert scaled.status.available_replicas == 3
    time.sleep(0.7)
    assert apps.read_namespaced_deployment("roll", "default").status.available_replicas == 5


def test_down_refused_drops_connections_then_recovers(sim, api):
    c = api("spare", retries=0)
    sim.set_down("spare", "refused")
    try:
        with pytest.raises((urllib3.exceptions.HTTPError, ConnectionError)):
            client.VersionApi(c).get_code(_request_timeout=3)
    finally:
        sim.set_up("spare")
    assert client.VersionApi(api("spare")).get_code().git_version == "v1.30.1"


def test_down_503_answers_service_unavailable(sim, api):
    sim.set_down("spare", "503")
    try:
        with pytest.raises(ApiException) as exc:
            client.CoreV1Api(api("spare")).list_namespace()
        assert exc.value.status == 503
    finally:
        sim.set_up("spare")


def test_latency_delays_answers(sim, api):
    c = api("spare")
    sim.set_latency("spare", 300)
    try:
        started = time.monotonic()
        client.VersionApi(c).get_code()
        assert time.monotonic() - started >= 0.3
    finally:
        sim.set_latency("spare", 0)


def test_error_rate_one_gives_500_status(sim, api):
    sim.set_error_rate("spare", 1.0)
    try:
        with pytest.raises(ApiException) as exc:
            client.CoreV1Api(api("spare")).list_namespace()
        assert exc.value.status == 500 and json.loads(exc.value.body)["reason"] == "InternalError"
    finally:
        sim.set_error_rate("spare", 0)


def test_live_version_change_changes_version_and_discovery(sim, api):
    c = api("spare")
    sim.set_version("spare", "v1.25.4")
    try:
        assert client.VersionApi(c).get_code().git_version == "v1.25.4"
        groups = {v.group_version for g in client.ApisApi(c).get_api_versions().groups for v in g.versions}
        assert "autoscaling/v2beta2" in groups
    finally:
        sim.set_version("spare", "v1.30.1")
    assert client.VersionApi(c).get_code().git_version == "v1.30.1"


def test_external_edit_changes_the_live_object(sim, api):
    core = client.CoreV1Api(api("spare"))
    cm = core.create_namespaced_config_map("default", {"metadata": {"name": "edited"}, "data": {"a": "1"}})
    sim.external_edit("spare", "v1", "ConfigMap", "default", "edited", {"data": {"a": "2"}})
    live = core.read_namespaced_config_map("edited", "default")
    assert live.data == {"a": "2"}
    assert int(live.metadata.resource_version) > int(cm.metadata.resource_version)
    assert any(e.manager == "kubectl-edit" for e in live.metadata.managed_fields)
    assert sim.get_object("spare", "v1", "ConfigMap", "default", "missing") is None


def test_external_delete_removes_the_live_object(sim, api):
    core = client.CoreV1Api(api("spare"))
    core.create_namespaced_config_map("default", {"metadata": {"name": "gone"}})
    sim.external_delete("spare", "v1", "ConfigMap", "default", "gone")
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("gone", "default")
    assert exc.value.status == 404
