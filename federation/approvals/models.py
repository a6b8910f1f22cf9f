"""Change requests: a proposed revision (or an unjoin), its per-cluster diff, approvals, outcome."""

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster
from federation.approvals.choices import ChangeKind, ChangeState, Decision
from federation.models import FederatedResource, PropagationRun, Revision


class ChangeRequest(models.Model):
    """One change that would touch clusters, and the decisions about it.

    ``diffs`` is a snapshot, per target cluster, of what applying would do against what is live
    (``[{cluster, action, diff, message, warnings, replicas}]``); ``outcome`` is the per-cluster
    result once applied (``[{cluster, resource, action, state, reason, message, changed}]``).
    """

    kind = models.CharField(max_length=16, choices=ChangeKind.choices)
    state = models.CharField(max_length=16, choices=ChangeState.choices, default=ChangeState.DRAFT, db_index=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    author_name = models.CharField(max_length=150, blank=True)

    resource = models.ForeignKey(
        FederatedResource, null=True, blank=True, on_delete=models.SET_NULL, related_name="change_requests"
    )
    resource_repr = models.CharField(max_length=320, blank=True, help_text="Kept when the resource is deleted.")
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The cluster to unjoin (unjoin requests only).",
    )
    cluster_name = models.CharField(max_length=63, blank=True)
    proposed_revision = models.ForeignKey(Revision, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    proposed_hash = models.CharField(
        max_length=64, blank=True, db_index=True, help_text="What approvals are given for: the proposed content's hash."
    )
    base_revision = models.ForeignKey(
        Revision,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The revision that was propagated when the request was drafted.",
    )

    target_clusters = models.JSONField(default=list, blank=True)
    required_approvals = models.PositiveSmallIntegerField(default=1)
    diffs = models.JSONField(default=list, blank=True)
    diffs_at = models.DateTimeField(null=True, blank=True)
    preflight = models.JSONField(default=list, blank=True)
    preflight_at = models.DateTimeField(null=True, blank=True)
    preflight_override_reason = models.TextField(blank=True)
    preflight_override_hash = models.CharField(max_length=64, blank=True)
    preflight_override_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    emergency = models.BooleanField(default=False, db_index=True)
    emergency_reason = models.TextField(blank=True)
    runs = models.ManyToManyField(PropagationRun, blank=True, related_name="change_requests")
    outcome = models.JSONField(default=list, blank=True)
    apply_error = models.TextField(blank=True)

    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True, help_text="When applying started.")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state", "-created_at"], name="approvals_cr_state_idx")]

    def __str__(self):
        return f"CR-{self.pk} {self.title}"

    def get_absolute_url(self):
        return reverse("approvals:change_detail", args=[self.pk])

    @property
    def subject(self) -> str:
        if self.kind in (ChangeKind.UNJOIN, ChangeKind.UPGRADE):
            return f"cluster {self.cluster_name}"
        return self.resource_repr

    @property
    def is_open(self) -> bool:
        return self.state in ChangeState.open()

    @property
    def is_finished(self) -> bool:
        return self.state in ChangeState.finished()


class Approval(models.Model):
    """One approver's decision, for the exact content (hash) they saw."""

    change_request = models.ForeignKey(ChangeRequest, on_delete=models.CASCADE, related_name="approvals")
    approver = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    approver_name = models.CharField(max_length=150)
    decision = models.CharField(max_length=16, choices=Decision.choices)
    comment = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["change_request", "approver", "content_hash", "decision"],
                name="approvals_one_decision_per_content",
            ),
        ]

    def __str__(self):
        return f"{self.approver_name} {self.decision} CR-{self.change_request_id}"

    def is_valid_for(self, change_request: ChangeRequest) -> bool:
        """Void once the request's proposed content changed after it was given."""
        return self.content_hash == change_request.proposed_hash


class Comment(models.Model):
    change_request = models.ForeignKey(ChangeRequest, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    author_name = models.CharField(max_length=150)
    body = models.TextField()
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self):
        return f"comment by {self.author_name} on CR-{self.change_request_id}"
