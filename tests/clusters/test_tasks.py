"""Probing through a real Celery worker against the fleet simulator (nothing mocked, no eager mode)."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from clusters import services
from clusters.choices import ClusterRole, ClusterState
from clusters.models import Cluster, ClusterStateChange, VersionSample
from clusters.tasks import probe_cluster_task
from tests.utils import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

EXPECTED_VERSIONS = {"host": "v1.29.4", "m127": "v1.27.3", "m128": "v1.28.2", "m130": "v1.30.1", "m131": "v1.31.0"}
ALL_CONTEXTS = list(EXPECTED_VERSIONS)


def import_fleet(fleet, contexts=ALL_CONTEXTS):
    return services.import_kubeconfig_contexts(
        fleet.kubeconfig_path.read_text(), contexts=contexts, host_context="host" if "host" in contexts else None
    )


def states():
    return dict(Cluster.objects.values_list("name", "state"))


def probe_and_wait(cluster: Cluster) -> Cluster:
    """Queue one probe and wait until the worker has recorded it."""
    before = Cluster.objects.get(pk=cluster.pk).last_probe_at
    probe_cluster_task.delay(cluster.pk, timezone.now().isoformat())
    return wait_for(
        lambda: (c := Cluster.objects.get(pk=cluster.pk)).last_probe_at != before and c,
        timeout=30,
        message=f"a probe of {cluster.name}",
    )


def test_kubeconfig_import_is_probed_by_the_worker_and_shows_versions(celery_worker, fleet):
    created = import_fleet(fleet)
    assert len(created) == 5
    wait_for(lambda: set(states().values()) == {ClusterState.READY}, timeout=60, message="every cluster Ready")
    clusters = {c.name: c for c in Cluster.objects.all()}
    assert {name: c.server_version for name, c in clusters.items()} == EXPECTED_VERSIONS
    assert clusters["host"].role == ClusterRole.HOST
    assert clusters["m130"].node_count == 3 and clusters["m130"].region == "us-east-1"
    assert set(clusters["m127"].kubelet_versions.values()) <= {"v1.27.3", "v1.26.5"}
    assert VersionSample.objects.count() == 5


def test_poll_versions_command_waits_for_every_probe(celery_worker, fleet, capsys):
    import_fleet(fleet, ["m127", "m128"])
    fleet.set_version("m128", "v1.28.7")
    call_command("poll_versions", "--wait", "--timeout", "60")
    out = capsys.readouterr().out
    assert "Queued a probe of 2 cluster(s)" in out
    assert "v1.28.7" in out
    assert Cluster.objects.get(name="m128").server_version == "v1.28.7"


def test_fleet_poll_now_reports_progress_until_done(celery_worker, fleet):
    import_fleet(fleet, ["m127", "m128", "m130"])
    fleet.set_down("m130")
    poll = services.request_poll()
    progress = wait_for(lambda: (p := services.poll_progress(poll)).finished and p, timeout=60, message="poll done")
    assert (progress.total, progress.done, progress.failed) == (3, 3, 1)


def test_down_cluster_goes_not_ready_then_offline_after_the_threshold_and_back_to_ready(celery_worker, fleet, settings):
    # The session worker runs with the default thresholds (failure 3, success 1).
    assert settings.FEDPORTAL_HEALTH_FAILURE_THRESHOLD == 3
    [cluster] = import_fleet(fleet, ["m131"])
    wait_for(lambda: states()["m131"] == ClusterState.READY, timeout=30, message="m131 Ready")
    fleet.set_down("m131", mode="refused")
    seen = [probe_and_wait(cluster).state for _ in range(3)]
    assert seen == [ClusterState.NOT_READY, ClusterState.NOT_READY, ClusterState.OFFLINE]
    fleet.set_up("m131")
    assert probe_and_wait(cluster).state == ClusterState.READY
    transitions = list(
        ClusterStateChange.objects.filter(cluster=cluster).order_by("at", "id").values_list("from_state", "to_state")
    )
    assert transitions == [("Unknown", "Ready"), ("Ready", "NotReady"), ("NotReady", "Offline"), ("Offline", "Ready")]


def test_a_slow_cluster_never_delays_the_others(celery_worker, fleet):
    import_fleet(fleet, ["m127", "m128", "m130", "m131"])
    wait_for(lambda: set(states().values()) == {ClusterState.READY}, timeout=60, message="every cluster Ready")
    # every request of m131 takes ~2 s (its probe's timeout is 3 s: a loaded machine still has a second)
    fleet.set_latency("m131", 2000)
    poll = services.request_poll()
    wait_for(lambda: services.poll_progress(poll).finished, timeout=60, message="every cluster probed")
    probed = dict(Cluster.objects.filter(last_probe_at__gte=poll.started_at).values_list("name", "last_probe_at"))
    assert set(probed) == {"m127", "m128", "m130", "m131"}
    # each row is stamped when it is written: fast clusters written with the slow one (waiting for it)
    # would carry its stamp; written at their own flush, they are well before it
    fast_written = max(probed[name] for name in ("m127", "m128", "m130"))
    assert probed["m131"] - fast_written > timedelta(seconds=0.5), "the fast clusters waited for the slow one"
    assert Cluster.objects.get(name="m131").state == ClusterState.READY


def test_beat_schedule_polls_the_fleet_with_expiry():
    from importlib import import_module

    from django.apps import apps
    from django_celery_beat.models import PeriodicTask

    migration = import_module("clusters.migrations.0002_poll_fleet_schedule")
    migration.create_schedule(apps, None)  # idempotent; transactional tests flush migration data
    migration.create_schedule(apps, None)
    task = PeriodicTask.objects.get(name=migration.TASK_NAME)
    assert task.task == "clusters.tasks.poll_fleet_task"
    assert task.interval.every == 10 and task.interval.period == "seconds"
    assert task.expire_seconds == 10 and task.enabled
