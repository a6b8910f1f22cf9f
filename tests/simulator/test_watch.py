"""Watch (?watch=1): newline-delimited JSON events, as kubectl get -w, kubectl rollout status and
client-go reflectors read them."""
import json
import threading
import time

from kubernetes import client, watch

from clusters.simulator.fleet import parse_fleet
from clusters.simulator.store import ClusterState
from tests.simulator.conftest import deployment

CM = "/api/v1/namespaces/default/configmaps"


def stream(c: client.ApiClient, path: str, **query) -> list[dict]:
    """Every event of one watch request (it ends at timeoutSeconds)."""
    response = c.call_api(path, "GET", query_params=[("watch", "1"), *query.items()],
                          header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
                          _preload_content=False, _return_http_data_only=True, _request_timeout=(10, 30))
    return [json.loads(line) for line in response.data.splitlines() if line.strip()]


def later(seconds: float, action) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(seconds), action()))
    thread.start()
    return thread


def test_watch_starts_with_what_exists_then_sends_changes_until_its_timeout(api):
    c = api("spare")
    core = client.CoreV1Api(c)
    core.create_namespaced_config_map("default", {"metadata": {"name": "w-before", "labels": {"w": "1"}}})

    def changes():
        core.create_namespaced_config_map("default", {"metadata": {"name": "w-new", "labels": {"w": "1"}}})
        core.patch_namespaced_config_map("w-new", "default", {"data": {"a": "b"}})
        core.create_namespaced_config_map("default", {"metadata": {"name": "w-other"}})  # not selected
        core.delete_namespaced_config_map("w-before", "default")

    thread = later(0.5, changes)
    started = time.monotonic()
    events = stream(c, CM, labelSelector="w=1", timeoutSeconds="2")
    thread.join()
    assert 1.5 < time.monotonic() - started < 5
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    assert seen == [("ADDED", "w-before"), ("ADDED", "w-new"), ("MODIFIED", "w-new"), ("DELETED", "w-before")]
    assert events[2]["object"]["data"] == {"a": "b"} and events[2]["object"]["kind"] == "ConfigMap"
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events[1:]]
    assert versions == sorted(versions) and len(set(versions)) == 3
    core.delete_namespaced_config_map("w-new", "default")
    core.delete_namespaced_config_map("w-other", "default")


def test_watch_resumes_after_a_resource_version_and_too_old_is_410_gone(api):
    c = api("m125")
    core = client.CoreV1Api(c)
    stream(c, CM, timeoutSeconds="0")  # the cluster's first watch: events are kept from now on
    listed = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "r1"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "r2"}})
    events = stream(c, CM, resourceVersion=listed, timeoutSeconds="0")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "r1"), ("ADDED", "r2")]
    (gone,) = stream(c, CM, resourceVersion="1", timeoutSeconds="0")
    assert gone["type"] == "ERROR" and gone["object"]["code"] == 410 and gone["object"]["reason"] == "Expired"
    for name in ("r1", "r2"):
        core.delete_namespaced_config_map(name, "default")


def test_the_python_clients_watch_sees_a_roll_out_finish(api):
    """A watch started after the apply still gets the roll-out's end (rolloutSeconds 0.5 here)."""
    c = api("m128")
    apps = client.AppsV1Api(c)
    apps.create_namespaced_deployment("default", deployment("watched", replicas=2))
    finished = None
    for event in watch.Watch().stream(apps.list_namespaced_deployment, "default",
                                      field_selector="metadata.name=watched", timeout_seconds=5):
        status = event["object"].status
        if status.ready_replicas == 2 and status.updated_replicas == 2:
            finished = event["type"]
            break
    assert finished in ("ADDED", "MODIFIED")
    apps.delete_namespaced_deployment("watched", "default")


def test_deleting_a_namespace_announces_its_objects_deleted(api):
    c = api("m131")
    core = client.CoreV1Api(c)
    core.create_namespace({"metadata": {"name": "doomed"}})
    core.create_namespaced_config_map("doomed", {"metadata": {"name": "inside"}})
    later(0.3, lambda: core.delete_namespace("doomed"))
    events = stream(c, "/api/v1/namespaces/doomed/configmaps", timeoutSeconds="1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "inside"), ("DELETED", "inside")]


def test_a_cluster_nobody_watches_keeps_no_history():
    spec = parse_fleet({"clusters": [{"name": "quiet", "version": "v1.29.2"}]}).clusters[0]
    cluster = ClusterState(spec)
    res = cluster.find_resource("v1", "ConfigMap")
    cluster.save(res, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}})
    assert cluster.history is None  # the 1,000-cluster fleet's memory does not grow with writes
