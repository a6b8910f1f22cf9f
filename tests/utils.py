"""Small helpers shared by tests."""

import time


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
