"""Federated types, resources, immutable revisions, propagation runs and propagated versions."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster
from clusters.validators import (
    validate_dns1035_label,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_kind,
)
from federation.choices import (
    DriftPolicy,
    PropagationReason,
    Retention,
    RunState,
    RunTrigger,
    SyncState,
    TargetAction,
    TargetState,
    Toggle,
    TypeScope,
)
from federation.manifests import join_api_version
from federation.rendering import TargetType


class FederatedType(models.Model):
    """KubeFed's FederatedTypeConfig: which Kubernetes type can be federated, and how."""

    # the names' rules are apiextensions' for a CustomResourceDefinition (ValidateCustomResourceDefinitionNames)
    group = models.CharField(
        max_length=253,
        blank=True,
        validators=[validate_dns1123_subdomain],
        help_text='API group; empty for the core group ("v1").',
    )
    version = models.CharField(max_length=63, validators=[validate_dns1035_label])
    kind = models.CharField(max_length=63, validators=[validate_kind])
    plural = models.CharField(
        max_length=63, validators=[validate_dns1035_label], help_text="Resource name, e.g. deployments."
    )
    scope = models.CharField(max_length=16, choices=TypeScope.choices, default=TypeScope.NAMESPACED)
    propagation = models.CharField(max_length=16, choices=Toggle.choices, default=Toggle.ENABLED)
    status_collection = models.CharField(max_length=16, choices=Toggle.choices, default=Toggle.DISABLED)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["group", "kind"]
        constraints = [
            models.UniqueConstraint(fields=["group", "kind"], name="federation_type_group_kind_unique"),
            models.UniqueConstraint(fields=["group", "plural"], name="federation_type_group_plural_unique"),
        ]

    def __str__(self):
        return self.name

    @property
    def name(self) -> str:
        """KubeFed's FederatedTypeConfig name: plural.group ("deployments.apps", "configmaps")."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        return join_api_version(self.group, self.version)

    @property
    def namespaced(self) -> bool:
        return self.scope == TypeScope.NAMESPACED

    @property
    def propagation_enabled(self) -> bool:
        return self.propagation == Toggle.ENABLED

    @property
    def status_collection_enabled(self) -> bool:
        return self.status_collection == Toggle.ENABLED

    @property
    def target(self) -> TargetType:
        return TargetType(self.api_version, self.kind, self.namespaced)


class FederatedResource(models.Model):
    """One object defined once and placed on clusters (KubeFed's Federated<Kind>)."""

    type = models.ForeignKey(FederatedType, on_delete=models.PROTECT, related_name="resources")
    namespace = models.CharField(max_length=63, blank=True, validators=[validate_dns1123_label])
    name = models.CharField(max_length=253)
    current_revision = models.ForeignKey("Revision", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    propagated_revision = models.ForeignKey(
        "Revision",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The revision most recently sent to the clusters.",
    )
    retention = models.CharField(max_length=16, choices=Retention.choices, default=Retention.DELETE)
    drift_policy = models.CharField(max_length=16, choices=DriftPolicy.choices, default=DriftPolicy.REPORT)
    approved_drift_policy = models.CharField(
        max_length=16,
        choices=DriftPolicy.choices,
        blank=True,
        default="",
        help_text="The drift policy of the last applied change request, which is what drift checks act on "
        "(empty: none applied yet, so drift is reported, never repaired).",
    )
    approved_retention = models.CharField(
        max_length=16,
        choices=Retention.choices,
        blank=True,
        default="",
        help_text="The retention of the last applied change request, which is what removals outside a change "
        "request (a relabelled cluster leaving a placement) act on (empty: none applied yet, so they orphan).",
    )
    rollout_strategy = models.JSONField(
        default=dict, blank=True, help_text="Waves an approved change goes through (federation.rollout_strategy)."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["namespace", "name", "type_id"]
        constraints = [
            models.UniqueConstraint(fields=["type", "namespace", "name"], name="federation_resource_unique"),
        ]

    def __str__(self):
        return f"{self.type.kind} {self.qualified_name}"

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def get_absolute_url(self):
        return reverse("federation:resource_detail", args=[self.pk])


class Revision(models.Model):
    """An immutable snapshot of a resource's desired state."""

    resource = models.ForeignKey(FederatedResource, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    template = models.JSONField(default=dict)
    placement = models.JSONField(default=dict, blank=True)
    overrides = models.JSONField(default=list, blank=True)
    scheduling = models.JSONField(null=True, blank=True, help_text="ReplicaSchedulingPreference spec, or null.")
    content_hash = models.CharField(max_length=64, db_index=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    message = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["resource_id", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["resource", "number"], name="federation_revision_number_unique"),
        ]

    def __str__(self):
        return f"{self.resource_id}@{self.number}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not kwargs.pop("_allow_update", False):
            raise ValidationError("Revisions are immutable; create a new one instead.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValidationError("Revisions are immutable and are never deleted on their own.")

    @property
    def snapshot(self) -> dict:
        return {
            "template": self.template,
            "placement": self.placement,
            "overrides": self.overrides,
            "scheduling": self.scheduling,
        }


class PropagationRun(models.Model):
    """One fan-out of a revision to its clusters; progress = its targets' states."""

    resource = models.ForeignKey(FederatedResource, on_delete=models.CASCADE, related_name="runs")
    revision = models.ForeignKey(Revision, on_delete=models.PROTECT, related_name="runs")
    trigger = models.CharField(max_length=16, choices=RunTrigger.choices, default=RunTrigger.PROPAGATE)
    reapply = models.BooleanField(
        default=False,
        help_text="An operator's re-sync: apply even where nothing changed on FedPortal's side, putting back "
        "what was changed on the cluster (background runs leave drift to the resource's drift policy).",
    )
    state = models.CharField(max_length=16, choices=RunState.choices, default=RunState.RUNNING, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["resource", "-started_at"], name="federation_run_resource_idx")]

    def __str__(self):
        return f"run {self.pk} of {self.resource_id}@{self.revision_id}"

    @property
    def is_finished(self) -> bool:
        return self.finished_at is not None


class PropagationTarget(models.Model):
    """One cluster's share of a run. Claimed with compare-and-set so it runs once at a time."""

    run = models.ForeignKey(PropagationRun, on_delete=models.CASCADE, related_name="targets")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    action = models.CharField(max_length=16, choices=TargetAction.choices, default=TargetAction.APPLY)
    replicas = models.IntegerField(null=True, blank=True, help_text="Scheduled replicas (RSP), if any.")
    state = models.CharField(max_length=16, choices=TargetState.choices, default=TargetState.PENDING, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    lease_until = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=32, choices=PropagationReason.choices, blank=True)
    message = models.TextField(blank=True)
    changed = models.BooleanField(default=False, help_text="Whether the cluster's object was written.")
    # indexed: the fleet watcher asks every few seconds which targets settled since it last looked
    finished_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["run_id", "cluster__name"]
        constraints = [models.UniqueConstraint(fields=["run", "cluster"], name="federation_target_unique")]

    def __str__(self):
        return f"{self.run_id}/{self.cluster_id} {self.action} {self.state}"


class RetiredTargetTotal(models.Model):
    """What finished targets deleted with their resource or cluster added to /metrics' propagation
    counter and duration histogram, per (state, reason), so neither goes down when rows go
    (federation.outcome_totals)."""

    state = models.CharField(max_length=16, choices=TargetState.choices)
    reason = models.CharField(max_length=32, blank=True)
    count = models.PositiveBigIntegerField(default=0)
    seconds = models.FloatField(default=0.0, help_text="Their durations' sum (run start to result).")
    buckets = models.JSONField(default=list, help_text="Cumulative counts per PROPAGATION_BUCKETS bound.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["state", "reason"], name="federation_retired_total_unique")]

    def __str__(self):
        return f"{self.state}/{self.reason or 'none'}: {self.count}"


class PropagatedVersion(models.Model):
    """What FedPortal last put on one cluster for one resource, and what it saw there since."""

    resource = models.ForeignKey(FederatedResource, on_delete=models.CASCADE, related_name="propagated_versions")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="propagated_versions")
    revision = models.ForeignKey(Revision, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    template_hash = models.CharField(max_length=64, blank=True)
    override_hash = models.CharField(max_length=64, blank=True)
    version = models.CharField(max_length=64, blank=True, help_text='"gen:N" or "rv:N" of the object we wrote.')
    status = models.CharField(
        max_length=32, choices=PropagationReason.choices, default=PropagationReason.PENDING, db_index=True
    )
    message = models.TextField(blank=True)
    applied_manifest = models.JSONField(null=True, blank=True, help_text="The manifest last applied (drift baseline).")
    remote_status = models.JSONField(null=True, blank=True)
    sync_state = models.CharField(max_length=16, choices=SyncState.choices, default=SyncState.UNKNOWN, db_index=True)
    drift = models.JSONField(default=list, blank=True, help_text="Field diff [{path, before, after, change}].")
    live_resource_version = models.CharField(max_length=64, blank=True)
    live_uid = models.CharField(
        max_length=64,
        blank=True,
        help_text="metadata.uid of the object we wrote; the next apply names it, so it never writes over another "
        "object of the same name.",
    )
    propagated_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    # when the live object was last diffed; a sweep that finds it unchanged (same resourceVersion) does
    # not write it: ClusterWatch.last_sweep_at says when the cluster was last swept
    drift_checked_at = models.DateTimeField(null=True, blank=True)
    drift_detected_at = models.DateTimeField(null=True, blank=True)
    drift_repaired_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["resource_id", "cluster__name"]
        constraints = [
            models.UniqueConstraint(fields=["resource", "cluster"], name="federation_propagated_version_unique"),
        ]
        indexes = [
            models.Index(
                fields=["sync_state"], condition=Q(sync_state="OutOfSync"), name="federation_pv_outofsync_idx"
            ),
            # covers the compliance report's per-cluster counts: a scan of this index, not of 200,000
            # rows with their manifests (SQLite: 12 ms instead of 150 ms of CPU)
            models.Index(fields=["cluster", "status", "sync_state"], name="federation_pv_cluster_idx"),
        ]

    def __str__(self):
        return f"{self.resource_id}@{self.cluster_id}: {self.status}"

    @property
    def is_healthy(self) -> bool:
        return self.status in PropagationReason.healthy()

    @property
    def is_present(self) -> bool:
        """FedPortal believes its object is on the cluster (not removed/orphaned)."""
        return self.status not in (PropagationReason.REMOVED, PropagationReason.ORPHANED) and bool(
            self.applied_manifest
        )


class SettingsChange(models.Model):
    """Who changed a resource's retention, drift policy or rollout strategy, and when. These settings
    change what propagation does without a new revision, so the approval workflow counts their
    authors as authors of what a change request would apply (federation.approvals.content)."""

    resource = models.ForeignKey(FederatedResource, on_delete=models.CASCADE, related_name="settings_changes")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    before = models.JSONField(default=dict)
    after = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)

    class Meta:
        ordering = ["resource_id", "created_at", "id"]

    def __str__(self):
        return f"settings of {self.resource_id} changed at {self.created_at:%Y-%m-%d %H:%M:%S}"


class FleetWatcher(models.Model):
    """One `manage.py watch_fleet` process. Alive while its heartbeat is younger than the lease
    (FEDERATION_WATCH_LEASE_SECONDS); the clusters of a dead one are taken over by the others."""

    name = models.CharField(max_length=128, unique=True)
    host = models.CharField(max_length=255, blank=True)
    pid = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(default=timezone.now)
    heartbeat_at = models.DateTimeField(default=timezone.now, db_index=True)
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class ClusterWatch(models.Model):
    """Which watcher holds a cluster's watches (a lease renewed with compare-and-set updates) and
    how they are doing, written by the watcher every few seconds."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="watch")
    watcher = models.ForeignKey(FleetWatcher, null=True, blank=True, on_delete=models.SET_NULL, related_name="clusters")
    lease_until = models.DateTimeField(null=True, blank=True, db_index=True)
    connected = models.BooleanField(default=False)
    watches = models.PositiveIntegerField(default=0, help_text="Watches open (one per federated type).")
    last_event_at = models.DateTimeField(null=True, blank=True)
    last_bookmark_at = models.DateTimeField(null=True, blank=True)
    last_relist_at = models.DateTimeField(null=True, blank=True)
    last_sweep_at = models.DateTimeField(null=True, blank=True, help_text="The safety-net sweep's last LIST.")
    reconnects = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    updated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster__name"]

    def __str__(self):
        return f"watch of {self.cluster_id} by {self.watcher_id}"
