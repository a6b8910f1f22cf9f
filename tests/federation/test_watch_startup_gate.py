"""The watcher's start-up gate (FEDERATION_WATCH_STARTUP_CONCURRENCY) bounds relists from the LIST
through the judging of what it returned: 1,000 lists waiting at once for the four database threads
held their objects, and were most of the watcher's memory (drift_1000x200: 886 MB -> 371 MB).

A real Engine relists against the simulator; a spy on the judging step counts how many run at once."""

import asyncio
import threading
import time

import pytest

from federation.watching import engine as watch_engine
from federation.watching import handling
from tests.faults.helpers import federate, register_clusters
from tests.utils import run_async

pytestmark = pytest.mark.django_db(transaction=True)


def most_lists_judged_at_once(fleet, gate: int, monkeypatch) -> int:
    clusters = register_clusters(fleet, fleet.names)
    federate("ConfigMap", "gate", [c.name for c in clusters], namespace="default")
    ids = [c.pk for c in clusters]
    judge = handling.handle_list
    changed = threading.Condition()
    running, most = 0, 0

    def spy(*args):
        nonlocal running, most
        with changed:
            running += 1
            most = max(most, running)
            changed.notify_all()
            # hold the judge until another one joins it (once two have met, no judge waits): under a wide
            # gate one does, however loaded the machine; under a gate of one none can, and each waits 0.5 s
            changed.wait_for(lambda: most >= 2, timeout=0.5 if gate == 1 else 10)
        try:
            return judge(*args)
        finally:
            with changed:
                running -= 1

    monkeypatch.setattr(handling, "handle_list", spy)
    engine = watch_engine.Engine("gate-test")

    async def relist_all():
        engine.loop = asyncio.get_running_loop()
        engine.startup = asyncio.Semaphore(gate)
        engine.connections = await engine.in_db(handling.connections_for, ids)
        # what a heartbeat records (a watcher judges only the clusters its renewed leases hold)
        engine.owned, engine.lease_valid_until = set(ids), time.monotonic() + 3600
        engine.lease_valid_until_wall = time.time() + 3600
        targets = await engine.in_db(handling.targets_for, ids)
        assert len(targets) == len(ids)
        await asyncio.gather(
            *(watch_engine.EngineIO(engine, target).relist(watch_engine.WatchState()) for target in targets.values())
        )

    try:
        run_async(relist_all())
    finally:
        engine.shutdown_pools()
    return most


def test_with_a_gate_of_one_no_two_relists_are_judged_at_once(fleet_factory, monkeypatch):
    fleet = fleet_factory({"generate": 6})
    assert most_lists_judged_at_once(fleet, 1, monkeypatch) == 1


def test_a_wider_gate_lets_relists_be_judged_together_so_the_spy_would_see_an_ungated_judge(fleet_factory, monkeypatch):
    fleet = fleet_factory({"generate": 6})
    assert most_lists_judged_at_once(fleet, 4, monkeypatch) > 1
