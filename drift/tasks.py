"""Celery entry points only; the work is in drift.services."""

from celery import shared_task

from drift import services


@shared_task(acks_late=True, time_limit=600, soft_time_limit=540)
def take_compliance_snapshot_task():
    """Daily (beat): one ComplianceSnapshot row for the trend charts. Running it twice only adds a point."""
    snapshot = services.take_compliance_snapshot()
    return snapshot.pk


@shared_task(acks_late=True, time_limit=300, soft_time_limit=270)
def enforce_version_policy_task():
    """Periodic (beat): auto-isolate P0 members when the policy asks for it. Safe to run twice."""
    return services.enforce_version_policy()
