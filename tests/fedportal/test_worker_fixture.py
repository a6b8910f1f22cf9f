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
