"""Status and kind strings for federation; no status string is spelled anywhere else."""

from django.db import models


class TypeScope(models.TextChoices):
    NAMESPACED = "Namespaced", "Namespaced"
    CLUSTER = "Cluster", "Cluster"


class Toggle(models.TextChoices):
    """KubeFed's FederatedTypeConfig propagation / statusCollection values."""

    ENABLED = "Enabled", "Enabled"
    DISABLED = "Disabled", "Disabled"


class Retention(models.TextChoices):
    """What happens to the object on a cluster that leaves the placement."""

    DELETE = "Delete", "Delete"
    ORPHAN = "Orphan", "Orphan"


class DriftPolicy(models.TextChoices):
    REPORT = "Report", "Report"
    ENFORCE = "Enforce", "Enforce"


class PropagationReason(models.TextChoices):
    """Per-cluster propagation status: KubeFed's reason strings, plus ours where KubeFed had none."""

    OK = "OK", "OK"
    PENDING = "Pending", "Pending"
    WAITING_FOR_REMOVAL = "WaitingForRemoval", "WaitingForRemoval"
    REMOVED = "Removed", "Removed"
    ORPHANED = "Orphaned", "Orphaned"
    CLUSTER_NOT_READY = "ClusterNotReady", "ClusterNotReady"
    CLUSTER_ISOLATED = "ClusterIsolated", "ClusterIsolated"
    CLUSTER_NOT_REGISTERED = "ClusterNotRegistered", "ClusterNotRegistered"
    CREATION_FAILED = "CreationFailed", "CreationFailed"
    UPDATE_FAILED = "UpdateFailed", "UpdateFailed"
    DELETION_FAILED = "DeletionFailed", "DeletionFailed"
    APPLY_OVERRIDES_FAILED = "ApplyOverridesFailed", "ApplyOverridesFailed"
    ALREADY_EXISTS = "AlreadyExists", "AlreadyExists"
    RETRIEVAL_FAILED = "RetrievalFailed", "RetrievalFailed"
    VERSION_RETRIEVAL_FAILED = "VersionRetrievalFailed", "VersionRetrievalFailed"
    NAMESPACE_NOT_FEDERATED = "NamespaceNotFederated", "NamespaceNotFederated"
    FIELD_NOT_SUPPORTED = "FieldNotSupported", "FieldNotSupported"

    @classmethod
    def healthy(cls) -> tuple[str, ...]:
        return (cls.OK, cls.REMOVED, cls.ORPHANED)


class SyncState(models.TextChoices):
    UNKNOWN = "Unknown", "Unknown"
    IN_SYNC = "InSync", "InSync"
    OUT_OF_SYNC = "OutOfSync", "OutOfSync"


class Health(models.TextChoices):
    """The live object's health on one cluster, in Argo CD's words (federation.health computes it)."""

    HEALTHY = "Healthy", "Healthy"
    PROGRESSING = "Progressing", "Progressing"
    DEGRADED = "Degraded", "Degraded"
    SUSPENDED = "Suspended", "Suspended"  # held on purpose: a suspended Job
    MISSING = "Missing", "Missing"
    UNKNOWN = "Unknown", "Unknown"  # the cluster is not Ready: what was collected cannot be vouched for


class TargetAction(models.TextChoices):
    """What one propagation run does on one cluster."""

    APPLY = "apply", "Apply"
    DELETE = "delete", "Delete"
    ORPHAN = "orphan", "Orphan"
    SKIP = "skip", "Skip"


class TargetState(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    RETRYING = "retrying", "Retrying"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"

    @classmethod
    def terminal(cls) -> tuple[str, ...]:
        return (cls.DONE, cls.FAILED)


class RunState(models.TextChoices):
    RUNNING = "Running", "Running"
    SUCCEEDED = "Succeeded", "Succeeded"
    PARTIALLY_FAILED = "PartiallyFailed", "PartiallyFailed"
    FAILED = "Failed", "Failed"


class RunTrigger(models.TextChoices):
    PROPAGATE = "propagate", "Propagate"
    RESYNC = "resync", "Re-sync"
    ENFORCE = "enforce", "Drift enforcement"
    UNJOIN = "unjoin", "Unjoin"  # an approved unjoin's removal: it reaches an isolated cluster too


class Condition(models.TextChoices):
    """A resource's aggregate condition, from its clusters' PropagatedVersions."""

    NOT_PROPAGATED = "NotPropagated", "Not propagated"
    PROPAGATING = "Propagating", "Propagating"
    PROPAGATED = "Propagated", "Propagated"
    DEGRADED = "Degraded", "Degraded"
    OUT_OF_SYNC = "OutOfSync", "Out of sync"
