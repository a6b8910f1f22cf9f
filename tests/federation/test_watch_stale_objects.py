"""The watcher judges objects from its stream and its relists, which may be older than what
FedPortal has recorded since (an event replayed after a reconnect, or handled late while its
threads were busy; a LIST taken while a propagation was in flight). Such an object differs from the
new applied manifest: it was marked OutOfSync, with a "changed outside FedPortal" audit event (and
re-applied under Enforce), and the mark stuck, since the new object's own event, at the recorded
version, was settled as a cheap confirmation. Now a difference seen in a stream is confirmed by a
GET before it is recorded, and an OutOfSync object at the recorded version is judged again
(reviewer's findings on the watcher)."""

import copy
from datetime import timedelta

import pytest
from django.utils import timezone

from clusters import kube
from federation import propagation, services
from federation.choices import SyncState
from federation.models import PropagatedVersion, PropagationTarget
from federation.propagation import drift
from federation.watching import handling
from fedportal.models import AuditEvent
from tests.federation.factories import WEB_TEMPLATE, drain, federate_namespace, register_fleet, web_deployment

pytestmark = pytest.mark.django_db

EVIL = {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "evil:latest"}]}}}}


@pytest.fixture
def web(fleet):
    register_fleet(fleet, ["m128"])
    drain(propagation.propagate_revision(federate_namespace("shop", ["m128"])))
    resource = web_deployment(placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    return resource


def live(fleet):
    return fleet.get_object("m128", "apps/v1", "Deployment", "shop", "web")


def watching(resource):
    """The watcher's Target for the resource's (cluster, type), and a connection to its cluster."""
    pv = PropagatedVersion.objects.select_related("resource").get(resource=resource)
    target = handling.targets_for([pv.cluster_id])[(pv.cluster_id, pv.resource.type_id)]
    return target, handling.connections_for([pv.cluster_id])[pv.cluster_id]


def new_revision(resource):
    template = copy.deepcopy(WEB_TEMPLATE)
    template["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.27"
    services.update_resource(resource, template=template, placement={"clusters": ["m128"]})
    resource.refresh_from_db()
    drain(propagation.propagate_revision(resource))


def drift_events() -> int:
    return AuditEvent.objects.filter(action="federation.drift.detect").count()


def test_an_event_older_than_the_recorded_propagation_is_not_drift(fleet, web):
    old = live(fleet)  # the object before the new revision: its event is handled after the worker recorded
    new_revision(web)
    target, conn = watching(web)
    assert handling.handle_event(target, "MODIFIED", old, conn) == "in_sync"
    pv = PropagatedVersion.objects.get(resource=web)
    assert pv.sync_state == SyncState.IN_SYNC and pv.drift == []
    assert drift_events() == 0


def test_a_relist_holding_the_object_a_propagation_replaced_is_not_drift(fleet, web):
    old = live(fleet)  # listed while the propagation was in flight, judged after it was recorded
    new_revision(web)
    target, conn = watching(web)
    counts = handling.handle_list(target, [old], conn, before={})
    assert counts["out_of_sync"] == 0
    assert PropagatedVersion.objects.get(resource=web).sync_state == SyncState.IN_SYNC
    assert drift_events() == 0


def test_an_out_of_sync_object_at_the_recorded_version_is_judged_again(fleet, web):
    """A verdict recorded from an older object leaves the recorded version as it was: the current
    object's event and the next relist judge it again, and find it in sync."""
    PropagatedVersion.objects.filter(resource=web).update(
        sync_state=SyncState.OUT_OF_SYNC, drift=[{"path": "/spec/replicas", "before": 1, "after": 3}]
    )
    target, conn = watching(web)
    assert handling.handle_event(target, "MODIFIED", live(fleet), conn) == "in_sync"
    assert PropagatedVersion.objects.get(resource=web).sync_state == SyncState.IN_SYNC

    PropagatedVersion.objects.filter(resource=web).update(sync_state=SyncState.OUT_OF_SYNC)
    target, conn = watching(web)
    assert handling.handle_list(target, [live(fleet)], conn)["judged"] == 1
    assert PropagatedVersion.objects.get(resource=web).sync_state == SyncState.IN_SYNC


def test_a_real_edit_seen_in_the_stream_is_still_drift(fleet, web):
    edited = fleet.external_edit("m128", "apps/v1", "Deployment", "shop", "web", EVIL)
    target, conn = watching(web)
    assert handling.handle_event(target, "MODIFIED", edited, conn) == "out_of_sync"
    pv = PropagatedVersion.objects.get(resource=web)
    assert pv.sync_state == SyncState.OUT_OF_SYNC and pv.drift[0]["after"] == "evil:latest"
    assert drift_events() == 1


def test_judging_a_listed_object_that_matches_needs_no_get(fleet, web, monkeypatch):
    calls = []
    monkeypatch.setattr(drift, "check_drift", lambda *a, **kw: calls.append(a) or "in_sync")
    PropagatedVersion.objects.filter(resource=web).update(live_resource_version="1")  # moved since last judged
    target, conn = watching(web)
    assert handling.handle_list(target, [live(fleet)], conn)["judged"] == 1
    assert calls == []


def test_an_event_whose_check_is_refused_for_good_does_not_block_the_watch(fleet, web, monkeypatch):
    """A permanent refusal of the confirming GET (a 403, say) is logged and the event passed: raised,
    the watch resumed before the same event after every backoff, and judged nothing else of its
    cluster and type again (a reviewer's finding). A transient one is still raised and retried."""
    target, conn = watching(web)
    gone = {"metadata": {"name": "web", "namespace": "shop", "resourceVersion": "1"}}

    def refused(*args, **kwargs):
        raise kube.KubePermanentError("deployments.apps is forbidden", kind=kube.KIND_FORBIDDEN)

    monkeypatch.setattr(handling, "check_drift", refused)
    assert handling.handle_event(target, "DELETED", gone, conn) == "error"

    def unreachable(*args, **kwargs):
        raise kube.KubeTransientError("connection refused", kind=kube.KIND_UNREACHABLE)

    monkeypatch.setattr(handling, "check_drift", unreachable)
    with pytest.raises(kube.KubeTransientError):
        handling.handle_event(target, "DELETED", gone, conn)


def test_a_settled_target_that_commits_late_still_has_its_pair_relisted(fleet, web):
    """A chunk stamps finished_at before its transaction, which may wait on another's commit (up to
    30 s on SQLite): a later target seen first moved the next look past it, and the edit made while
    it was in flight waited for the hourly sweep (a reviewer's finding)."""
    pv = PropagatedVersion.objects.select_related("resource").get(resource=web)
    pair = {(pv.cluster_id, pv.resource.type_id)}
    now = timezone.now()
    PropagationTarget.objects.update(finished_at=now - timedelta(days=1))
    early = PropagationTarget.objects.get(run__resource=web)
    seen: dict = {}
    pairs, since = handling.settled_since([pv.cluster_id], now - timedelta(seconds=1), seen)
    assert pairs == set()
    # a target stamped 8 s after the early one commits first and is seen ...
    late = propagation.propagate_revision(web).targets.get()
    PropagationTarget.objects.filter(pk=late.pk).update(finished_at=now + timedelta(seconds=8))
    pairs, since = handling.settled_since([pv.cluster_id], since, seen)
    assert pairs == pair
    # ... then the early one commits
    PropagationTarget.objects.filter(pk=early.pk).update(finished_at=now)
    pairs, _ = handling.settled_since([pv.cluster_id], since, seen)
    assert pairs == pair, "the late commit's pair is relisted"


def test_drift_already_recorded_and_seen_again_needs_no_get(fleet, web, monkeypatch):
    """A drifted object's every status event and every relist would otherwise cost a GET."""
    edited = fleet.external_edit("m128", "apps/v1", "Deployment", "shop", "web", EVIL)
    target, conn = watching(web)
    assert handling.handle_event(target, "MODIFIED", edited, conn) == "out_of_sync"
    calls = []
    monkeypatch.setattr(drift, "check_drift", lambda *a, **kw: calls.append(a) or "in_sync")
    target, conn = watching(web)  # a fresh watch: nothing seen yet
    assert handling.handle_list(target, [edited], conn)["out_of_sync"] == 1
    assert calls == []
    assert PropagatedVersion.objects.get(resource=web).sync_state == SyncState.OUT_OF_SYNC


def test_a_quiet_fleet_reads_no_settled_targets_again(fleet, web):
    """The next look started a minute before the latest finish seen and stayed there while nothing
    finished: every heartbeat read the same targets again (all of a 200,000-target propagation's
    last minute). It starts a minute ago, and never before the watcher's start."""
    pv = PropagatedVersion.objects.get(resource=web)
    now = timezone.now()
    PropagationTarget.objects.update(finished_at=now - timedelta(minutes=5))
    since = now - timedelta(minutes=10)
    pairs, since = handling.settled_since([pv.cluster_id], since, {})
    assert pairs  # finished after the first look's start
    assert since >= now - timedelta(seconds=handling.SETTLED_LOOKBACK_SECONDS + 1)
    pairs, again = handling.settled_since([pv.cluster_id], since, {})
    assert pairs == set() and again >= since
    start = timezone.now()
    _, kept = handling.settled_since([pv.cluster_id], start, {})
    assert kept == start, "never before the watcher's start"


def test_a_refused_confirming_get_passes_the_event_too(fleet, web, monkeypatch):
    """The README's 403: the GET that confirms a difference seen in a MODIFIED event is refused for
    good; the event is passed, not retried for ever."""
    edited = fleet.external_edit("m128", "apps/v1", "Deployment", "shop", "web", EVIL)
    target, conn = watching(web)

    def refused(*args, **kwargs):
        raise kube.KubePermanentError("deployments.apps is forbidden", kind=kube.KIND_FORBIDDEN)

    monkeypatch.setattr(drift, "check_drift", refused)
    assert handling.handle_event(target, "MODIFIED", edited, conn) == "error"
    assert PropagatedVersion.objects.get(resource=web).sync_state == SyncState.IN_SYNC  # nothing recorded
