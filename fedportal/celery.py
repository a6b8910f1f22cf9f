"""The Celery application. Configuration comes from Django settings (CELERY_* names)."""

import os

from celery import Celery
from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    task_postrun,
    task_prerun,
    worker_process_init,
    worker_ready,
)
from kombu.transport import TRANSPORT_ALIASES

from fedportal.gc_tuning import freeze_startup_objects

# The embedded broker writes its message files atomically (see fedportal/broker.py); the Redis
# transport survives a broker restart while the worker holds messages (fedportal/broker_redis.py).
TRANSPORT_ALIASES["filesystem"] = "fedportal.broker:Transport"
TRANSPORT_ALIASES["redis"] = TRANSPORT_ALIASES["rediss"] = "fedportal.broker_redis:Transport"

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedportal.settings")

app = Celery("fedportal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


# Workers freeze what they loaded at start-up out of the collector's sweeps (fedportal.gc_tuning):
# when ready (the threads pool runs tasks in that process) and in each prefork child.
worker_ready.connect(freeze_startup_objects, weak=False)
worker_process_init.connect(freeze_startup_objects, weak=False)


def close_old_database_connections(**_) -> None:
    """Before and after each task, what Django does around a request (``close_old_connections``): a
    connection is closed when it outlived CONN_MAX_AGE, was left with autocommit off, or failed a
    health check after an error; otherwise the task's thread keeps it for its next task (a dropped one
    is found by CONN_HEALTH_CHECKS at its next use). Celery's own closing is off: CELERY_DB_REUSE_MAX."""
    from django.db import close_old_connections

    close_old_connections()


task_prerun.connect(close_old_database_connections, weak=False)
task_postrun.connect(close_old_database_connections, weak=False)


# --- structured logs in the worker (LOG_FORMAT=json; see fedportal/logs.py) -------------------------


def json_worker_logs(logger=None, **_) -> None:
    """Celery sets up its own handlers (console or --logfile); give them the JSON formatter."""
    from django.conf import settings

    if getattr(settings, "LOG_FORMAT", "plain") != "json" or logger is None:
        return
    from fedportal.logs import JsonFormatter

    for handler in logger.handlers:
        handler.setFormatter(JsonFormatter())


# a task's argument named like this puts its value on every log line the task writes
TASK_LOG_FIELDS = {"cluster_id": "cluster", "cr_id": "change_request", "change_request_id": "change_request"}
_task_context: dict = {}


def bind_task_context(task_id=None, task=None, args=None, kwargs=None, **_) -> None:
    """The task id is the request id of its log lines; the ids it names are bound too."""
    import inspect

    from fedportal import logs

    fields = {}
    try:
        call = inspect.signature(task.run).bind_partial(*(args or ()), **(kwargs or {}))
        fields = {TASK_LOG_FIELDS[name]: value for name, value in call.arguments.items() if name in TASK_LOG_FIELDS}
    except (TypeError, ValueError, AttributeError):
        pass
    _task_context[task_id] = logs.bind_fields(request_id=task_id, **fields)


def unbind_task_context(task_id=None, **_) -> None:
    from fedportal import logs

    token = _task_context.pop(task_id, None)
    if token is not None:
        try:
            logs.unbind(token)
        except ValueError:  # made in another context: nothing of ours is left bound here
            pass


after_setup_logger.connect(json_worker_logs, weak=False)
after_setup_task_logger.connect(json_worker_logs, weak=False)
task_prerun.connect(bind_task_context, weak=False)
task_postrun.connect(unbind_task_context, weak=False)
