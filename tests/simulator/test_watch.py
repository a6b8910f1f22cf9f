"""Watch (?watch=1): newline-delimited JSON events, as kubectl get -w, kubectl rollout status and
client-go reflectors read them."""

import json
import time

from kubernetes import client

from clusters.simulator.fleet import parse_fleet
from clusters.simulator.store import WATCH_HISTORY, ClusterState
from tests.simulator.conftest import deployment, make_client

CM = "/api/v1/namespaces/default/configmaps"


def open_watch(c: client.ApiClient, path: str, **query):
    """A watch request whose response has started: the server subscribes before it sends its headers,
    so a change made from now on is among its events (no sleeping thread racing the subscription)."""
    return c.call_api(
        path,
        "GET",
        query_params=[("watch", "1"), *query.items()],
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
        _request_timeout=(10, 30),
    )


def events_of(response) -> list[dict]:
    """Every event of an open watch (it ends at its timeoutSeconds)."""
    return [json.loads(line) for line in response.data.splitlines() if line.strip()]


def stream(c: client.ApiClient, path: str, **query) -> list[dict]:
    """Every event of one watch request."""
    return events_of(open_watch(c, path, **query))


def test_watch_starts_with_what_exists_then_sends_changes_until_its_timeout(api):
    c = api("spare")
    core = client.CoreV1Api(c)
    core.create_namespaced_config_map("default", {"metadata": {"name": "w-before", "labels": {"w": "1"}}})

    def changes():
        core.create_namespaced_config_map("default", {"metadata": {"name": "w-new", "labels": {"w": "1"}}})
        core.patch_namespaced_config_map("w-new", "default", {"data": {"a": "b"}})
        core.create_namespaced_config_map("default", {"metadata": {"name": "w-other"}})  # not selected
        core.delete_namespaced_config_map("w-before", "default")

    started = time.monotonic()
    watch = open_watch(c, CM, labelSelector="w=1", timeoutSeconds="2")
    changes()
    events = events_of(watch)
    assert 1.5 < time.monotonic() - started < 10  # it ended at its timeout, not at once
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


def test_a_watch_sees_a_roll_out_finish_when_it_does(api):
    """The Deployment is created after the watch starts, so its end of roll-out can only come as a
    MODIFIED event sent when the roll-out is due (rolloutSeconds 0.5 here), not from a read."""
    c = api("m128")
    apps = client.AppsV1Api(c)
    watch = open_watch(
        c, "/apis/apps/v1/namespaces/default/deployments", fieldSelector="metadata.name=watched", timeoutSeconds="3"
    )
    apps.create_namespaced_deployment("default", deployment("watched", replicas=2))
    events = events_of(watch)
    statuses = [(e["type"], (e["object"].get("status") or {}).get("readyReplicas")) for e in events]
    assert statuses[0] == ("ADDED", None) and ("MODIFIED", 2) in statuses
    finished = [e for e in events if e["type"] == "MODIFIED"]
    assert finished[-1]["object"]["status"]["updatedReplicas"] == 2
    apps.delete_namespaced_deployment("watched", "default")


def test_deleting_a_namespace_announces_its_objects_deleted(api):
    c = api("m131")
    core = client.CoreV1Api(c)
    core.create_namespace({"metadata": {"name": "doomed"}})
    core.create_namespaced_config_map("doomed", {"metadata": {"name": "inside"}})
    watch = open_watch(c, "/api/v1/namespaces/doomed/configmaps", timeoutSeconds="2")
    core.delete_namespace("doomed")
    events = events_of(watch)
    # the namespace's root CA ConfigMap (a real cluster's too) comes and goes with it
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "inside"),
        ("ADDED", "kube-root-ca.crt"),
        ("DELETED", "kube-root-ca.crt"),
        ("DELETED", "inside"),
    ]


