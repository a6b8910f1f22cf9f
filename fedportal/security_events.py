"""Logins, failed logins, logouts and lockouts go to the audit log (explicit receivers on auth's
and django-axes' signals). Source address and request id come from the request context."""

from axes.signals import user_locked_out
from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver

from fedportal.audit import record_event


@receiver(user_logged_in, dispatch_uid="fedportal_audit_login")
def _audit_login(sender, request, user, **kwargs):
    record_event("auth.login", actor=user, obj=user, summary=f"{user.get_username()} logged in")


@receiver(user_logged_out, dispatch_uid="fedportal_audit_logout")
def _audit_logout(sender, request, user, **kwargs):
    if user is not None:
        record_event("auth.logout", actor=user, obj=user, summary=f"{user.get_username()} logged out")


@receiver(user_login_failed, dispatch_uid="fedportal_audit_login_failed")
def _audit_login_failed(sender, credentials, request=None, **kwargs):
    username = str(credentials.get("username", ""))[:150]
    record_event(
        "auth.login_failed",
        object_type="auth.user",
        object_repr=username,
        summary=f"failed login for {username!r}",
    )


@receiver(user_locked_out, dispatch_uid="fedportal_audit_locked_out")
def _audit_locked_out(sender, request=None, username=None, ip_address=None, **kwargs):
    """axes sends this when the failure limit is reached and on every attempt while locked out."""
    username = str(username or "")[:150]
    record_event(
        "auth.locked_out",
        object_type="auth.user",
        object_repr=username,
        summary=f"login for {username!r} from {ip_address or 'unknown address'} locked out after repeated failures",
        after={"username": username, "ip_address": ip_address, "failure_limit": settings.AXES_FAILURE_LIMIT},
    )
