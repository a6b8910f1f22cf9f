"""Kinds, states and decisions of change requests; no status string is spelled anywhere else."""

from django.db import models


class ChangeKind(models.TextChoices):
    CREATE = "create", "Create"
    EDIT = "edit", "Edit"
    ROLLBACK = "rollback", "Rollback"
    DELETE = "delete", "Delete"
    UNJOIN = "unjoin", "Unjoin cluster"
    RECONCILE = "reconcile", "Reconcile a cluster that joined or was relabelled"
    UPGRADE = "upgrade", "Upgrade cluster"  # Cluster API (drift.upgrades runs it: federation.approvals.kinds)


class ChangeState(models.TextChoices):
    DRAFT = "Draft", "Draft"
    SUBMITTED = "Submitted", "Submitted"
    APPROVED = "Approved", "Approved"
    REJECTED = "Rejected", "Rejected"
    APPLYING = "Applying", "Applying"
    APPLIED = "Applied", "Applied"
    PARTIALLY_FAILED = "PartiallyFailed", "PartiallyFailed"
    FAILED = "Failed", "Failed"
    CANCELLED = "Cancelled", "Cancelled"

    @classmethod
    def open(cls) -> tuple[str, ...]:
        """States in which the request may still change what reaches the clusters."""
        return (cls.DRAFT, cls.SUBMITTED, cls.APPROVED)

    @classmethod
    def finished(cls) -> tuple[str, ...]:
        return (cls.REJECTED, cls.APPLIED, cls.PARTIALLY_FAILED, cls.FAILED, cls.CANCELLED)


class Decision(models.TextChoices):
    APPROVE = "approve", "Approved"
    REJECT = "reject", "Rejected"


class Severity(models.TextChoices):
    BLOCKING = "blocking", "Blocking"
    WARNING = "warning", "Warning"