def test_a_cluster_keeps_a_bounded_history():
    """Kept from the start, as a watch cache (a list then a watch must resume), but bounded: the
    1,000-cluster fleet's memory does not grow with writes."""
    spec = parse_fleet({"clusters": [{"name": "quiet", "version": "v1.29.2"}]}).clusters[0]
    cluster = ClusterState(spec)
    res = cluster.find_resource("v1", "ConfigMap")
    for i in range(WATCH_HISTORY + 20):
        cluster.rv += 1
        cluster.save(
            res, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"x{i}", "namespace": "default"}}
        )
    assert len(cluster.history) == WATCH_HISTORY
    assert cluster.events_since(res, 3) is None and cluster.events_since(res, cluster.rv - 5) is not None


def test_a_cascade_gives_each_deletion_its_own_version_so_a_resumed_watch_misses_none(api):
    c = api("m131")
    core = client.CoreV1Api(c)
    core.create_namespace({"metadata": {"name": "cascade"}})
    for name in ("a", "b", "c"):
        core.create_namespaced_config_map("cascade", {"metadata": {"name": name}})
    path = "/api/v1/namespaces/cascade/configmaps"
    listed = core.list_namespaced_config_map("cascade").metadata.resource_version
    stream(c, path, timeoutSeconds="0")  # keep events from here on
    core.delete_namespace("cascade")
    deleted = stream(c, path, resourceVersion=listed, timeoutSeconds="0")
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in deleted]
    assert [e["type"] for e in deleted] == ["DELETED"] * 4 and len(set(versions)) == 4  # a, b, c, kube-root-ca.crt
    rest = stream(c, path, resourceVersion=str(versions[0]), timeoutSeconds="0")
    assert [e["object"]["metadata"]["name"] for e in rest] == [e["object"]["metadata"]["name"] for e in deleted[1:]]


def test_deleting_another_kind_of_the_same_name_leaves_a_roll_out_alone(api):
    c = api("m128")
    apps, core = client.AppsV1Api(c), client.CoreV1Api(c)
    apps.create_namespaced_deployment("default", deployment("twin", replicas=1))
    core.create_namespaced_config_map("default", {"metadata": {"name": "twin"}})
    core.delete_namespaced_config_map("twin", "default")
    time.sleep(0.8)  # rolloutSeconds 0.5
    assert apps.read_namespaced_deployment("twin", "default").status.ready_replicas == 1
    apps.delete_namespaced_deployment("twin", "default")


def test_an_open_watch_does_not_hold_up_the_simulators_shutdown(tmp_path):
    from tests.fleet_fixtures import start_fleet
    from tests.simulator.conftest import make_client

    fleet = start_fleet({"clusters": [{"name": "solo", "version": "v1.30.2"}]}, workdir=tmp_path)
    c = make_client(fleet, "solo")
    try:
        client.CoreV1Api(c).create_namespaced_config_map("default", {"metadata": {"name": "seen"}})
        response = c.call_api(
            CM,
            "GET",
            query_params=[("watch", "1"), ("timeoutSeconds", "600")],
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
        response.read(1)  # the stream has started (the ADDED event of "seen")
        started = time.monotonic()
        fleet.stop()  # SIGTERM, then SIGKILL after 10 s
        assert time.monotonic() - started < 8 and fleet.proc.returncode == 0, "ended the watch and exited"
    finally:
        c.close()
        fleet.stop()


def test_a_selector_watch_sees_objects_enter_as_added_and_leave_as_deleted(api):
    c = api("spare")
    core = client.CoreV1Api(c)
    core.create_namespaced_config_map("default", {"metadata": {"name": "sel-a", "labels": {"tier": "web"}}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "sel-b"}})
    listed = core.list_namespaced_config_map("default").metadata.resource_version

    def changes():
        core.patch_namespaced_config_map("sel-a", "default", {"metadata": {"labels": {"tier": "db"}}})  # leaves
        core.patch_namespaced_config_map("sel-b", "default", {"metadata": {"labels": {"tier": "web"}}})  # enters
        core.patch_namespaced_config_map("sel-b", "default", {"data": {"k": "v"}})  # stays
        core.patch_namespaced_config_map("sel-a", "default", {"data": {"k": "v"}})  # outside: unseen

    watch = open_watch(c, CM, labelSelector="tier=web", timeoutSeconds="2")
    changes()
    live = events_of(watch)
    expected = [("DELETED", "sel-a"), ("ADDED", "sel-b"), ("MODIFIED", "sel-b")]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in live] == [("ADDED", "sel-a"), *expected]
    assert live[1]["object"]["metadata"]["labels"] == {"tier": "db"}  # the object as it is now
    # the same transitions for a watch resuming from before them
    resumed = stream(c, CM, labelSelector="tier=web", resourceVersion=listed, timeoutSeconds="0")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in resumed] == expected
    core.delete_namespaced_config_map("sel-a", "default")
    core.delete_namespaced_config_map("sel-b", "default")


