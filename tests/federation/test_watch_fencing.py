"""A watcher fences itself: once its leases may have lapsed (its heartbeat failed, or the process was
paused while another watcher took its clusters over) it judges no event and no relist until a
heartbeat has renewed them, and then only for the clusters that heartbeat found it holding. Real
leases in the database; the judging itself is recorded instead of run."""

import asyncio
import threading
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import connection
from django.utils import timezone

from clusters import kube
from clusters.choices import ClusterRole, ClusterState
from federation.models import ClusterWatch, FleetWatcher
from federation.watching import engine as watch_engine
from federation.watching import handling, leases
from tests.clusters.factories import ClusterFactory
from tests.utils import run_async

pytestmark = pytest.mark.django_db(transaction=True)  # the engine's database threads see the rows


def event(rv):
    obj = {"metadata": {"name": "web", "namespace": "shop", "resourceVersion": rv}}
    return kube.WatchEvent("MODIFIED", obj, rv)


@pytest.fixture
def judged(monkeypatch):
    """The events the watcher judged (instead of judging them)."""
    seen = []

    def handle_event(target, event_type, obj, conn, fence=None):
        if fence is not None:
            fence()  # as judge_live does before writing its verdict
        seen.append(obj["metadata"]["resourceVersion"])
        return "in_sync"

    monkeypatch.setattr(handling, "handle_event", handle_event)
    return seen


@pytest.fixture
def engine(monkeypatch):
    """A watcher whose watches wait for stop instead of connecting (its EngineIO is driven by hand)."""

    async def idle(state, io, *, stop, backoff):
        await stop.wait()

    monkeypatch.setattr(watch_engine, "run_watch", idle)
    made = watch_engine.Engine("w-paused")
    yield made
    made.shutdown_pools()


def in_thread(fn):
    """Database work from the event loop's side, on a thread of its own (as the engine's pools do)."""

    def call():
        try:
            return fn()
        finally:
            connection.close()

    return asyncio.to_thread(call)


def take_over_from(name: str, by: str) -> set[int]:
    """``name`` was silent for longer than its lease: ``by`` takes its clusters, as a live watcher does."""
    past = timezone.now() - timedelta(seconds=leases.lease_seconds() + 1)
    FleetWatcher.objects.filter(name=name).update(heartbeat_at=past)
    ClusterWatch.objects.filter(watcher__name=name).update(lease_until=past)
    leases.register_watcher(by)
    return leases.claim_clusters(by)


def drive(engine, scenario):
    async def main():
        engine.loop = asyncio.get_running_loop()
        engine.session, engine.stop = None, asyncio.Event()
        try:
            return await scenario()
        finally:
            engine.stop.set()
            await asyncio.gather(*engine.tasks.values(), return_exceptions=True)

    return run_async(main())


def test_an_event_waits_while_the_lease_may_have_lapsed_and_is_judged_once_a_heartbeat_renews_it(engine, judged):
    cluster = ClusterFactory(name="m1", role=ClusterRole.MEMBER, state=ClusterState.READY)
    io = watch_engine.EngineIO(engine, handling.Target(cluster.pk, 1, "apps/v1", "deployments", "Deployment", True))

    async def scenario():
        await engine.tick()
        # no federated type to watch here, so no connection was made: the judge is recorded anyway
        engine.connections[cluster.pk] = SimpleNamespace(cache_key=None)
        await io.handle(watch_engine.WatchState(), event("101"))
        assert judged == ["101"], "judged at once while the lease is held"
        engine.lease_valid_until = time.monotonic() - 1  # the heartbeat failed for most of a lease
        waiting = asyncio.create_task(io.handle(watch_engine.WatchState(), event("102")))
        await asyncio.sleep(0.3)
        assert not waiting.done() and judged == ["101"], "judged while the lease may have lapsed"
        await engine.tick()  # renewed, still this watcher's
        await asyncio.wait_for(waiting, timeout=5)
        assert judged == ["101", "102"]

    drive(engine, scenario)


