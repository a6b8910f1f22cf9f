"""The audit log: append-only, hash-chained records of every action."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from fedportal.masking import without_url_userinfo


class AppendOnlyError(Exception):
    """Raised on any attempt to change or delete an audit event through the ORM."""


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnlyError("Audit events are append-only.")

    def delete(self):
        raise AppendOnlyError("Audit events are append-only.")


class AuditEvent(models.Model):
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # the id stays as recorded when the user is deleted (it is hashed): no constraint, nothing cascades
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor_name = models.CharField(max_length=150, help_text="Username at the time, or 'system'.")
    action = models.CharField(max_length=64, db_index=True)
    object_type = models.CharField(max_length=64, blank=True, db_index=True)
    object_id = models.CharField(max_length=64, blank=True)
    object_repr = models.CharField(max_length=255, blank=True)
    cluster = models.CharField(max_length=63, blank=True, db_index=True)
    summary = models.TextField(blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    source_ip = models.GenericIPAddressField(null=True, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self):
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.object_repr}"

    # What is shown of an event (pages, API, CSV): as recorded, but no URL's user name or password
    # (clusters registered before they were refused recorded them; the chain keeps the event as is)
    @property
    def shown_summary(self) -> str:
        return without_url_userinfo(self.summary)

    @property
    def shown_before(self):
        return without_url_userinfo(self.before)

    @property
    def shown_after(self):
        return without_url_userinfo(self.after)

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise AppendOnlyError("Audit events are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("Audit events are append-only.")


class AuditChainHead(models.Model):
    """One row, locked while an event is appended, so the chain stays linear under concurrency."""

    last_hash = models.CharField(max_length=64, default="0" * 64)
    length = models.BigIntegerField(default=0)
    # Random, created with the first event: names this chain's checkpoint file (a fresh database
    # starts a fresh chain). See fedportal/audit.py.
    chain_id = models.CharField(max_length=32, blank=True, default="")
    # Events hashed with plain SHA-256 before FEDPORTAL_AUDIT_KEY existed (set once by migration 0003).
    legacy_length = models.BigIntegerField(default=0)
    # HMAC of the four values above (fedportal.audit.head_mac): written with every append.
    mac = models.CharField(max_length=64, blank=True, default="")
