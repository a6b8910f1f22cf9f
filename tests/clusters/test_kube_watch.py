"""clusters.kube's watch (asyncio, aiohttp) and list_with_version against the fleet simulator, over
TLS with the cluster's CA and token: label selector, resume from a version, 410, errors mapped."""

import pytest

from clusters import kube
from tests.fleet_fixtures import DEFAULT_FLEET
from tests.utils import run_async

pytestmark = pytest.mark.django_db


def conn(fleet, name, *, token=None):
    return kube.ClusterConnection(
        name=name,
        api_server=fleet.url(name),
        token=token if token is not None else fleet.token(name),
        ca_data=open(fleet.ca_path).read() if fleet.ca_path else None,
    )


def cm(name, labels=None):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
    }


def collect(c, **kwargs):
    async def run():
        session = kube.WatchSession()
        events = []
        try:
            async for event in kube.watch_objects(session, c, api_version="v1", plural="configmaps", **kwargs):
                events.append(event)
        finally:
            await session.close()
        return events

    return run_async(run())


def test_a_labelled_list_then_a_watch_from_its_version_sees_only_later_labelled_changes(fleet_factory):
    fleet = fleet_factory({"clusters": DEFAULT_FLEET["clusters"][:2]}, tls=True)
    c = conn(fleet, "m127")
    kube.apply_object(c, cm("before", {"fedportal.io/managed": "true"}), plural="configmaps", namespaced=True)
    items, version = kube.list_with_version(
        c, api_version="v1", plural="configmaps", label_selector="fedportal.io/managed=true"
    )
    assert [i["metadata"]["name"] for i in items] == ["before"] and version.isdigit()
    kube.apply_object(c, cm("theirs"), plural="configmaps", namespaced=True)
    made = kube.apply_object(c, cm("ours", {"fedportal.io/managed": "true"}), plural="configmaps", namespaced=True)
    opened = []
    events = collect(
        c,
        resource_version=version,
        label_selector="fedportal.io/managed=true",
        timeout_seconds=1,
        on_open=lambda: opened.append(True),
    )
    assert opened == [True]
    changes = [(e.type, e.object["metadata"]["name"]) for e in events if e.type != "BOOKMARK"]
    assert changes == [("ADDED", "ours")]
    assert events[0].resource_version == made.object["metadata"]["resourceVersion"]


def test_a_version_older_than_the_history_is_watch_expired_and_a_bad_token_is_permanent(fleet):
    c = conn(fleet, "m127")
    with pytest.raises(kube.WatchExpired) as gone:
        collect(c, resource_version="1", timeout_seconds=1)
    assert gone.value.status == 410
    with pytest.raises(kube.KubePermanentError) as refused:
        collect(conn(fleet, "m127", token="wrong"), resource_version="", timeout_seconds=1)
    assert refused.value.kind == kube.KIND_UNAUTHORIZED and "wrong" not in str(refused.value)


def test_a_cluster_that_is_down_is_a_transient_error(fleet):
    fleet.set_down("m128")
    try:
        with pytest.raises(kube.KubeTransientError):
            collect(conn(fleet, "m128"), resource_version="", timeout_seconds=1, connect_timeout=2)
    finally:
        fleet.set_up("m128")


def test_clusters_of_one_ca_share_a_tls_context_and_both_watches_work(fleet_factory):
    fleet = fleet_factory({"clusters": DEFAULT_FLEET["clusters"][:2]}, tls=True)
    first, second = (conn(fleet, name) for name in [c["name"] for c in DEFAULT_FLEET["clusters"][:2]])
    insecure = kube.ClusterConnection(
        name="other", api_server=fleet.url(second.name), token=second.token, insecure_skip_tls_verify=True
    )

    async def contexts():
        session = kube.WatchSession()
        try:
            return session.ssl_for(first), session.ssl_for(second), session.ssl_for(insecure)
        finally:
            await session.close()

    one, two, other = run_async(contexts())
    assert one is two and other is not one
    for c in (first, second):
        kube.apply_object(c, cm("shared", {"fedportal.io/managed": "true"}), plural="configmaps", namespaced=True)
        _items, version = kube.list_with_version(c, api_version="v1", plural="configmaps")
        kube.apply_object(
            c, cm("shared", {"fedportal.io/managed": "true", "v": "2"}), plural="configmaps", namespaced=True
        )
        events = collect(c, resource_version=version, timeout_seconds=1)
        assert [(e.type, e.object["metadata"]["name"]) for e in events if e.type != "BOOKMARK"] == [
            ("MODIFIED", "shared")
        ]