def test_bookmarks_only_when_asked_and_resuming_from_one_misses_nothing(api):
    c = api("spare")
    core = client.CoreV1Api(c)
    watch = open_watch(c, CM, allowWatchBookmarks="true", timeoutSeconds="2")
    core.create_namespaced_config_map("default", {"metadata": {"name": "bm-1"}})
    events = events_of(watch)
    assert events[-1]["type"] == "BOOKMARK" and events[-1]["object"]["kind"] == "ConfigMap"
    assert set(events[-1]["object"]["metadata"]) == {"resourceVersion"}
    mark = events[-1]["object"]["metadata"]["resourceVersion"]
    created = next(e for e in events if e["object"]["metadata"].get("name") == "bm-1")
    assert int(mark) >= int(created["object"]["metadata"]["resourceVersion"])
    assert "BOOKMARK" not in {e["type"] for e in stream(c, CM, timeoutSeconds="1")}
    core.create_namespaced_config_map("default", {"metadata": {"name": "bm-2"}})
    resumed = stream(c, CM, resourceVersion=mark, timeoutSeconds="0")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in resumed] == [("ADDED", "bm-2")]
    core.delete_namespaced_config_map("bm-1", "default")
    core.delete_namespaced_config_map("bm-2", "default")


def _open_watch(sim, name: str):
    """A raw watch connection (no timeout soon): returns the urllib3 response being streamed."""
    c = make_client(sim, name)
    response = c.call_api(
        CM,
        "GET",
        query_params=[("watch", "1"), ("timeoutSeconds", "60")],
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
        _request_timeout=(10, 30),
    )
    return c, response


def _read_until_cut(response) -> tuple[bool, float]:
    """(cut without a clean end, seconds it took): a chunked response aborted mid-way raises."""
    started = time.monotonic()
    try:
        for _ in response.stream(1024):
            pass
    except Exception:  # urllib3 ProtocolError: the connection broke, no terminating chunk
        return True, time.monotonic() - started
    return False, time.monotonic() - started


def test_drop_watches_cuts_every_open_watch_of_the_cluster_and_none_of_another(sim):
    c1, first = _open_watch(sim, "spare")
    c2, second = _open_watch(sim, "spare")
    c3, other = _open_watch(sim, "m128")
    try:
        time.sleep(0.3)
        assert sim.drop_watches("spare") == 2
        assert _read_until_cut(first)[0] and _read_until_cut(second)[0]
        assert sim.drop_watches("spare") == 0, "nothing left open"
        core = client.CoreV1Api(c3)  # the other cluster's watch still delivers
        core.create_namespaced_config_map("default", {"metadata": {"name": "after-drop"}})
        seen = b""
        for chunk in other.stream(1024):
            seen += chunk
            if b'"after-drop"' in seen:
                break
        assert b'"after-drop"' in seen
        core.delete_namespaced_config_map("after-drop", "default")
    finally:
        other.release_conn()
        for c in (c1, c2, c3):
            c.close()


def test_a_cluster_going_down_cuts_its_open_watches(sim):
    c, response = _open_watch(sim, "spare")
    try:
        time.sleep(0.3)
        sim.set_down("spare")
        cut, seconds = _read_until_cut(response)
        assert cut and seconds < 5
    finally:
        sim.set_up("spare")
        c.close()
