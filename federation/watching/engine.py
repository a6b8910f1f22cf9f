"""The watcher process: one asyncio event loop holds one watch per (cluster, federated type) for
the clusters this process leases; LISTs and database work run on two small thread pools.

Why asyncio and not a thread per watch: 1,000 clusters x N types is thousands of connections that
are idle nearly all the time. A coroutine and an open socket cost a few kilobytes; a thread costs a
stack (and a GIL hand-off per wake-up), so thousands of threads would spend the memory and idle-CPU
budget on doing nothing. The blocking parts (the kubernetes client's LIST, Django's ORM, Enforce's
apply) stay on bounded pools, so their cost grows with the number of changes, not of watches.

Per watch, as client-go's reflector does: LIST with the label selector, then WATCH from the list's
resourceVersion with bookmarks; a watch the server ends is resumed from the last version seen (an
event or a bookmark); 410 Gone means relist; any other failure reconnects after a jittered
exponential backoff. At start-up at most FEDERATION_WATCH_STARTUP_CONCURRENCY LISTs and connection
openings are in flight at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import close_old_connections
from django.utils import timezone

from clusters import kube
from federation.propagation.common import kube_timeout, setting
from federation.propagation.drift import managed_selector
from federation.watching import handling, leases

logger = logging.getLogger(__name__)


class LeaseLapsed(RuntimeError):
    """This watcher may no longer hold the cluster: its last heartbeat gave it up, or renewed the
    leases too long ago (``Engine.hold_lease``, ``Engine.fence``)."""


# A watcher fences itself this long before its lease runs out as it last renewed it, a margin for
# clocks that differ between the hosts of two watchers (the other takes over by its own clock).
FENCE_MARGIN = 0.1  # of the lease
# A reconcile of the watches still running after this many leases: the database threads are stuck,
# and the watcher stops rather than renew leases of clusters it judges nothing on.
WEDGED_LEASES = 3
# How long a clean stop waits for the database threads before giving the clusters back; past it
# they are left to lapse (the threads are fenced: nothing they finish is written).
STOP_WAIT_SECONDS = 15.0


def backoff_delay(failures: int, *, base: float = 1.0, cap: float = 30.0, rand=random.random) -> float:
    """Seconds before reconnect attempt ``failures`` (1, 2, ...): exponential, capped, jittered to
    between half and all of it so that a fleet that failed together does not come back together."""
    if failures <= 0:
        return 0.0
    ceiling = min(cap, base * (2 ** (failures - 1)))
    return ceiling * (0.5 + 0.5 * rand())


@dataclass
class WatchState:
    """A watch's progress and health (read by the heartbeat, written only by its coroutine)."""

    resource_version: str = ""
    connected: bool = False
    failures: int = 0
    reconnects: int = 0
    relists: int = 0
    events: int = 0
    last_event_at: float | None = None
    last_bookmark_at: float | None = None
    last_relist_at: float | None = None
    last_error: str = ""
    outcomes: dict[str, int] = field(default_factory=dict)


class WatchIO:
    """What a watch loop does outside itself; the engine's is the network and the database, the
    unit tests give their own."""

    async def relist(self, state: WatchState) -> str:  # returns the list's resourceVersion
        raise NotImplementedError

    def stream(self, state: WatchState):  # async iterator of kube.WatchEvent from state.resource_version
        raise NotImplementedError

    async def handle(self, state: WatchState, event: kube.WatchEvent) -> None:
        raise NotImplementedError

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def run_watch(state: WatchState, io: WatchIO, *, stop: asyncio.Event, backoff=backoff_delay) -> None:
    """One watch until ``stop``: relist when there is no version to resume from, watch, resume."""
    while not stop.is_set():
        relisted = got = False
        try:
            if not state.resource_version:
                state.resource_version = await io.relist(state)
                state.relists += 1
                state.last_relist_at = time.time()
                relisted = True
            opened = time.monotonic()
            # closed on the way out, cancelled or not: its connection is released now, not at GC
            async with contextlib.aclosing(io.stream(state)) as stream:
                async for event in stream:
                    got = True
                    state.connected, state.failures = True, 0
                    if event.type == "BOOKMARK":
                        state.last_bookmark_at = time.time()
                    else:
                        await io.handle(state, event)
                        state.events += 1
                        state.last_event_at = time.time()
                    if event.resource_version:  # only once handled: a crash resumes before it
                        state.resource_version = event.resource_version
                    if stop.is_set():
                        return
            # the server ended the watch (timeoutSeconds): resume at once from the last version;
            # a connection cut before anything came is a failure (no reconnecting in a tight loop)
            if not got and time.monotonic() - opened < 1.0 and not stop.is_set():
                raise kube.KubeTransientError(
                    "The watch ended before any event or bookmark.", kind=kube.KIND_UNREACHABLE
                )
        except kube.WatchExpired:
            state.connected = False
            state.resource_version = ""  # too old: relist, then watch from the list's version
            state.last_error = "410 Gone: relisting"
            if relisted and not got:
                # the list's own version was gone before anything came: a server that keeps
                # answering 410 would be listed in a tight loop; backed off as a failure (client-go too)
                state.failures += 1
                await io.sleep(backoff(state.failures))
        except asyncio.CancelledError:
            state.connected = False
            raise
        except Exception as exc:  # KubeError, a database error, LeaseLapsed: never a crash loop, a backoff
            state.connected = False
            state.failures += 1
            state.reconnects += 1
            expected = isinstance(exc, (kube.KubeError, LeaseLapsed))
            state.last_error = str(exc)[:500] if expected else f"{type(exc).__name__}: {exc}"
            if not expected:
                logger.exception("watch loop error")
            await io.sleep(backoff(state.failures))


