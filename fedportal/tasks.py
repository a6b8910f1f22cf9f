from celery import shared_task

from fedportal.audit import record_event, write_checkpoint


@shared_task(ignore_result=True)
def record_heartbeat_task(note: str = "") -> None:
    """A no-op that leaves an audit trace: proves a worker is alive and wired to the database."""
    record_event("system.heartbeat", summary=note)


@shared_task(ignore_result=True)
def audit_checkpoint_task() -> None:
    """Append a signed checkpoint of the audit chain outside the database (beat, every few minutes)."""
    write_checkpoint()
