"""Fleet polling survives API errors, an unreachable cluster and a broker restart."""

import os
import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.utils import timezone

from clusters.choices import ClusterState
from clusters.models import Cluster
from clusters.tasks import poll_fleet_task
from tests.faults.helpers import assert_one_sample_per_cluster, fleet_versions, register_clusters
from tests.utils import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def poll_and_wait(ids, *, timeout: float = 60, message: str = "every cluster probed"):
    """What beat does every period: enqueue a fleet poll; wait until every cluster row is written."""
    requested = timezone.now()
    poll_fleet_task.apply_async((requested.isoformat(),))
    wait_for(
        lambda: Cluster.objects.filter(pk__in=ids, last_probe_at__gte=requested).count() == len(ids),
        timeout=timeout,
        message=message,
    )


def test_one_api_call_in_five_failing_never_marks_a_cluster_offline(fleet_factory, celery_worker):
    fleet = fleet_factory({"generate": 10, "versions": "1.27-1.31"})
    ids = [c.pk for c in register_clusters(fleet, fleet.names, versions=fleet_versions(fleet))]
    for name in fleet.names:
        fleet.set_error_rate(name, 0.2)
    seen_not_ready = set()
    for _ in range(5):
        poll_and_wait(ids)
        states = dict(Cluster.objects.filter(pk__in=ids).values_list("name", "state"))
        assert ClusterState.OFFLINE not in states.values(), states
        seen_not_ready |= {n for n, s in states.items() if s == ClusterState.NOT_READY}
        for cluster in Cluster.objects.filter(pk__in=ids, state=ClusterState.NOT_READY):
            assert cluster.last_error, "a NotReady cluster says why"
    for name in fleet.names:
        fleet.set_error_rate(name, 0)
    poll_and_wait(ids)
    assert set(Cluster.objects.filter(pk__in=ids).values_list("state", flat=True)) == {ClusterState.READY}
    assert_one_sample_per_cluster(ids)


def test_a_single_unreachable_probe_is_not_ready_not_offline(fleet_factory, celery_worker):
    fleet = fleet_factory({"generate": 3, "versions": "1.29-1.30"})
    ids = [c.pk for c in register_clusters(fleet, fleet.names, versions=fleet_versions(fleet))]
    victim = fleet.names[0]
    fleet.set_down(victim)
    poll_and_wait(ids)
    cluster = Cluster.objects.get(name=victim)
    assert cluster.state == ClusterState.NOT_READY and cluster.consecutive_failures == 1
    assert "refused" in cluster.last_error.lower() or "connection" in cluster.last_error.lower(), cluster.last_error
    for _ in range(settings.FEDPORTAL_HEALTH_FAILURE_THRESHOLD - 1):
        poll_and_wait(ids)
    assert Cluster.objects.get(name=victim).state == ClusterState.OFFLINE  # KubeFed: after 3 failures
    fleet.set_up(victim)
    poll_and_wait(ids)
    assert Cluster.objects.get(name=victim).state == ClusterState.READY
    assert_one_sample_per_cluster(ids)


def _restart_redis(url: str) -> None:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", str(parts.port or 6379)
    subprocess.run(["redis-cli", "-h", host, "-p", port, "shutdown", "nosave"], capture_output=True, timeout=20)
    wait_for(
        lambda: subprocess.run(["redis-cli", "-h", host, "-p", port, "ping"], capture_output=True).returncode != 0,
        timeout=20,
        message="redis stopped",
    )
    time.sleep(2)
    Path("/var/lib/redis").mkdir(parents=True, exist_ok=True)
    Path("/var/log/redis").mkdir(parents=True, exist_ok=True)
    # the command the machine notes give (/work/.library/env/machines/python-svc.md), as .ci/run uses
    subprocess.run(
        [
            "redis-server",
            "--daemonize",
            "yes",
            "--bind",
            "127.0.0.1",
            "-::1",
            "--port",
            port,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            "/var/lib/redis",
            "--logfile",
            "/var/log/redis/ci.log",
        ],
        check=True,
        timeout=30,
    )
    wait_for(
        lambda: subprocess.run(["redis-cli", "-h", host, "-p", port, "ping"], capture_output=True).returncode == 0,
        timeout=30,
        message="redis back",
    )


def _bounce_filesystem_broker(seconds: float) -> None:
    """The embedded broker is a folder: make it unavailable for a while, then put it back."""
    queue = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
    away = queue.with_name(queue.name + ".away")
    os.rename(queue, away)
    time.sleep(seconds)
    if queue.exists():  # something recreated it meanwhile: keep what was queued in both
        for item in away.iterdir():
            shutil.move(str(item), queue / item.name)
        away.rmdir()
    else:
        os.rename(away, queue)


def test_polling_resumes_after_the_broker_restarts(fleet_factory, celery_worker):
    fleet = fleet_factory({"generate": 10, "versions": "1.27-1.31"})
    ids = [c.pk for c in register_clusters(fleet, fleet.names, versions=fleet_versions(fleet))]
    poll_and_wait(ids, message="first poll")
    broker = settings.CELERY_BROKER_URL
    if broker.startswith(("redis://", "rediss://")):
        if shutil.which("redis-server") is None:
            pytest.skip("redis-server is not installed here, so the broker cannot be restarted")
        _restart_redis(broker)
    elif broker.startswith("filesystem://"):
        _bounce_filesystem_broker(3)
    else:
        pytest.skip(f"no restart procedure for broker {broker.split('://')[0]}")
    restarted = timezone.now()
    # beat keeps ticking: polls are requested every few seconds until the worker is consuming again

    def resumed():
        poll_fleet_task.apply_async((timezone.now().isoformat(),), retry=True)
        return Cluster.objects.filter(pk__in=ids, last_probe_at__gte=restarted).count() == len(ids)

    try:
        wait_for(resumed, timeout=90, interval=3, message="polling resumed after the broker restart")
    except AssertionError:
        alive = celery_worker.alive()
        celery_worker.stop()  # alive but not consuming: the next test gets a fresh worker (celery_worker)
        raise AssertionError(
            f"polling did not resume; worker alive: {alive}; its log ends:\n{celery_worker.log()[-3000:]}"
        )
    assert celery_worker.alive(), "the worker survived the restart"
    assert set(Cluster.objects.filter(pk__in=ids).values_list("state", flat=True)) == {ClusterState.READY}
    assert_one_sample_per_cluster(ids)
