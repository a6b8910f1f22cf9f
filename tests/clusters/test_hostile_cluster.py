"""A hostile or broken API server cannot hold a request, a connection test or a probe past its
deadline, nor fill memory (issue 16, finding 5). Each test starts a small hostile server on 127.0.0.1."""

import time

import pytest

from clusters import kube, services
from clusters.models import Cluster
from clusters.probing import probe_budget_seconds, probe_clusters
from tests.clusters.factories import ClusterFactory
from tests.clusters.hostile_server import HostileServer


@pytest.fixture
def hostile():
    server = HostileServer()
    yield server
    server.close()


def connection(server):
    return kube.ClusterConnection(name="hostile", api_server=server.url, token="t")


def timed(call):
    started = time.monotonic()
    try:
        call()
    except kube.KubeError as exc:
        return exc, time.monotonic() - started
    raise AssertionError("no error")


def test_a_server_dripping_its_headers_times_out_at_the_request_deadline(hostile):
    error, seconds = timed(lambda: kube.get_version(connection(hostile), timeout=3))
    assert error.kind == kube.KIND_TIMEOUT and isinstance(error, kube.KubeTransientError)
    assert 2.5 < seconds < 6  # one byte every 2 s would have kept a per-read timeout waiting for 40 s


def test_a_server_dripping_its_body_times_out_at_the_request_deadline(hostile):
    hostile.mode = "drip_body"
    error, seconds = timed(lambda: kube.get_version(connection(hostile), timeout=3))
    assert error.kind == kube.KIND_TIMEOUT
    assert 2.5 < seconds < 6


@pytest.mark.parametrize("mode", ["huge", "huge_error"])
def test_a_body_without_end_is_cut_at_the_byte_cap(hostile, settings, mode):
    settings.FEDPORTAL_KUBE_MAX_RESPONSE_BYTES = 1024 * 1024
    hostile.mode = mode
    error, seconds = timed(lambda: kube.get_version(connection(hostile), timeout=20))
    assert (error.kind, type(error)) == (kube.KIND_TOO_LARGE, kube.KubePermanentError)
    assert error.message == (
        f"{hostile.url} sent more than 1048576 bytes; FedPortal stopped reading (FEDPORTAL_KUBE_MAX_RESPONSE_BYTES)."
    )
    assert seconds < 15


def test_endless_continue_tokens_stop_at_the_page_cap(hostile, settings):
    settings.FEDPORTAL_KUBE_MAX_LIST_PAGES = 20
    hostile.mode = "endless_list"
    error, _ = timed(lambda: kube.list_nodes(connection(hostile), timeout=5))
    assert error.kind == kube.KIND_TOO_LARGE
    assert "returned more than 20 pages; FedPortal stopped (FEDPORTAL_KUBE_MAX_LIST_PAGES)" in error.message
    assert len(hostile.requests) == 20
    assert hostile.requests[1].endswith("continue=page-1")


def test_lists_stop_at_the_item_cap(hostile, settings):
    settings.FEDPORTAL_KUBE_MAX_LIST_ITEMS = 250
    hostile.mode, hostile.items_per_page = "endless_list", 100
    error, _ = timed(lambda: kube.list_nodes(connection(hostile), timeout=5))
    assert "returned more than 250 items; FedPortal stopped (FEDPORTAL_KUBE_MAX_LIST_ITEMS)" in error.message
    assert len(hostile.requests) == 3


def test_the_connection_test_answers_within_its_deadline_whatever_the_server_does(hostile, settings):
    assert settings.FEDPORTAL_TEST_CONNECTION_SECONDS == 10
    settings.FEDPORTAL_TEST_CONNECTION_SECONDS = 4
    hostile.mode, hostile.page_delay = "endless_list", 0.5  # each page well within its own timeout
    started = time.monotonic()
    result = services.test_connection(connection(hostile), timeout=3)
    seconds = time.monotonic() - started
    assert (result.ok, result.error_kind) == (False, kube.KIND_TIMEOUT)
    assert 3.5 < seconds < 7  # 200 pages of 0.5 s without the overall deadline
    assert len(hostile.requests) < 10


def test_the_deadline_block_bounds_several_requests(hostile):
    hostile.mode = "drip"
    started = time.monotonic()
    with kube.deadline(1.5):
        error, _ = timed(lambda: kube.get_version(connection(hostile), timeout=10))
    assert error.kind == kube.KIND_TIMEOUT and time.monotonic() - started < 4


@pytest.mark.django_db
def test_thread_pool_probes_respect_their_budget(hostile, settings):
    settings.FEDPORTAL_HEALTH_TIMEOUT_SECONDS = 0.5  # budget 0.5 * 4 + 2 = 4 s
    hostile.mode, hostile.page_delay = "endless_list", 0.4
    cluster = ClusterFactory(api_server=hostile.url, inventory_at=None)
    started = time.monotonic()
    [outcome] = probe_clusters([cluster.pk], threads=2)
    seconds = time.monotonic() - started
    assert probe_budget_seconds() == 4
    assert seconds < probe_budget_seconds() + 3  # 200 pages of 0.4 s without it
    cluster = Cluster.objects.get(pk=cluster.pk)
    assert "Timed out" in cluster.last_error