class EngineIO(WatchIO):
    """The watch loop's I/O for one (cluster, federated type) in this engine: list, stream, judge."""

    def __init__(self, engine: Engine, target: handling.Target):
        self.engine, self.target = engine, target

    async def relist(self, state: WatchState) -> str:
        engine, target = self.engine, self.target
        await engine.hold_lease(target.cluster_id)
        conn = engine.connections[target.cluster_id]
        # the list is judged inside the startup gate too: a list waiting for a database thread holds
        # its objects, and 1,000 of them waiting at once were most of the watcher's memory
        async with engine.startup:
            before = await engine.in_db(handling.verdicts_before_list, target)
            items, version = await engine.loop.run_in_executor(
                engine.net_pool,
                lambda: kube.list_with_version(
                    conn,
                    api_version=target.api_version,
                    plural=target.plural,
                    label_selector=managed_selector(),
                    timeout=kube_timeout(),
                ),
            )
            await engine.hold_lease(target.cluster_id)  # the LIST may have outlasted the lease
            counts = await engine.in_db(
                handling.handle_list, target, items, conn, before, engine.fence(target.cluster_id)
            )
        for name, n in counts.items():
            state.outcomes[name] = state.outcomes.get(name, 0) + n
        return version

    def stream(self, state: WatchState):
        engine, target = self.engine, self.target
        return kube.watch_objects(
            engine.session,
            engine.connections[target.cluster_id],
            api_version=target.api_version,
            plural=target.plural,
            resource_version=state.resource_version,
            label_selector=managed_selector(),
            timeout_seconds=int(engine.watch_timeout * (1 + random.random())),  # client-go: 1x-2x
            gate=engine.startup,
            on_open=lambda: setattr(state, "connected", True),
        )

    async def handle(self, state: WatchState, event: kube.WatchEvent) -> None:
        target = self.target
        # waits while the lease may have lapsed; raised: not handled, and the watch resumes before it
        await self.engine.hold_lease(target.cluster_id)
        if target.seen.get(handling.object_key(event.object)) == event.resource_version and event.type != "DELETED":
            outcome = "cheap"  # no thread hop for what is known
        else:
            outcome = await self.engine.in_db(
                handling.handle_event,
                target,
                event.type,
                event.object,
                self.engine.connections[target.cluster_id],
                self.engine.fence(target.cluster_id),
            )
        state.outcomes[outcome] = state.outcomes.get(outcome, 0) + 1


