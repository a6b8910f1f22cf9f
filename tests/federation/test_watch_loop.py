"""The watch loop's own logic (federation.watching.engine.run_watch): resume from the last version,
relist on 410, jittered backoff that resets. Its I/O is a scripted stand-in (our WatchIO seam, not
the kubernetes client); the real thing runs against the simulator in tests/faults/test_watch_faults.py."""

import asyncio

import pytest

from clusters import kube
from federation.watching.engine import WatchIO, WatchState, backoff_delay, run_watch
from tests.utils import run_async


def ev(kind, rv):
    return kube.WatchEvent(kind, {"metadata": {"name": "web", "namespace": "shop", "resourceVersion": rv}}, rv)


class Scripted(WatchIO):
    """Each stream() call plays the next script entry: a list of events, then optionally an error."""

    def __init__(self, script, stop, list_versions=("100",)):
        self.script = list(script)
        self.stop = stop
        self.list_versions = list(list_versions)
        self.calls: list[tuple] = []
        self.handled: list[str] = []
        self.sleeps: list[float] = []

    async def relist(self, state):
        version = self.list_versions.pop(0)
        self.calls.append(("list", version))
        return version

    def stream(self, state):
        self.calls.append(("watch", state.resource_version))
        entry = self.script.pop(0) if self.script else None

        async def gen():
            if entry is None:
                self.stop.set()
                return
            events, error = entry
            for event in events:
                yield event
            if error is not None:
                raise error

        return gen()

    async def handle(self, state, event):
        self.handled.append(f"{event.type}:{event.resource_version}")

    async def sleep(self, seconds):
        self.sleeps.append(seconds)


def play(script, list_versions=("100",), backoff=lambda n: float(n)):
    async def main():
        stop = asyncio.Event()
        io = Scripted(script, stop, list_versions)
        state = WatchState()
        await asyncio.wait_for(run_watch(state, io, stop=stop, backoff=backoff), timeout=5)
        return io, state

    return run_async(main())


def test_a_watch_the_server_ends_is_resumed_from_the_last_event_or_bookmark_without_a_relist():
    io, state = play(
        [
            ([ev("MODIFIED", "101"), ev("BOOKMARK", "105")], None),
            ([ev("MODIFIED", "107")], None),
        ]
    )
    assert io.calls == [("list", "100"), ("watch", "100"), ("watch", "105"), ("watch", "107")]
    assert io.handled == ["MODIFIED:101", "MODIFIED:107"]  # bookmarks are not handled, only remembered
    assert state.relists == 1 and state.reconnects == 0 and io.sleeps == []
    assert state.last_bookmark_at is not None


def test_410_gone_relists_and_watches_from_the_new_lists_version():
    gone = kube.WatchExpired("410 Gone", kind=kube.KIND_NOT_FOUND, status=410)
    io, state = play([([ev("MODIFIED", "101")], gone), ([ev("ADDED", "301")], None)], list_versions=("100", "300"))
    assert io.calls == [("list", "100"), ("watch", "100"), ("list", "300"), ("watch", "300"), ("watch", "301")]
    assert state.relists == 2 and io.sleeps == [], "a relist needs no backoff"


def test_a_server_that_keeps_answering_410_right_after_each_list_is_backed_off():
    """The list's own version gone before anything came, again and again: it was listed in a tight
    loop (a reviewer's finding); client-go backs off there too. A 410 after events needs none."""
    gone = kube.WatchExpired("410 Gone", kind=kube.KIND_NOT_FOUND, status=410)
    io, state = play(
        [([], gone), ([], gone), ([], gone), ([ev("ADDED", "401")], None)], list_versions=("1", "2", "3", "4")
    )
    assert io.sleeps == [1.0, 2.0, 3.0]
    assert state.relists == 4
    assert io.handled == ["ADDED:401"]


def test_failures_back_off_growing_and_a_working_watch_resets_the_count():
    cut = kube.KubeTransientError("cut", kind=kube.KIND_UNREACHABLE)
    io, state = play(
        [
            ([ev("MODIFIED", "101")], cut),  # an event came: failures 1
            ([], cut),  # 2
            ([], cut),  # 3
            ([ev("MODIFIED", "102")], cut),  # working again, then cut: back to 1
        ]
    )
    assert io.sleeps == [1.0, 2.0, 3.0, 1.0]
    assert state.reconnects == 4
    # every reconnect resumes from the last handled version: nothing missed, nothing relisted
    assert [c for c in io.calls if c[0] == "watch"] == [("watch", v) for v in ("100", "101", "101", "101", "102")]
    assert state.relists == 1


def test_an_event_that_fails_to_be_handled_is_not_skipped():
    class Failing(Scripted):
        async def handle(self, state, event):
            if event.resource_version == "102" and not getattr(self, "failed", False):
                self.failed = True
                raise RuntimeError("database locked")
            await super().handle(state, event)

    async def main():
        stop = asyncio.Event()
        io = Failing([([ev("MODIFIED", "101"), ev("MODIFIED", "102")], None), ([ev("MODIFIED", "102")], None)], stop)
        state = WatchState()
        await asyncio.wait_for(run_watch(state, io, stop=stop, backoff=lambda n: 0.0), timeout=5)
        return io, state

    io, state = run_async(main())
    assert io.handled == ["MODIFIED:101", "MODIFIED:102"]
    assert ("watch", "101") in io.calls, "resumed before the event that failed"


@pytest.mark.parametrize(
    "failures,low,high",
    [(0, 0.0, 0.0), (1, 0.5, 1.0), (2, 1.0, 2.0), (5, 8.0, 16.0), (6, 15.0, 30.0), (40, 15.0, 30.0)],
)
def test_backoff_is_exponential_capped_and_jittered_between_half_and_all(failures, low, high):
    assert backoff_delay(failures, base=1.0, cap=30.0, rand=lambda: 0.0) == low
    assert backoff_delay(failures, base=1.0, cap=30.0, rand=lambda: 1.0) == high
