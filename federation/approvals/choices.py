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
    ROLLED_BACK = "RolledBack", "RolledBack"

    @classmethod
    def open(cls) -> tuple[str, ...]:
        """States in which the request may still change what reaches the clusters."""
        return (cls.DRAFT, cls.SUBMITTED, cls.APPROVED)

    @classmethod
    def finished(cls) -> tuple[str, ...]:
        return (cls.REJECTED, cls.APPLIED, cls.PARTIALLY_FAILED, cls.FAILED, cls.CANCELLED, cls.ROLLED_BACK)


class RolloutState(models.TextChoices):
    """A staged rollout (a change request applied wave by wave)."""

    PROGRESSING = "Progressing", "Progressing"
    PAUSED = "Paused", "Paused"
    WAITING_APPROVAL = "WaitingApproval", "WaitingApproval"
    HALTED = "Halted", "Halted"
    ROLLED_BACK = "RolledBack", "RolledBack"
    ABORTED = "Aborted", "Aborted"
    COMPLETED = "Completed", "Completed"

    @classmethod
    def terminal(cls) -> tuple[str, ...]:
        return (cls.ROLLED_BACK, cls.ABORTED, cls.COMPLETED)


class WaveState(models.TextChoices):
    PENDING = "Pending", "Pending"
    APPLYING = "Applying", "Applying"
    BAKING = "Baking", "Baking"
    PASSED = "Passed", "Passed"
    FAILED = "Failed", "Failed"
    ROLLED_BACK = "RolledBack", "RolledBack"
    ABORTED = "Aborted", "Aborted"  # the rollout was aborted while this wave applied or baked

    @classmethod
    def started(cls) -> tuple[str, ...]:
        """Waves whose clusters may hold the new revision."""
        return (cls.APPLYING, cls.BAKING, cls.PASSED, cls.FAILED, cls.ABORTED)


class Decision(models.TextChoices):
    APPROVE = "approve", "Approved"
    REJECT = "reject", "Rejected"


class Severity(models.TextChoices):
    BLOCKING = "blocking", "Blocking"
    WARNING = "warning", "Warning"
