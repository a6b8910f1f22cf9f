"""Review findings on the fleet watcher and the drift check: verdicts written compare-and-set (an
older judgement never overwrites a newer one), a relist that could not judge an object fails and is
retried, health written until it is written, one cluster's broken credentials stop only its own
watches, and a watcher name held by a live process is refused."""

import asyncio
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from clusters import kube
from clusters.crypto import CredentialDecryptError
from federation import propagation
from federation.choices import DriftPolicy, SyncState
from federation.models import ClusterWatch, FleetWatcher, PropagatedVersion
from federation.propagation import drift
from federation.watching import engine as watch_engine
from federation.watching import handling, leases
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import drain, federate_namespace, register_fleet, web_deployment
from tests.utils import run_async

pytestmark = pytest.mark.django_db

IMAGE = "/spec/template/spec/containers/0/image"
EVIL = {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "evil:latest"}]}}}}


@pytest.fixture
def web(fleet):
    register_fleet(fleet, ["m128"])
    drain(propagation.propagate_revision(federate_namespace("shop", ["m128"])))

    def make(policy=DriftPolicy.REPORT):
        resource = web_deployment(placement={"clusters": ["m128"]}, drift_policy=policy)
        drain(propagation.propagate_revision(resource))
        return resource

    return make


def load(resource):
    return drift.drift_candidates(ready_only=False).get(resource=resource)


def live(fleet):
    return fleet.get_object("m128", "apps/v1", "Deployment", "shop", "web")


def image(fleet):
    return live(fleet)["spec"]["template"]["spec"]["containers"][0]["image"]


def watcher_found_drift(fleet, resource):
    """What the watcher does on the event of an edit: the edit, then its verdict recorded."""
    fleet.external_edit("m128", "apps/v1", "Deployment", "shop", "web", EVIL)
    assert drift.judge_live(load(resource), live(fleet)) == "out_of_sync"


# --- 1. compare-and-set verdicts -----------------------------------------------------------------------


def test_the_sweep_never_overwrites_a_verdict_recorded_after_its_list(fleet, web, monkeypatch):
    resource = web()
    # moved since last judged: the sweep judges it from its LIST
    PropagatedVersion.objects.filter(resource=resource).update(live_resource_version="1")
    candidates, calls = drift.drift_candidates, []

    def spy(**kw):
        calls.append(kw)
        if len(calls) == 2:  # after the LIST, before the sweep loads what moved: the watcher's verdict
            watcher_found_drift(fleet, resource)
        return candidates(**kw)

    monkeypatch.setattr(drift, "drift_candidates", spy)
    drift.detect_drift(resource=resource)
    pv = PropagatedVersion.objects.get(resource=resource)
    assert pv.sync_state == SyncState.OUT_OF_SYNC, "the in-sync object of the older LIST erased the drift"
    assert pv.drift[0]["path"] == IMAGE and pv.drift[0]["after"] == "evil:latest"


def test_a_verdict_on_an_object_loaded_before_a_newer_verdict_is_dropped(fleet, web):
    resource = web()
    stale = load(resource)  # the watcher loaded it for an event of the in-sync object ...
    in_sync = live(fleet)
    watcher_found_drift(fleet, resource)  # ... and meanwhile the sweep recorded the newer drift
    assert drift.judge_live(stale, in_sync) == drift.SUPERSEDED
    pv = PropagatedVersion.objects.get(resource=resource)
    assert pv.sync_state == SyncState.OUT_OF_SYNC and pv.drift[0]["after"] == "evil:latest"


