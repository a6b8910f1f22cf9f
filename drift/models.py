"""Drift: the fleet's version policy (one row) and periodic compliance snapshots for trends."""

from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from drift.skew import SkewPolicy

_SKEW_LIMIT = [MaxValueValidator(50)]


class VersionPolicy(models.Model):
    """The version-skew policy admins edit. A singleton: always pk=1, read through ``load()``."""

    host_member_max_minor_skew = models.PositiveSmallIntegerField(
        "host–member max minor skew",
        default=1,
        validators=_SKEW_LIMIT,
        help_text="How many minors a member may be behind the host (seed 000: at most 1).",
    )
    member_member_max_minor_skew = models.PositiveSmallIntegerField(
        "member–member max minor skew",
        default=2,
        validators=_SKEW_LIMIT,
    )
    kubelet_max_older_minors = models.PositiveSmallIntegerField(
        "kubelet max minors older (apiserver ≥ 1.28)",
        default=3,
        validators=_SKEW_LIMIT,
    )
    kubelet_max_older_minors_before_1_28 = models.PositiveSmallIntegerField(
        "kubelet max minors older (apiserver < 1.28)",
        default=2,
        validators=_SKEW_LIMIT,
    )
    auto_isolate_on_p0 = models.BooleanField(
        "auto-isolate on P0",
        default=False,
        help_text="Isolate a member automatically when the policy marks it P0 (blocking).",
    )
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name = "version policy"
        verbose_name_plural = "version policy"
        constraints = [models.CheckConstraint(condition=Q(pk=1), name="drift_versionpolicy_singleton")]

    def __str__(self):
        return "Version policy"

    @classmethod
    def load(cls) -> "VersionPolicy":
        """The stored policy, or the defaults (unsaved) when nobody has edited it yet: reads never write."""
        return cls.objects.filter(pk=1).first() or cls(pk=1)

    def as_skew_policy(self) -> SkewPolicy:
        return SkewPolicy(
            host_member_max_minor_skew=self.host_member_max_minor_skew,
            member_member_max_minor_skew=self.member_member_max_minor_skew,
            kubelet_max_older_minors=self.kubelet_max_older_minors,
            kubelet_max_older_minors_before_1_28=self.kubelet_max_older_minors_before_1_28,
        )

    def snapshot(self) -> dict:
        return {**self.as_skew_policy().as_dict(), "auto_isolate_on_p0": self.auto_isolate_on_p0}


class ComplianceSnapshot(models.Model):
    """One periodic fleet compliance measurement (ACM's compliance history), for trend charts."""

    taken_at = models.DateTimeField(default=timezone.now, db_index=True)
    clusters_total = models.PositiveIntegerField(default=0)
    clusters_compliant = models.PositiveIntegerField(default=0)
    open_drift = models.PositiveIntegerField(default=0, help_text="Resources out of sync at that time.")
    findings_p0 = models.PositiveIntegerField(default=0)
    findings_p1 = models.PositiveIntegerField(default=0)
    findings_p2 = models.PositiveIntegerField(default=0)
    findings_p3 = models.PositiveIntegerField(default=0)
    incompatible_cells = models.PositiveIntegerField(default=0)
    isolated_clusters = models.PositiveIntegerField(default=0)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-taken_at", "-id"]
        get_latest_by = "taken_at"

    def __str__(self):
        return f"Compliance {self.taken_at:%Y-%m-%d %H:%M} {self.clusters_compliant}/{self.clusters_total}"

    @property
    def compliant_share(self) -> float:
        return self.clusters_compliant / self.clusters_total if self.clusters_total else 1.0


class UpgradePlan(models.Model):
    """A Cluster API upgrade's plan and progress, beside its change request (kind ``upgrade``):
    drift.upgrades drafts, checks and runs it.

    ``steps``: [{"kind": "controlPlane" | "machineDeployment", "name", "from", "to",
    "state": "pending" | "running" | "done" | "failed" | "skipped" (after a failed one),
    "started_at", "finished_at", "message"}];
    ``findings``: the preflight, [{"severity": "P0".."P3", "resource", "message"}].
    """

    change_request = models.OneToOneField(
        "approvals.ChangeRequest", on_delete=models.CASCADE, related_name="upgrade_plan"
    )
    member = models.ForeignKey("clusters.Cluster", null=True, on_delete=models.SET_NULL, related_name="+")
    managed = models.ForeignKey("clusters.ManagedCluster", null=True, on_delete=models.SET_NULL, related_name="+")
    scope = models.CharField(max_length=16, default="all", help_text="all | control-plane | workers")
    from_version = models.CharField(max_length=64)
    target_version = models.CharField(max_length=64)
    steps = models.JSONField(default=list)
    findings = models.JSONField(default=list, blank=True)
    p0_override_reason = models.TextField(blank=True)
    last_progress_at = models.DateTimeField(null=True, blank=True)
    progress_marker = models.CharField(max_length=64, blank=True, help_text="Hash of the machines' phases.")
    synced_at = models.DateTimeField(
        null=True, blank=True, help_text="Lease of the sync pass working on it (in the future while one runs)."
    )
    stuck_seconds = models.PositiveIntegerField(
        default=900, help_text="A step whose machines make no progress this long halts the upgrade."
    )

    def __str__(self):
        return f"upgrade {self.change_request_id} to {self.target_version}"

    @property
    def current_step(self) -> dict | None:
        return next((s for s in self.steps if s.get("state") in ("pending", "running")), None)
