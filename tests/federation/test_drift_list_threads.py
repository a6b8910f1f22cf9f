"""The sweep's list threads (federation/propagation/drift.py in_list_threads): every key once, a
KubeError handed back with its key, any other error raised in the caller, and an early stop that
does not leave the threads working through the rest of the fleet."""

import threading
import time

import pytest

from clusters import kube
from federation.propagation.drift import in_list_threads


def test_every_key_comes_back_once_with_its_value_or_its_kube_error():
    def fn(key):
        if key % 7 == 0:
            raise kube.KubeTransientError(f"cluster {key} unreachable", kind=kube.KIND_UNREACHABLE)
        return key * 10

    seen = {key: (value, error) for key, value, error in in_list_threads(fn, list(range(100)))}
    assert set(seen) == set(range(100))
    assert all(seen[k] == (k * 10, None) for k in range(100) if k % 7)
    assert all(seen[k][0] is None and isinstance(seen[k][1], kube.KubeError) for k in range(0, 100, 7))


def test_an_error_that_is_not_a_kube_error_is_raised_and_the_remaining_keys_are_left():
    calls = []
    lock = threading.Lock()

    def fn(key):
        with lock:
            calls.append(key)
        if key == 3:
            raise ValueError("a bug, not a cluster")
        time.sleep(0.005)  # a LIST takes a while: 1,000 of them on 16 threads about 0.3 s
        return key

    with pytest.raises(ValueError, match="a bug"):
        for _ in in_list_threads(fn, list(range(1000))):
            pass
    assert len(calls) < 1000, "the queue was emptied: the threads stopped after their current key"


def test_no_keys_is_no_work():
    assert list(in_list_threads(lambda key: key, [])) == []