def test_a_watcher_paused_past_its_lease_judges_nothing_of_the_clusters_another_took_over(engine, judged):
    clusters = [ClusterFactory(name=f"m{i}", role=ClusterRole.MEMBER, state=ClusterState.READY) for i in range(2)]
    target = handling.Target(clusters[0].pk, 1, "apps/v1", "deployments", "Deployment", True)
    io = watch_engine.EngineIO(engine, target)

    async def scenario():
        await engine.tick()
        assert engine.owned == {c.pk for c in clusters}
        # paused (SIGSTOP, a frozen VM) for longer than the lease: its clock ran on, another took over
        engine.lease_valid_until = time.monotonic() - 1
        taken = await in_thread(lambda: take_over_from("w-paused", by="w-other"))
        assert taken == {c.pk for c in clusters}
        # resumed: an event already in its watch stream, and a relist, before its next heartbeat
        waiting = asyncio.create_task(io.handle(watch_engine.WatchState(), event("201")))
        relisting = asyncio.create_task(io.relist(watch_engine.WatchState()))
        await asyncio.sleep(0.3)
        assert not waiting.done() and not relisting.done()
        await engine.tick()  # its heartbeat: every cluster is w-other's now
        assert engine.owned == set()
        for pending in (waiting, relisting):
            with pytest.raises(watch_engine.LeaseLapsed):
                await asyncio.wait_for(pending, timeout=5)

    drive(engine, scenario)
    assert judged == [], "a cluster another watcher holds was judged by the paused one"


def test_a_watch_whose_cluster_was_given_up_backs_off_quietly_and_resumes_before_the_event():
    """run_watch: LeaseLapsed is not handled and not skipped; the watch resumes before that event."""

    class GivenUp(watch_engine.WatchIO):
        def __init__(self, stop):
            self.stop, self.watched_from, self.sleeps = stop, [], []

        async def relist(self, state):
            return "100"

        def stream(self, state):
            self.watched_from.append(state.resource_version)

            async def events():
                yield event("101")

            return events()

        async def handle(self, state, ev):
            if len(self.watched_from) >= 2:
                self.stop.set()
                return
            raise watch_engine.LeaseLapsed("given up")

        async def sleep(self, seconds):
            self.sleeps.append(seconds)

    async def main():
        stop = asyncio.Event()
        io = GivenUp(stop)
        state = watch_engine.WatchState()
        await asyncio.wait_for(watch_engine.run_watch(state, io, stop=stop, backoff=lambda n: 0.5), timeout=5)
        return io, state

    io, state = run_async(main())
    assert io.watched_from == ["100", "100"], "the event not handled was skipped"
    assert io.sleeps == [0.5] and state.last_error == "given up"


def test_an_event_waiting_for_a_busy_database_thread_is_not_judged_once_its_cluster_was_given_up(engine, judged):
    """It passed hold_lease, then waited behind a burst of other events' judging while the next
    heartbeat found the cluster taken over: the check made on the database thread stops it."""
    cluster = ClusterFactory(name="m1", role=ClusterRole.MEMBER, state=ClusterState.READY)
    io = watch_engine.EngineIO(engine, handling.Target(cluster.pk, 1, "apps/v1", "deployments", "Deployment", True))
    release = threading.Event()

    async def scenario():
        await engine.tick()
        engine.connections[cluster.pk] = SimpleNamespace(cache_key=None)
        busy = [engine.loop.run_in_executor(engine.db_pool, release.wait) for _ in range(engine.db_pool._max_workers)]
        queued = asyncio.create_task(io.handle(watch_engine.WatchState(), event("301")))
        await asyncio.sleep(0.2)  # past hold_lease, waiting for a database thread
        engine.lease_valid_until = time.monotonic() - 1  # another took the cluster meanwhile ...
        await in_thread(lambda: take_over_from("w-paused", by="w-other"))
        heartbeat = asyncio.create_task(engine.tick())  # ... which this watcher's heartbeat finds
        for _ in range(50):
            if engine.owned == set() and time.monotonic() < engine.lease_valid_until:
                break
            await asyncio.sleep(0.05)
        assert engine.owned == set(), "the heartbeat did not renew"
        release.set()
        await asyncio.gather(heartbeat, *busy)
        with pytest.raises(watch_engine.LeaseLapsed):
            await asyncio.wait_for(queued, timeout=5)

    drive(engine, scenario)
    assert judged == [], "an event of a cluster another watcher holds was judged"


