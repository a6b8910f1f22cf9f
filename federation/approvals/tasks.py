"""Celery entry points for change requests. Thin: take ids, call services."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from federation.approvals import rollout, services
from federation.approvals.choices import ChangeState
from federation.approvals.models import ChangeRequest

# Re-check an Applying request every few seconds until its runs finish, for at most about an
# hour (propagation retries transient errors with capped backoff, so runs do finish).
RECHECK_SECONDS = 3
MAX_CHECKS = 1200


@shared_task(
    queue="default",
    acks_late=True,
    soft_time_limit=60,
    time_limit=90,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=5,
)
def sync_change_request_task(cr_id: int, checks: int = 0) -> dict:
    """Record the outcome of an Applying request once its runs end; safe to run twice."""
    if not ChangeRequest.objects.filter(pk=cr_id).exists():
        return {"cr_id": cr_id, "skipped": "gone"}
    cr = services.sync_change_request(cr_id)
    if cr.state == ChangeState.APPLYING and checks < MAX_CHECKS:
        sync_change_request_task.apply_async((cr_id, checks + 1), countdown=RECHECK_SECONDS)
    return {"cr_id": cr_id, "state": cr.state}


@shared_task(
    queue="default",
    soft_time_limit=50,
    time_limit=60,
    expires=55,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def sync_running_requests_task() -> dict:
    """Periodic (beat) safety net: settle Applying requests whose own sync task was lost."""
    return {"settled": services.sync_running_requests()}


@shared_task(
    queue="default",
    acks_late=True,  # safe twice: one lease holder, compare-and-set transitions and batch starts
    soft_time_limit=110,  # within the rollout's lease (FEDPORTAL_ROLLOUT_LEASE_SECONDS, 130 s)
    time_limit=120,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=5,
)
def advance_rollout_task(rollout_id: int) -> dict:
    """Move a staged rollout on (wave start, batches, gates, bake, halt); it re-queues itself while
    the rollout is Progressing, and the periodic sync re-queues one whose task was lost."""
    return {"rollout_id": rollout_id, "waiting": rollout.advance_rollout(rollout_id)}
