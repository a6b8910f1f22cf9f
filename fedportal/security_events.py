"""Logins, failed logins and logouts go to the audit log (explicit receivers on auth's signals)."""

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
