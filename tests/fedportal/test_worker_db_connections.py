"""A worker keeps a task's database connection for its next task, as Django keeps a request's
(CONN_MAX_AGE), where Celery's Django fixup closed it after every task: a new PostgreSQL backend per
task (fedportal/celery.py, settings.CELERY_DB_REUSE_MAX)."""

import functools
import time

import pytest
from celery.fixups.django import DjangoWorkerFixup
from celery.signals import task_postrun, task_prerun
from django.db import connection

from fedportal.celery import app
from fedportal.models import AuditEvent
from tests.utils import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def run_as_a_worker_would(task, body) -> None:
    """What a worker does around a task: Celery's Django fixup (as installed in a worker) and the
    task signals' receivers, before and after the task's body."""
    fixup = DjangoWorkerFixup(app)
    fixup.on_task_prerun(sender=task)
    task_prerun.send(sender=task, task_id="t-1", task=task, args=(), kwargs={})
    body()
    fixup.on_task_postrun(sender=task)
    task_postrun.send(sender=task, task_id="t-1", task=task, args=(), kwargs={}, retval=None, state="SUCCESS")


def test_a_task_leaves_its_connection_open_for_the_next_one():
    from fedportal.tasks import record_heartbeat_task

    connection.ensure_connection()
    opened = connection.connection
    for note in ("one", "two", "three"):
        run_as_a_worker_would(record_heartbeat_task, functools.partial(record_heartbeat_task.run, note))
    assert connection.connection is opened
    assert AuditEvent.objects.filter(action="system.heartbeat").count() == 3


def test_a_connection_past_its_max_age_is_closed_after_the_task():
    from fedportal.tasks import record_heartbeat_task

    def outlive_max_age():
        record_heartbeat_task.run("old")
        connection.close_at = time.monotonic() - 1

    run_as_a_worker_would(record_heartbeat_task, outlive_max_age)
    assert connection.connection is None


def test_a_connection_left_with_autocommit_off_is_closed_after_the_task():
    from fedportal.tasks import record_heartbeat_task

    def leave_a_transaction_open():
        connection.set_autocommit(False)
        AuditEvent.objects.count()

    run_as_a_worker_would(record_heartbeat_task, leave_a_transaction_open)
    assert connection.connection is None
    assert connection.get_autocommit()


def _worker_backends() -> set[int]:
    """The pids of the other backends on the test database (the worker's)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return {pid for (pid,) in cursor.fetchall()}


@pytest.mark.worker
def test_a_real_worker_keeps_its_postgresql_backend_and_survives_losing_it(celery_worker):
    if connection.vendor != "postgresql":
        pytest.skip("backends are PostgreSQL's; this run uses " + connection.vendor)
    from fedportal.tasks import record_heartbeat_task

    def heartbeat(note: str) -> None:
        record_heartbeat_task.delay(note)
        wait_for(
            lambda: AuditEvent.objects.filter(action="system.heartbeat", summary=note).exists(),
            message=f"heartbeat {note}",
        )

    heartbeat("first")
    time.sleep(1.0)  # a backend closed after the task would be gone by now
    kept = _worker_backends()
    assert kept, "the worker's backend closed after its task"
    with connection.cursor() as cursor:
        for pid in kept:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    # the thread that ran the first task finds its connection dropped when it next runs one
    # (CONN_HEALTH_CHECKS) and reconnects; which of the worker's threads takes a task is up to it
    for attempt in range(10):
        heartbeat(f"after its backend was terminated, {attempt}")
    assert not kept & _worker_backends()