class Engine:
    """The watcher process's loop: heartbeat and leases, one task per watch, health written back."""

    def __init__(self, name: str):
        self.name = name
        self.lease = leases.lease_seconds()
        self.watch_timeout = float(setting("FEDERATION_WATCH_TIMEOUT_SECONDS", 300))
        self.backoff_cap = float(setting("FEDERATION_WATCH_BACKOFF_MAX_SECONDS", 30))
        self.db_pool = ThreadPoolExecutor(int(setting("FEDERATION_WATCH_DB_THREADS", 4)), thread_name_prefix="watch-db")
        # the heartbeat and the leases on a thread of their own: queued behind a burst of events to
        # judge (or slow clusters' GETs and Enforce applies) they could lapse, and another watcher
        # would take this one's clusters while it still watches them
        self.lease_pool = ThreadPoolExecutor(1, thread_name_prefix="watch-lease")
        self.net_pool = ThreadPoolExecutor(
            int(setting("FEDERATION_WATCH_STARTUP_CONCURRENCY", 32)), thread_name_prefix="watch-list"
        )
        self.tasks: dict[tuple[int, int], asyncio.Task] = {}
        self.states: dict[tuple[int, int], WatchState] = {}
        self.targets: dict[tuple[int, int], handling.Target] = {}
        self.connections: dict[int, kube.ClusterConnection] = {}
        self.flushed: dict[int, dict] = {}
        self.stop = asyncio.Event()
        # targets that settle from now on get their (cluster, type) relisted (handling.settled_since)
        self.settled_since = timezone.now() - timedelta(seconds=5)
        self.settled_seen: dict[int, object] = {}
        self.wedged = False  # stopped because its database threads were stuck (run's watchdog)
        self.db_running = 0  # calls running on a database thread now (in_db): what a clean stop waits for
        self.db_running_lock = threading.Lock()
        self.isolated: set[int] = set()  # held clusters isolated at the last heartbeat (handling.isolated_ids)
        # the clusters the last heartbeat found this watcher holding, and until when those leases are
        # surely its own (lease_current): by time.monotonic() and by time.time(), which unlike the
        # monotonic clock also counts a suspended host; set by each heartbeat that renewed them
        self.owned: set[int] = set()
        self.lease_valid_until = 0.0
        self.lease_valid_until_wall = 0.0
        self.renewed = asyncio.Event()

    async def in_db(self, fn, *args, pool: ThreadPoolExecutor | None = None):
        def call():
            with self.db_running_lock:
                self.db_running += 1
            try:
                close_old_connections()
                return fn(*args)
            finally:
                with self.db_running_lock:
                    self.db_running -= 1

        return await self.loop.run_in_executor(pool or self.db_pool, call)

    async def in_lease_db(self, fn, *args):
        """``in_db`` on the heartbeat's own thread (``lease_pool``)."""
        return await self.in_db(fn, *args, pool=self.lease_pool)

    async def hold_lease(self, cluster_id: int) -> None:
        """Return once this watcher surely holds ``cluster_id``: its last heartbeat renewed its leases
        less than (1 - FENCE_MARGIN) of a lease ago and found the cluster among them. Until then it
        waits for the next heartbeat that renews them: a watcher whose heartbeat fails, or that was
        paused (a stopped process, a frozen VM) while another took its clusters over, judges and
        repairs nothing, and its watches wait with their connections open (no reconnect storm while
        the database is away). Raises LeaseLapsed for a cluster that heartbeat gave up."""
        while not self.lease_current():
            await self.renewed.wait()
        if cluster_id not in self.owned:
            raise LeaseLapsed(f"Watcher {self.name} no longer holds this cluster; its watch is being stopped.")

    def lease_current(self) -> bool:
        """Whether the last heartbeat renewed the leases less than (1 - FENCE_MARGIN) of a lease ago,
        by both clocks. Safe from any thread."""
        return time.monotonic() < self.lease_valid_until and time.time() < self.lease_valid_until_wall

    def fence(self, cluster_id: int):
        """A check for the database threads, made right before each verdict is written and before
        each Enforce apply: an event that passed hold_lease may wait on a busy database thread while
        the next heartbeat gives its cluster back (or the process is paused), and the watcher that
        takes it over judges it too. Raises LeaseLapsed; the watch then resumes before that event."""

        def check() -> None:
            if not self.lease_current() or cluster_id not in self.owned:
                raise LeaseLapsed(f"Watcher {self.name} may no longer hold this cluster; the verdict is not written.")

        return check

    def backoff(self, failures: int) -> float:
        return backoff_delay(failures, cap=self.backoff_cap)

    async def run(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.startup = asyncio.Semaphore(int(setting("FEDERATION_WATCH_STARTUP_CONCURRENCY", 32)))
        self.session = kube.WatchSession()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self.loop.add_signal_handler(sig, self.stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        try:
            await self.in_lease_db(leases.register_watcher, self.name)
        except BaseException:  # refused (WatcherNameInUse): nothing of that watcher's is touched
            self.shutdown_pools()
            await self.session.close()
            raise
        logger.info("watcher %s started (lease %ss)", self.name, self.lease)
        reconciling: asyncio.Task | None = None
        reconcile_started = time.monotonic()
        try:
            while not self.stop.is_set():
                try:
                    owned = await self.heartbeat()
                except leases.WatcherNameInUse as exc:  # a newer process runs under this name now
                    logger.error("watcher %s stops: %s", self.name, exc)
                    self.owned = set()
                    self.stop.set()
                    break
                except Exception:  # the database away for a moment: keep the watches, try again
                    logger.exception("watcher %s: heartbeat failed", self.name)
                else:
                    # the watches follow on the database threads, which a burst of events may keep
                    # busy: the next heartbeat does not wait for them (its leases would lapse, and
                    # every watch fence itself); one reconcile at a time, with the newest holdings
                    if reconciling is None or reconciling.done():
                        reconciling, reconcile_started = (
                            asyncio.create_task(self.reconcile_logged(owned)),
                            time.monotonic(),
                        )
                    elif time.monotonic() - reconcile_started > WEDGED_LEASES * self.lease:
                        # the database threads are stuck (a statement that never returns): renewing on
                        # would keep these clusters with nobody judging them; stop, and let the leases
                        # lapse to another watcher (a supervisor restarts this one)
                        logger.error(
                            "watcher %s stops: its watches have not been reconciled for %.0f s (database threads stuck)",
                            self.name,
                            time.monotonic() - reconcile_started,
                        )
                        self.wedged = True
                        self.stop.set()
                        break
                try:
                    await asyncio.wait_for(self.stop.wait(), timeout=max(0.5, self.lease / 3))
                except TimeoutError:
                    pass
        finally:
            if reconciling is not None:
                reconciling.cancel()
                await asyncio.gather(reconciling, return_exceptions=True)
            await self.shutdown()

    async def tick(self) -> None:
        """One heartbeat and the watches brought in line with it."""
        await self.reconcile(await self.heartbeat())

    async def reconcile_logged(self, owned: set[int]) -> None:
        try:
            await self.reconcile(owned)
        except Exception:  # the database away for a moment: the next heartbeat's reconcile tries again
            logger.exception("watcher %s: reconciling its watches failed", self.name)

    async def heartbeat(self) -> set[int]:
        """Write the watches' health and renew this watcher's leases, on the lease threads only.
        Returns the clusters it holds now."""
        health = self.health_changes()
        await self.in_lease_db(leases.record_health, self.name, health)
        self.flushed.update(health)  # only once written: a failed write is tried again next tick
        renewing, renewing_wall = time.monotonic(), time.time()  # the leases run from no earlier than this
        owned = await self.in_lease_db(leases.claim_clusters, self.name)
        valid_for = self.lease * (1 - FENCE_MARGIN)
        # the set first: a thread reading both (fence) sees a new validity only with the new set
        self.owned = set(owned)
        self.lease_valid_until, self.lease_valid_until_wall = renewing + valid_for, renewing_wall + valid_for
        renewed, self.renewed = self.renewed, asyncio.Event()
        renewed.set()  # wakes what waited in hold_lease
        return set(owned)

    async def reconcile(self, owned: set[int]) -> None:
        """Start, restart and stop the watches for the clusters a heartbeat found this watcher holding."""
        wanted = await self.in_db(handling.targets_for, owned)
        isolated = await self.in_db(handling.isolated_ids, owned)
        # the last await before the relists: what settled_since moved past is relisted without a
        # database call in between that could fail and lose it
        settled, self.settled_since = await self.in_db(
            handling.settled_since, owned, self.settled_since, self.settled_seen
        )
        restored, self.isolated = (self.isolated - isolated) & set(owned), isolated  # events not judged meanwhile
        settled |= {key for key in self.tasks if key[0] in restored}
        for key in settled & set(self.tasks):  # judged again from a fresh LIST (see settled_since)
            self.tasks.pop(key).cancel()
            state = self.states[key]
            state.resource_version = ""
            self.tasks[key] = asyncio.create_task(
                run_watch(state, EngineIO(self, self.targets[key]), stop=self.stop, backoff=self.backoff)
            )
        # rotated credentials: drop the old connection; the watches start again below with the new one
        stale = handling.rotated(self.connections, await self.in_db(handling.credential_versions, owned))
        for cid in stale:
            del self.connections[cid]
        # a federated type edited since its watch started (its version or plural): watched again on
        # the new path, rather than on the old one until a restart (or failing, once not served)
        edited = {
            k
            for k, t in wanted.items()
            if k in self.targets and handling.watched_as(t) != handling.watched_as(self.targets[k])
        }
        for key in [k for k in self.tasks if k not in wanted or k[0] in stale or k in edited]:
            self.tasks.pop(key).cancel()
            self.states.pop(key, None)
            self.targets.pop(key, None)
        for key in [k for k in self.states if k not in self.tasks and k not in wanted]:
            self.states.pop(key)  # a watch that never started (no connection), no longer wanted
        new = [key for key in wanted if key not in self.tasks]
        missing = {cid for cid, _ in new if cid not in self.connections}
        failed: dict[int, str] = {}
        if missing:  # one by one: a cluster whose credentials cannot be used stops only its own watches
            built, failed = await self.in_db(handling.build_connections, missing)
            self.connections.update(built)
        for cid in [c for c in self.connections if c not in owned]:
            del self.connections[cid]
        for cid in [c for c in self.flushed if c not in owned]:
            del self.flushed[cid]
        for key in new:
            if key[0] in failed:  # not started: its health says why (tried again next tick)
                state = self.states.setdefault(key, WatchState())
                state.connected, state.last_error = False, failed[key[0]]
                continue
            if key[0] not in self.connections:
                continue
            self.targets[key] = wanted[key]
            self.states[key] = WatchState()
            self.tasks[key] = asyncio.create_task(
                run_watch(self.states[key], EngineIO(self, wanted[key]), stop=self.stop, backoff=self.backoff)
            )

    def health_changes(self) -> dict[int, dict]:
        """Per cluster, its watches' health; only clusters whose health changed since last written
        (times within 10 s count as unchanged), so an idle fleet costs few writes. Nothing is marked
        written here: tick does once record_health succeeded."""
        by_cluster: dict[int, list[WatchState]] = {}
        for (cid, _), state in self.states.items():
            by_cluster.setdefault(cid, []).append(state)
        changes = {}
        for cid, states in by_cluster.items():

            def latest(attr, states=states):
                values = [getattr(s, attr) for s in states if getattr(s, attr)]
                return datetime.fromtimestamp(max(values), UTC) if values else None

            errors = [s.last_error for s in states if not s.connected and s.last_error]
            fields = {
                "connected": all(s.connected for s in states),
                "watches": sum(s.connected for s in states),
                "reconnects": sum(s.reconnects for s in states),
                "last_event_at": latest("last_event_at"),
                "last_bookmark_at": latest("last_bookmark_at"),
                "last_relist_at": latest("last_relist_at"),
                "last_error": errors[0] if errors else "",
            }
            before = self.flushed.get(cid)
            if before is None or any(_differs(before[k], v, 10 if k.endswith("_at") else 0) for k, v in fields.items()):
                changes[cid] = fields  # marked flushed by tick once written
        return changes

    async def shutdown(self) -> None:
        self.stop.set()
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        await self.session.close()
        # fenced before the clusters are given back: a judging still running on a database thread
        # (cancelling its task does not stop the thread) writes no verdict and re-applies nothing
        # once another watcher may have taken its cluster over; waited for, so none is left
        self.owned = set()
        self.lease_valid_until = self.lease_valid_until_wall = 0.0
        self.db_pool.shutdown(wait=False, cancel_futures=True)  # what is queued never starts
        deadline = time.monotonic() + STOP_WAIT_SECONDS
        while self.db_running and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        drained = not self.db_running
        try:
            if drained:
                await self.in_lease_db(leases.stop_watcher, self.name)
            else:  # a thread still runs (fenced): its clusters are taken over once its leases lapse
                logger.warning("watcher %s: database threads still busy; its leases are left to lapse", self.name)
        finally:
            self.shutdown_pools()
        logger.info("watcher %s stopped", self.name)

    def shutdown_pools(self) -> None:
        for pool in (self.db_pool, self.lease_pool, self.net_pool):
            pool.shutdown(wait=False, cancel_futures=True)


def _differs(before, after, slack: float) -> bool:
    if isinstance(before, datetime) and isinstance(after, datetime):
        return abs((after - before).total_seconds()) > slack
    return before != after


def serve(name: str) -> bool:
    """Run a watcher until SIGTERM / SIGINT (`manage.py watch_fleet`). False: it stopped because its
    database threads were stuck. A thread still stuck would keep the process from exiting (the
    interpreter joins them): the process then ends at once, with status 1, for its supervisor."""
    _raise_file_limit()
    engine = Engine(name)
    asyncio.run(engine.run())
    if engine.db_running:
        logging.shutdown()
        os._exit(1)
    return not engine.wedged


def _raise_file_limit() -> None:
    """One socket per watch: lift the soft open-files limit to the hard one."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))
    except (ImportError, ValueError, OSError):
        pass
