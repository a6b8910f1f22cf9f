import pytest

from clusters import kube


@pytest.fixture(autouse=True)
def _fresh_kube_clients():
    """Cluster ids are reused after a test's rollback while each test starts its own fleet on a
    new port: never let a cached ApiClient from an earlier test talk to a stopped fleet."""
    kube.clear_client_cache()
    yield
    kube.clear_client_cache()
