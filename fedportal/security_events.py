"""Logins, failed logins, logouts and lockouts go to the audit log (explicit receivers on auth's
and django-axes' signals). Source address and request id come from the request context.

What someone typed as a user name is never stored as typed unless it names an existing account:
people paste passwords into the user name field. ``login_identity`` turns an unknown name into a
keyed hash (the same text gives the same hash, so repeated attempts can still be told apart from
a spray), and django-axes stores that too (AXES_USERNAME_CALLABLE).

Throttling (django-axes, settings ``AXES_*``) counts failures per client address and per user
name separately. While a client is locked out its attempts are refused without being counted or
audited one by one: each lockout is one ``auth.locked_out`` event, so nobody can grow the log
without limit.
"""

import hashlib
import hmac

from axes.signals import user_locked_out
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver

from fedportal.audit import record_event

UNKNOWN_PREFIX = "unknown-user:"


def login_identity(typed) -> str:
    """The name to store for a login attempt: an existing user's name, else a keyed hash of the text."""
    text = str(typed or "")
    if not text:
        return ""
    user_model = get_user_model()
    if len(text) <= 150 and user_model._default_manager.filter(**{user_model.USERNAME_FIELD: text}).exists():
        return text
    digest = hmac.new(settings.SECRET_KEY.encode(), b"login-name:" + text.encode("utf-8", "replace"), hashlib.sha256)
    return UNKNOWN_PREFIX + digest.hexdigest()[:16]


def axes_username(request, credentials) -> str | None:
    """AXES_USERNAME_CALLABLE: the name axes counts failures under and stores."""
    field = settings.AXES_USERNAME_FORM_FIELD if hasattr(settings, "AXES_USERNAME_FORM_FIELD") else "username"
    typed = (credentials or {}).get(field)
    if typed is None and request is not None:
        typed = request.POST.get(field)
    return login_identity(typed) if typed is not None else None


def _refused_while_locked_out(request) -> bool:
    """axes refused the attempt without checking the password (the client is locked out): it sets
    ``axes_locked_out`` before refusing and counts (``axes_failures_since_start``) only real failures."""
    return (
        bool(getattr(request, "axes_locked_out", False)) and getattr(request, "axes_failures_since_start", None) is None
    )


@receiver(user_logged_in, dispatch_uid="fedportal_audit_login")
def _audit_login(sender, request, user, **kwargs):
    record_event("auth.login", actor=user, obj=user, summary=f"{user.get_username()} logged in")


@receiver(user_logged_out, dispatch_uid="fedportal_audit_logout")
def _audit_logout(sender, request, user, **kwargs):
    if user is not None:
        record_event("auth.logout", actor=user, obj=user, summary=f"{user.get_username()} logged out")


@receiver(user_login_failed, dispatch_uid="fedportal_audit_login_failed")
def _audit_login_failed(sender, credentials, request=None, **kwargs):
    if request is not None and _refused_while_locked_out(request):
        return
    username = login_identity(credentials.get("username", ""))
    record_event(
        "auth.login_failed",
        object_type="auth.user",
        object_repr=username,
        summary=f"failed login for {username!r}",
    )


@receiver(user_locked_out, dispatch_uid="fedportal_audit_locked_out")
def _audit_locked_out(sender, request=None, username=None, ip_address=None, **kwargs):
    """axes sends this when the failure limit is reached and on every attempt while locked out;
    only the first is audited."""
    if request is not None and _refused_while_locked_out(request):
        return
    username = str(username or "")[:150]
    record_event(
        "auth.locked_out",
        object_type="auth.user",
        object_repr=username,
        summary=f"login for {username!r} from {ip_address or 'unknown address'} locked out after repeated failures",
        after={"username": username, "ip_address": ip_address, "failure_limit": settings.AXES_FAILURE_LIMIT},
    )
