"""Drift tasks through a real Celery worker (never eager mode)."""

import pytest

from clusters.models import Cluster
from drift.models import ComplianceSnapshot, VersionPolicy
from tests.utils import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_snapshot_and_auto_isolation_tasks_run_on_the_worker(celery_worker, sim_fleet):
    from drift.tasks import enforce_version_policy_task, take_compliance_snapshot_task

    take_compliance_snapshot_task.delay()
    snapshot = wait_for(lambda: ComplianceSnapshot.objects.first(), message="compliance snapshot")
    assert snapshot.clusters_total == 8 and snapshot.findings_p0 == 4
    VersionPolicy.objects.create(pk=1, auto_isolate_on_p0=True)
    enforce_version_policy_task.delay()
    wait_for(lambda: Cluster.objects.filter(isolated=True).count() == 4, message="P0 members isolated")
    assert set(Cluster.objects.filter(isolated=True).values_list("name", flat=True)) == {"m25", "m26", "m27", "m31"}
