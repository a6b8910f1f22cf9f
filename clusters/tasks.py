"""Celery entry points for cluster probing. Thin: take ids, call services."""

import logging
from datetime import datetime

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from clusters import probing

logger = logging.getLogger(__name__)

# A probe bounds itself (every HTTP call has FEDPORTAL_HEALTH_TIMEOUT_SECONDS); the Celery limits are
# a backstop for prefork pools.
_PROBE_SOFT_LIMIT = int(probing.probe_budget_seconds()) + 5


@shared_task(
    bind=True,
    queue="probes",
    acks_late=True,  # safe to run twice: the lease and requested_at make a repeat a no-op
    soft_time_limit=_PROBE_SOFT_LIMIT,
    time_limit=_PROBE_SOFT_LIMIT + 10,
    autoretry_for=(OperationalError, InterfaceError),  # database hiccups (e.g. SQLite busy)
    retry_backoff=True,
    retry_backoff_max=30,
    max_retries=3,
)
def probe_cluster_task(self, cluster_id: int, requested_at: str | None = None) -> dict:
    """Probe one cluster. Unreachable clusters are not retried here: a failed probe is a result,
    and the failure threshold (FEDPORTAL_HEALTH_FAILURE_THRESHOLD) is the retry policy."""
    when = datetime.fromisoformat(requested_at) if requested_at else None
    outcome = probing.probe_cluster(cluster_id, requested_at=when)
    return {"cluster_id": cluster_id, "state": outcome.state, "skipped": outcome.skipped}


@shared_task(
    queue="default",
    soft_time_limit=120,
    time_limit=150,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def poll_fleet_task(requested_at: str | None = None) -> int:
    """Fan out the probes on queue "probes" (beat runs this every FEDPORTAL_HEALTH_PERIOD_SECONDS):
    one ``probe_clusters_task`` per FEDPORTAL_PROBE_BATCH_SIZE clusters, each probing its chunk with
    a thread pool (see clusters/probing.py). Probes expire after a period so a backlog never piles up."""
    when = datetime.fromisoformat(requested_at) if requested_at else timezone.now()
    expires = max(settings.FEDPORTAL_HEALTH_PERIOD_SECONDS * 3, 30) if not requested_at else 300
    return probing.fan_out_probe_batches(requested_at=when, expires=expires)


@shared_task(
    queue="probes",
    acks_late=True,  # safe to run twice: leases and requested_at make a repeat a no-op
    soft_time_limit=_PROBE_SOFT_LIMIT * 3,
    time_limit=_PROBE_SOFT_LIMIT * 3 + 10,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    retry_backoff_max=30,
    max_retries=3,
)
def probe_clusters_task(cluster_ids: list[int], requested_at: str | None = None) -> dict:
    """Probe a chunk of clusters with a thread pool; rows written in bulk (clusters/probing.py)."""
    when = datetime.fromisoformat(requested_at) if requested_at else None
    outcomes = probing.probe_clusters(cluster_ids, requested_at=when)
    return {"probed": sum(1 for o in outcomes if not o.skipped), "skipped": sum(1 for o in outcomes if o.skipped)}
