"""Fixtures for the fault-tolerance tests (marked ``faults`` and ``worker``: run them alone with
``pytest -m faults``)."""

import pytest

from clusters import kube


@pytest.fixture(autouse=True)
def _fresh_kube_clients():
    """Each test starts its own fleet on a new port and cluster ids are reused: never keep a cached
    ApiClient pointing at a stopped fleet."""
    kube.clear_client_cache()
    yield
    kube.clear_client_cache()
