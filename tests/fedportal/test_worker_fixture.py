import pytest

from fedportal.audit import record_event
from fedportal.models import AuditEvent
from tests.utils import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_real_worker_runs_tasks_against_the_test_database(celery_worker):
    from fedportal.tasks import record_heartbeat_task

    record_event("test.before")
    record_heartbeat_task.delay("from-test")
    event = wait_for(lambda: AuditEvent.objects.filter(action="system.heartbeat").first(), message="heartbeat event")
    assert event.summary == "from-test"
    assert event.actor_name == "system"


def test_a_worker_an_earlier_test_left_dead_is_started_again(session_worker, request):
    from fedportal.tasks import record_heartbeat_task

    session_worker.kill()
    worker = request.getfixturevalue("celery_worker")
    assert worker is session_worker and worker.alive()
    record_heartbeat_task.delay("after-restart")
    wait_for(
        lambda: AuditEvent.objects.filter(action="system.heartbeat", summary="after-restart").exists(),
        message="heartbeat event from the restarted worker",
    )
