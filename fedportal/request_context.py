"""Who is acting, from where, under which request id: set by middleware, read by the audit log."""

import contextvars
import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class RequestContext:
    request_id: str = ""
    source_ip: str | None = None
    user: object | None = None


_current: contextvars.ContextVar[RequestContext] = contextvars.ContextVar(
    "fedportal_request_context", default=RequestContext()
)


def current() -> RequestContext:
    return _current.get()


def activate(context: RequestContext):
    return _current.set(context)


def reset(token) -> None:
    _current.reset(token)


def new_request_id() -> str:
    return uuid.uuid4().hex
