"""Queueing Celery tasks by name. Each app's ``enqueue`` module wraps this in small public functions,
so services queue work without importing task modules (which import the services)."""

from django.db import transaction

from fedportal.celery import app

LISTED_ITEMS = 5  # of a long list argument, how many items a task's argsrepr names
REPR_MAX = 1024  # characters, as Celery caps the argsrepr it makes itself (argsrepr_maxsize)


def send(task_name: str, args=(), *, on_commit: bool = False, **options) -> None:
    """Queue ``task_name`` with ``args`` (Celery options such as ``queue``, ``countdown``,
    ``expires``); with ``on_commit``, once the surrounding transaction commits."""
    args = tuple(args)
    # what logs, events and Flower show of the arguments: Celery's own saferepr walked every id
    # of a chunk's cluster list (a tenth of the time to queue a run's chunks)
    options.setdefault("argsrepr", brief_repr(args))
    if on_commit:
        transaction.on_commit(lambda: app.send_task(task_name, args=args, **options))
    else:
        app.send_task(task_name, args=args, **options)


def brief_repr(args: tuple) -> str:
    """``args`` as Python would show them, a list of more than LISTED_ITEMS items shortened to its
    first ones and its length: ``(7, [1, 2, 3, 4, 5, ... (125 items)])``."""

    def brief(value) -> str:
        if isinstance(value, list) and len(value) > LISTED_ITEMS:
            return f"[{', '.join(map(repr, value[:LISTED_ITEMS]))}, ... ({len(value)} items)]"
        return repr(value)

    items = [brief(value) for value in args]
    shown = f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    return shown if len(shown) <= REPR_MAX else f"{shown[: REPR_MAX - 3]}..."
