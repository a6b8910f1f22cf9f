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
