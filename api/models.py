"""API tokens (stored hashed, shown once) and the replies remembered for Idempotency-Key."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """A bearer token for one user. Only its SHA-256 is stored; ``prefix`` helps users tell tokens apart.
    It acts with its user's roles, or only reads when ``read_only``."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="The first characters of the token, to recognise it.")
    token_hash = models.CharField(max_length=64, unique=True)
    read_only = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"API token {self.name!r} ({self.prefix}…) of {self.user_id}"

    def is_active(self, now=None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


class IdempotencyRecord(models.Model):
    """The reply to a write sent with an ``Idempotency-Key`` header, replayed when the same user sends
    the same key again (a retried CI step). ``status`` is 0 while the first request is running."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of method, path and body.")
    status = models.PositiveSmallIntegerField(default=0)
    content_type = models.CharField(max_length=100, blank=True)
    body = models.BinaryField(blank=True, default=b"")
    roles = models.CharField(
        max_length=100, blank=True, help_text="The user's roles when the first request ran (comma-separated)."
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="api_idempotency_user_key")]