def test_the_lease_lapses_by_the_wall_clock_too(engine, judged):
    """A suspended host or a frozen VM: the monotonic clock may not count the pause, time.time() does."""
    cluster = ClusterFactory(name="m1", role=ClusterRole.MEMBER, state=ClusterState.READY)
    io = watch_engine.EngineIO(engine, handling.Target(cluster.pk, 1, "apps/v1", "deployments", "Deployment", True))

    async def scenario():
        await engine.tick()
        engine.connections[cluster.pk] = SimpleNamespace(cache_key=None)
        assert engine.lease_valid_until > time.monotonic()
        engine.lease_valid_until_wall = time.time() - 1  # resumed after a pause its monotonic clock missed
        waiting = asyncio.create_task(io.handle(watch_engine.WatchState(), event("401")))
        await asyncio.sleep(0.3)
        assert not waiting.done() and judged == []
        await engine.tick()
        await asyncio.wait_for(waiting, timeout=5)
        assert judged == ["401"]

    drive(engine, scenario)


def test_a_paused_process_whose_name_a_new_process_took_renews_nothing(engine):
    """Leases are renewed only by the process that registered the name: the old one, resumed, is
    refused (WatcherNameInUse) and renews none of the new one's leases."""
    clusters = [ClusterFactory(name=f"m{i}", role=ClusterRole.MEMBER, state=ClusterState.READY) for i in range(2)]
    leases.register_watcher("w-paused")
    assert leases.claim_clusters("w-paused") == {c.pk for c in clusters}
    # paused past its lease; a new process (another pid) registered the name and renewed the leases
    renewed_by_new = timezone.now() + timedelta(seconds=leases.lease_seconds())
    FleetWatcher.objects.filter(name="w-paused").update(host="new-host", pid=4242, heartbeat_at=timezone.now())
    ClusterWatch.objects.update(lease_until=renewed_by_new)
    with pytest.raises(leases.WatcherNameInUse):
        leases.claim_clusters("w-paused")
    assert FleetWatcher.objects.get(name="w-paused").pid == 4242
    assert set(ClusterWatch.objects.values_list("lease_until", flat=True)) == {renewed_by_new}


def test_a_watcher_whose_name_was_taken_over_stops(engine, monkeypatch):
    """It stops, and leaves the new process's registration and leases alone: its clean stop freed
    every cluster leased under the name and marked the new process stopped (a reviewer's finding),
    while that one went on watching them."""
    cluster = ClusterFactory(role=ClusterRole.MEMBER, state=ClusterState.READY)
    leased_until = timezone.now() + timedelta(seconds=leases.lease_seconds())

    def replaced(name):
        # a new process registered the name while this one was paused, and holds the cluster
        FleetWatcher.objects.filter(name=name).update(host="new-host", pid=4242)
        ClusterWatch.objects.update_or_create(
            cluster=cluster, defaults={"watcher": FleetWatcher.objects.get(name=name), "lease_until": leased_until}
        )
        raise leases.WatcherNameInUse(f"A watcher named {name!r} is already running (host new-host, pid 4242).")

    monkeypatch.setattr(leases, "claim_clusters", replaced)
    engine.owned = {1}
    # on a thread of its own, as run_async: run() starts no event loop of its own here
    run_async(asyncio.wait_for(engine.run(), timeout=10))
    assert engine.stop.is_set() and engine.owned == set()
    new = FleetWatcher.objects.get(name="w-paused")
    assert (new.host, new.pid, new.stopped_at) == ("new-host", 4242, None)
    held = ClusterWatch.objects.get(cluster=cluster)
    assert held.watcher_id == new.pk and held.lease_until == leased_until
