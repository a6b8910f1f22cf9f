"""Queueing Celery tasks by name. Each app's ``enqueue`` module wraps this in small public functions,
so services queue work without importing task modules (which import the services)."""

from django.db import transaction

from fedportal.celery import app


def send(task_name: str, args=(), *, on_commit: bool = False, **options) -> None:
    """Queue ``task_name`` with ``args`` (Celery options such as ``queue``, ``countdown``,
    ``expires``); with ``on_commit``, once the surrounding transaction commits."""
    args = tuple(args)
    if on_commit:
        transaction.on_commit(lambda: app.send_task(task_name, args=args, **options))
    else:
        app.send_task(task_name, args=args, **options)
