"""Structured logs: with ``LOG_FORMAT=json`` every line is one JSON object with time, level,
logger, message, and where known the request id, the user, the cluster and the change request.

Web requests get their id and user from fedportal.request_context (the middleware; the API once
it has authenticated a token). Celery tasks get the task id as request id, and ``cluster`` /
``change_request`` from the task's ``cluster_id`` / ``cr_id`` argument (fedportal/celery.py). Any
code can add them for a block with ``bind(cluster="east")`` or per line with ``extra={...}``."""

import contextvars
import json
import logging
from contextlib import contextmanager
from datetime import UTC, datetime

from django.core.exceptions import PermissionDenied

from fedportal import request_context

FIELDS = ("cluster", "change_request")
_bound: contextvars.ContextVar[dict | None] = contextvars.ContextVar("fedportal_log_fields", default=None)


def bound() -> dict:
    return _bound.get() or {}


def bind_fields(**fields):
    """Add fields to every log line of this context until ``unbind(token)``; returns the token."""
    return _bound.set({**bound(), **{k: v for k, v in fields.items() if v not in (None, "")}})


def unbind(token) -> None:
    _bound.reset(token)


@contextmanager
def bind(**fields):
    token = bind_fields(**fields)
    try:
        yield
    finally:
        unbind(token)


def _username(user) -> str | None:
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    return user.get_username()


class JsonFormatter(logging.Formatter):
    """One JSON object per line; the stack trace, if any, in ``exc_info`` (never a second line)."""

    def format(self, record: logging.LogRecord) -> str:
        context = request_context.current()
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None)
            or bound().get("request_id")
            or context.request_id
            or None,
            "user": getattr(record, "user", None) or _username(context.user),
        }
        fields = bound()
        for name in FIELDS:
            entry[name] = getattr(record, name, None) or fields.get(name)
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class ExpectedRefusalWithoutTraceback(logging.Filter):
    """A 403 for a missing role is the product working: Django's one WARNING line per refusal is kept,
    the traceback it attaches (some twenty lines each) is not."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], PermissionDenied):
            record.exc_info, record.exc_text = None, None
        return True