def test_the_status_of_an_object_loaded_before_a_newer_record_is_not_written(fleet, web):
    """Member status is written with the verdict, under its compare-and-set: an older event's status
    written after a worker recorded a newer object would stand, since that object's own event then
    matches the recorded version and is settled without a write."""
    resource = web()
    stale = load(resource)  # the watcher loaded it for an event of an older object ...
    older = live(fleet)
    older["status"] = {"replicas": 1, "updatedReplicas": 1, "readyReplicas": 0, "observedGeneration": 1}
    newer = {"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1, "observedGeneration": 2}
    # ... and meanwhile a worker recorded its apply: a newer object and that object's status
    PropagatedVersion.objects.filter(pk=stale.pk).update(live_resource_version="999999", remote_status=newer)
    assert drift.judge_live(stale, older) == drift.SUPERSEDED
    assert PropagatedVersion.objects.get(pk=stale.pk).remote_status == newer


def test_a_verdict_records_the_status_of_the_object_it_judged(fleet, web):
    resource = web()
    pv = load(resource)
    judged = live(fleet)
    judged["status"] = {"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}
    assert drift.judge_live(pv, judged) == "in_sync"
    assert PropagatedVersion.objects.get(pk=pv.pk).remote_status == judged["status"]
    watcher_found_drift(fleet, resource)  # out of sync: its status is recorded too
    drifted = live(fleet)
    assert PropagatedVersion.objects.get(pk=pv.pk).remote_status == drifted["status"]


def test_enforce_does_not_reapply_once_a_propagation_started_after_the_judged_load(fleet, web):
    resource = web(DriftPolicy.ENFORCE)
    fleet.external_edit("m128", "apps/v1", "Deployment", "shop", "web", EVIL)
    pv = load(resource)
    run = propagation.propagate_revision(resource)  # in flight now: the baseline is about to change
    assert drift.judge_live(pv, live(fleet)) == drift.SUPERSEDED
    assert image(fleet) == "evil:latest", "the old manifest was re-applied over a propagation in flight"
    drain(run)
    assert image(fleet) == "nginx:1.25"


def test_enforce_does_not_reapply_once_a_newer_revision_was_recorded(fleet, web):
    resource = web(DriftPolicy.ENFORCE)
    fleet.external_edit("m128", "apps/v1", "Deployment", "shop", "web", EVIL)
    pv = load(resource)
    # a worker recorded another write (its own live version) after the load
    PropagatedVersion.objects.filter(pk=pv.pk).update(live_resource_version="999999")
    assert drift.judge_live(pv, live(fleet)) == drift.SUPERSEDED
    assert image(fleet) == "evil:latest"


def test_enforce_reapplies_nothing_of_a_type_whose_propagation_is_disabled(fleet, web):
    """An admin disabled the type's propagation (KubeFed stops its sync controller): drift is still
    reported, but nothing of that type is written to the clusters (it was re-applied; a reviewer's
    finding)."""
    from federation.choices import Toggle
    from federation.models import FederatedType

    resource = web(DriftPolicy.ENFORCE)
    FederatedType.objects.filter(pk=resource.type_id).update(propagation=Toggle.DISABLED)
    fleet.external_edit("m128", "apps/v1", "Deployment", "shop", "web", EVIL)
    assert drift.judge_live(load(resource), live(fleet)) == "out_of_sync"
    assert image(fleet) == "evil:latest"
    assert PropagatedVersion.objects.get(resource=resource).sync_state == SyncState.OUT_OF_SYNC


class Fenced(Exception):
    """What a watcher's lease check raises once its lease may have lapsed (Engine.fence)."""


def test_a_fenced_verdict_writes_nothing_and_enforce_applies_nothing(fleet, web):
    resource = web(DriftPolicy.ENFORCE)
    fleet.external_edit("m128", "apps/v1", "Deployment", "shop", "web", EVIL)

    def lapsed():
        raise Fenced

    with pytest.raises(Fenced):
        drift.judge_live(load(resource), live(fleet), fence=lapsed)
    assert PropagatedVersion.objects.get(resource=resource).sync_state == SyncState.IN_SYNC, "the verdict was written"
    assert image(fleet) == "evil:latest"
    checks = []

    def lapses_after_the_verdict():  # the lease ran out while the verdict was being written
        checks.append(1)
        if len(checks) > 1:
            raise Fenced

    with pytest.raises(Fenced):
        drift.judge_live(load(resource), live(fleet), fence=lapses_after_the_verdict)
    assert PropagatedVersion.objects.get(resource=resource).sync_state == SyncState.OUT_OF_SYNC
    assert image(fleet) == "evil:latest", "Enforce re-applied after the lease may have lapsed"
    assert drift.judge_live(load(resource), live(fleet), fence=lambda: None) == "repaired"
    assert image(fleet) == "nginx:1.25"


def test_the_watchers_judging_checks_the_fence_for_an_event_and_a_relist(fleet, web):
    """handle_event and handle_list pass the watcher's lease check on to the verdict."""
    resource = web()
    cid = resource.propagated_versions.get().cluster_id
    target = handling.targets_for([cid])[(cid, resource.type_id)]
    conn = handling.connections_for([cid])[cid]
    fleet.external_edit("m128", "apps/v1", "Deployment", "shop", "web", EVIL)
    edited = live(fleet)

    def lapsed():
        raise Fenced

    with pytest.raises(Fenced):
        handling.handle_event(target, "MODIFIED", edited, conn, lapsed)
    with pytest.raises(Fenced):
        handling.handle_list(target, [edited], conn, None, lapsed)
    assert PropagatedVersion.objects.get(resource=resource).sync_state == SyncState.IN_SYNC


def test_a_relist_does_not_judge_an_object_whose_verdict_changed_since_before_its_list(fleet, web):
    resource = web()
    cid = resource.propagated_versions.get().cluster_id
    target = handling.targets_for([cid])[(cid, resource.type_id)]
    PropagatedVersion.objects.filter(resource=resource).update(live_resource_version="1")  # moved
    before = handling.verdicts_before_list(target)
    items = [live(fleet)]  # the LIST: the object in sync
    watcher_found_drift(fleet, resource)  # the sweep's verdict on a newer object, after the snapshot
    conn = handling.connections_for([cid])[cid]
    counts = handling.handle_list(target, items, conn, before)
    assert counts["judged"] == 0
    assert PropagatedVersion.objects.get(resource=resource).sync_state == SyncState.OUT_OF_SYNC


def test_the_normal_verdict_path_costs_no_extra_query(fleet, web, django_assert_num_queries):
    resource = web()
    fleet.external_edit("m128", "apps/v1", "Deployment", "shop", "web", EVIL)
    pv = load(resource)
    obj = live(fleet)
    # the verdict with the remote status it collected (compare-and-set in its WHERE), the audit
    # event (3): one fewer than when the status was written on its own
    with django_assert_num_queries(4):
        assert drift.judge_live(pv, obj) == "out_of_sync"


# --- 2. a relist that could not judge an object fails ------------------------------------------------


def test_a_transient_error_judging_a_listed_object_fails_the_relist(fleet, web, monkeypatch):
    resource = web()
    cid = resource.propagated_versions.get().cluster_id
    target = handling.targets_for([cid])[(cid, resource.type_id)]
    conn = handling.connections_for([cid])[cid]

    def unreachable(pv, *, conn=None, fence=None):
        raise kube.KubeTransientError("timed out", kind=kube.KIND_UNREACHABLE)

    monkeypatch.setattr(handling, "check_drift", unreachable)
    with pytest.raises(kube.KubeTransientError):  # missing from the list: the confirming GET failed
        handling.handle_list(target, [], conn)

    def refused(pv, *, conn=None, fence=None):
        raise kube.KubePermanentError("forbidden", kind=kube.KIND_FORBIDDEN)

    monkeypatch.setattr(handling, "check_drift", refused)
    assert handling.handle_list(target, [], conn)["judged"] == 1, "a permanent error: relisting would not help"


# --- 3, 4. the engine's tick ---------------------------------------------------------------------------


@pytest.fixture
def make_engine(monkeypatch):
    """An Engine whose watches wait for stop instead of connecting."""
    engines = []

    async def idle(state, io, *, stop, backoff):
        await stop.wait()

    monkeypatch.setattr(watch_engine, "run_watch", idle)

    def make(name="w-test"):
        engines.append(watch_engine.Engine(name))
        return engines[-1]

    yield make
    for engine in engines:
        engine.shutdown_pools()


def run_ticks(engine, ticks):
    async def main():
        engine.loop = asyncio.get_running_loop()
        engine.session, engine.stop = None, asyncio.Event()
        try:
            for _ in range(ticks):
                await engine.tick()
        finally:
            engine.stop.set()
            await asyncio.gather(*engine.tasks.values(), return_exceptions=True)

    run_async(main())  # not on the main thread: the browser tests' Playwright keeps a loop running there


def test_health_that_failed_to_be_written_is_written_at_the_next_tick(monkeypatch, make_engine):
    engine = make_engine()
    engine.states[(7, 1)] = watch_engine.WatchState(connected=False, last_error="cut")
    written = []

    def failing(name, health):
        raise RuntimeError("database away")

    monkeypatch.setattr(leases, "record_health", failing)
    with pytest.raises(RuntimeError):
        run_ticks(engine, 1)

    class Stop(Exception):
        pass

    def claim(name):
        raise Stop

    monkeypatch.setattr(leases, "record_health", lambda name, health: written.append(health))
    monkeypatch.setattr(leases, "claim_clusters", claim)
    with pytest.raises(Stop):
        run_ticks(engine, 1)
    assert list(written[0]) == [7] and written[0][7]["last_error"] == "cut"


@pytest.mark.django_db(transaction=True)  # the engine's database threads see what the test made
def test_a_cluster_whose_credentials_cannot_be_decrypted_stops_only_its_own_watches(monkeypatch, make_engine):
    good = ClusterFactory(name="good")
    bad = ClusterFactory(name="bad")
    web_deployment(placement={"clusters": ["good", "bad"]})  # a federated type with resources
    connect = handling.connection_for

    def connection_for(cluster):
        if cluster.pk == bad.pk:
            raise CredentialDecryptError("no configured key decrypts these credentials")
        return connect(cluster)

    monkeypatch.setattr(handling, "connection_for", connection_for)
    engine = make_engine()
    run_ticks(engine, 2)  # the second writes the first's health
    assert {cid for cid, _ in engine.tasks} == {good.pk}
    row = ClusterWatch.objects.get(cluster=bad)
    assert not row.connected and "CredentialDecryptError" in row.last_error


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_is_not_queued_behind_a_busy_database_pool(make_engine):
    """A burst of events to judge holds every database thread: the lease is still renewed (else
    another watcher would take these clusters while this one watches them)."""
    engine = make_engine("w-busy")
    leases.register_watcher("w-busy")
    stale = timezone.now() - timedelta(seconds=20)
    FleetWatcher.objects.filter(name="w-busy").update(heartbeat_at=stale)
    release = threading.Event()

    def heartbeat():  # read on a thread of neither pool
        try:
            return FleetWatcher.objects.get(name="w-busy").heartbeat_at
        finally:
            connection.close()

    async def main():
        engine.loop = asyncio.get_running_loop()
        engine.session, engine.stop = None, asyncio.Event()
        busy = [engine.loop.run_in_executor(engine.db_pool, release.wait) for _ in range(engine.db_pool._max_workers)]
        tick = asyncio.create_task(engine.tick())
        try:
            renewed = None
            for _ in range(50):
                await asyncio.sleep(0.1)
                renewed = await asyncio.to_thread(heartbeat)
                if renewed > stale:
                    break
            return renewed
        finally:
            release.set()
            await asyncio.gather(tick, *busy)
            engine.stop.set()
            await asyncio.gather(*engine.tasks.values(), return_exceptions=True)

    assert run_async(main()) > stale, "the heartbeat waited for the busy database threads"


# --- 5. a watcher name held by a live process ----------------------------------------------------------


def test_a_name_held_by_a_live_watcher_of_another_process_is_refused():
    leases.register_watcher("w1")
    FleetWatcher.objects.filter(name="w1").update(host="other-host", pid=4242)
    with pytest.raises(leases.WatcherNameInUse, match="already running"):
        leases.register_watcher("w1")
    assert FleetWatcher.objects.get(name="w1").pid == 4242, "the live watcher's identity is kept"
    # dead (silent for longer than the lease), or stopped: taken over
    FleetWatcher.objects.filter(name="w1").update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    leases.register_watcher("w1")
    FleetWatcher.objects.filter(name="w1").update(host="other-host", pid=4242, stopped_at=timezone.now())
    leases.register_watcher("w1")
    assert FleetWatcher.objects.get(name="w1").host != "other-host"


def test_a_name_held_by_a_killed_process_of_this_host_is_taken_over_at_once():
    """`make demo` killed (no clean stop) and started again: its watcher "demo" starts at once."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leases.register_watcher("demo")
    FleetWatcher.objects.filter(name="demo").update(pid=int(gone.stdout))  # a fresh heartbeat, a dead pid
    leases.register_watcher("demo")
    assert FleetWatcher.objects.get(name="demo").pid != int(gone.stdout)
    # the same pid on another host is not this host's to judge
    FleetWatcher.objects.filter(name="demo").update(host=f"not-{socket.gethostname()}", pid=int(gone.stdout))
    with pytest.raises(leases.WatcherNameInUse):
        leases.register_watcher("demo")


@pytest.mark.django_db(transaction=True)
def test_watch_fleet_refuses_to_start_under_a_live_watchers_name(monkeypatch):
    leases.register_watcher("busy")
    FleetWatcher.objects.filter(name="busy").update(host="other-host", pid=4242)

    async def tick(self):  # without the refusal: one heartbeat, then stop (never runs forever)
        self.stop.set()

    monkeypatch.setattr(watch_engine.Engine, "tick", tick)
    # on a thread of its own, as run_async: the command starts an event loop (asyncio.run)
    with ThreadPoolExecutor(1) as thread, pytest.raises(CommandError, match="already running"):
        thread.submit(call_command, "watch_fleet", "--name", "busy").result()
    assert FleetWatcher.objects.get(name="busy").stopped_at is None, "the live watcher was left alone"


@pytest.mark.django_db(transaction=True)
def test_heartbeats_go_on_while_the_database_threads_stay_busy(make_engine, settings):
    """The heartbeat renewed the leases, then waited for the database threads to bring the watches
    in line before the next one: with every thread busy for longer than a lease, the leases lapsed,
    every watch fenced itself and another watcher could take the clusters (a reviewer's finding;
    the test above sees the first renewal only). Now heartbeats follow one another on their own."""
    settings.FEDERATION_WATCH_LEASE_SECONDS = 1.5  # a heartbeat every 0.5 s
    engine = make_engine("w-busy")
    release = threading.Event()

    def heartbeat():  # read on a thread of neither pool
        try:
            return FleetWatcher.objects.filter(name="w-busy").values_list("heartbeat_at", flat=True).first()
        finally:
            connection.close()

    async def main():
        loop = asyncio.get_running_loop()
        busy = [loop.run_in_executor(engine.db_pool, release.wait) for _ in range(engine.db_pool._max_workers)]
        running = asyncio.create_task(engine.run())
        seen = set()
        try:
            for _ in range(40):  # 4 s: more than two leases with every database thread held
                await asyncio.sleep(0.1)
                if (at := await asyncio.to_thread(heartbeat)) is not None:
                    seen.add(at)
            return len(seen), engine.lease_current()
        finally:
            release.set()
            await asyncio.gather(*busy)
            engine.stop.set()
            await running

    renewals, current = run_async(main())
    assert renewals >= 5, f"{renewals} heartbeats in 4 s while the database threads were busy"
    assert current, "the leases stayed current"


@pytest.mark.django_db(transaction=True)
def test_a_judging_still_running_at_shutdown_is_fenced_and_waited_for(make_engine, settings):
    """Cancelling a watch's task does not stop its database thread: a judging still running there
    passed its fence after the clean stop had given the clusters back, and could re-apply under
    Enforce after another watcher took over (a reviewer's finding). The stop fences first, then waits
    for the database threads, then gives the clusters back."""
    from clusters.choices import ClusterRole, ClusterState

    settings.FEDERATION_WATCH_LEASE_SECONDS = 1.5
    cluster = ClusterFactory(role=ClusterRole.MEMBER, state=ClusterState.READY)
    engine = make_engine("w-stop")
    release, started, outcome = threading.Event(), threading.Event(), {}

    async def main():
        running = asyncio.create_task(engine.run())
        for _ in range(50):
            await asyncio.sleep(0.1)
            if cluster.pk in engine.owned and engine.lease_current():
                break
        fence = engine.fence(cluster.pk)

        def judging():  # an event's judging, its verdict about to be written
            started.set()
            release.wait()
            try:
                fence()
                outcome["fenced"] = False
            except watch_engine.LeaseLapsed:
                outcome["fenced"] = True
            outcome["done_at"] = timezone.now()

        job = asyncio.ensure_future(engine.in_db(judging))
        assert await asyncio.to_thread(started.wait, 10), "the judging is running on a database thread"
        engine.stop.set()
        await asyncio.sleep(0.3)
        release.set()
        await running
        await job

    run_async(main())
    assert outcome["fenced"], "the verdict would have been written after the stop"
    assert FleetWatcher.objects.get(name="w-stop").stopped_at >= outcome["done_at"]


@pytest.mark.django_db(transaction=True)
def test_a_federated_type_edited_while_watched_is_watched_again_on_its_new_path(make_engine):
    """Its watch kept the path it started with until the watcher restarted (a reviewer's finding)."""
    from federation.models import FederatedType

    cluster = ClusterFactory(name="solo")
    resource = web_deployment(placement={"clusters": ["solo"]})
    key = (cluster.pk, resource.type_id)
    engine = make_engine()

    def edit_type():
        try:
            FederatedType.objects.filter(pk=resource.type_id).update(version="v1beta2")
        finally:
            connection.close()

    async def main():
        engine.loop = asyncio.get_running_loop()
        engine.session, engine.stop = None, asyncio.Event()
        try:
            await engine.tick()
            first = engine.tasks[key]
            await asyncio.to_thread(edit_type)
            await engine.tick()
            second, path = engine.tasks[key], engine.targets[key].api_version
            await engine.tick()
            return first, second, engine.tasks[key], path
        finally:
            engine.stop.set()
            await asyncio.gather(*engine.tasks.values(), return_exceptions=True)

    first, second, third, path = run_async(main())
    assert second is not first and first.cancelled(), "watched again"
    assert path == "apps/v1beta2"
    assert third is second, "an unchanged type keeps its watch"


@pytest.mark.django_db(transaction=True)
def test_a_watcher_whose_database_threads_are_stuck_stops_and_lets_its_leases_lapse(make_engine, settings, monkeypatch):
    """Heartbeats no longer wait for the database threads: a statement that never returns left a
    watcher renewing leases of clusters it judged nothing on (a reviewer's finding). After three
    leases without a finished reconcile it stops, without giving back what a stuck thread may still
    write (its leases lapse to another watcher)."""
    from clusters.choices import ClusterRole, ClusterState

    settings.FEDERATION_WATCH_LEASE_SECONDS = 1.0
    monkeypatch.setattr(watch_engine, "STOP_WAIT_SECONDS", 0.3)
    cluster = ClusterFactory(role=ClusterRole.MEMBER, state=ClusterState.READY)
    stuck = threading.Event()
    monkeypatch.setattr(handling, "targets_for", lambda cluster_ids: stuck.wait(30) or {})
    engine = make_engine("w-stuck")
    try:
        run_async(asyncio.wait_for(engine.run(), timeout=20))
        assert engine.wedged and engine.stop.is_set()
        assert engine.db_running == 1, "the stuck call is still on its thread"
        row = FleetWatcher.objects.get(name="w-stuck")
        assert row.stopped_at is None, "not a clean stop: nothing given back while a thread may still write"
        assert ClusterWatch.objects.get(cluster=cluster).watcher_id == row.pk
    finally:
        stuck.set()
