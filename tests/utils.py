"""Small helpers shared by tests."""

import asyncio
import re
import sys
import threading
import time

# A script or stylesheet loaded from another host (a CDN): pages must serve their assets themselves.
EXTERNAL_ASSET = re.compile(r'(?:src|href)="(?:https?:)?//', re.IGNORECASE)


def wait_for(predicate, *, timeout: float = 30.0, interval: float = 0.2, message: str = "condition"):
    """Call ``predicate`` until it returns a truthy value; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message} (last value: {last!r})")


def celery_worker_command(*, queues: str, concurrency: int, node: str, log_path) -> list[str]:
    """The argv of a real ``celery worker`` as the tests and the benchmarks start it: thread pool,
    one node name per process, no mingle/gossip/heartbeat (a quicker start), INFO log to ``log_path``."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "fedportal",
        "worker",
        "-Q",
        queues,
        "-P",
        "threads",
        "-c",
        str(concurrency),
        "-n",
        node,
        "--without-mingle",
        "--without-gossip",
        "--without-heartbeat",
        "-l",
        "INFO",
        "--logfile",
        str(log_path),
    ]


def run_async(coroutine):
    """``asyncio.run(coroutine)`` on a thread of its own: the browser tests' Playwright (sync API)
    keeps an event loop running on the main thread, where asyncio.run refuses to start another."""
    outcome = {}

    def run():
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="run-async")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
