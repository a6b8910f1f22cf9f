"""Change requests: a proposed revision (or an unjoin), its per-cluster diff, approvals, outcome."""

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster
from federation.approvals.choices import ChangeKind, ChangeState, Decision, RolloutState, WaveState
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

    rollout_strategy = models.JSONField(
        null=True, blank=True, help_text="Overrides the resource's rollout strategy for this request ({} = none)."
    )
    rollback_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="rollbacks",
        help_text="The request whose halted rollout this rollback undoes.",
    )
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


class Rollout(models.Model):
    """A change request applied wave by wave (federation.approvals.rollout drives it)."""

    change_request = models.OneToOneField(ChangeRequest, on_delete=models.CASCADE, related_name="rollout")
    state = models.CharField(
        max_length=16, choices=RolloutState.choices, default=RolloutState.PROGRESSING, db_index=True
    )
    strategy = models.JSONField(default=dict, blank=True, help_text="The strategy as it was when applying started.")
    auto_rollback = models.BooleanField(default=False)
    previous_revisions = models.JSONField(
        default=dict,
        blank=True,
        help_text="Cluster name -> the revision id it had when the rollout started: what a rollback restores.",
    )
    halt_reason = models.TextField(blank=True)
    lease_until = models.DateTimeField(null=True, blank=True, help_text="Who advances it: one task at a time.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"rollout of CR-{self.change_request_id} ({self.state})"


class RolloutWave(models.Model):
    """One wave: its clusters and settings, fixed when the rollout starts, and what happened to them.

    ``batches`` holds the PropagationRun id of each batch started (at most max_parallel clusters each);
    a batch is started by a compare-and-set on its index, so no cluster is sent the change twice.
    ``cluster_states`` maps cluster name -> Pending / Applying / Applied / Failed / Healthy / RolledBack.
    """

    rollout = models.ForeignKey(Rollout, on_delete=models.CASCADE, related_name="waves")
    index = models.PositiveSmallIntegerField()
    name = models.CharField(max_length=40)
    state = models.CharField(max_length=16, choices=WaveState.choices, default=WaveState.PENDING)
    clusters = models.JSONField(default=list)
    cluster_states = models.JSONField(default=dict, blank=True)
    max_parallel = models.PositiveIntegerField(default=1)
    bake_seconds = models.PositiveIntegerField(default=0)
    max_failures = models.PositiveIntegerField(default=0)
    progress_deadline = models.PositiveIntegerField(null=True, blank=True)
    require_approval = models.BooleanField(default=False)
    approvals = models.JSONField(default=list, blank=True, help_text="[{user_id, username, at}] for approval waves.")
    batches = models.JSONField(default=list, blank=True, help_text="PropagationRun id of each batch started.")
    batch_count = models.PositiveIntegerField(default=0, help_text="Batches started (the compare-and-set key).")
    failed_gate = models.TextField(blank=True)
    gate_message = models.TextField(blank=True, help_text="Why the gate is not passed yet (waiting).")
    started_at = models.DateTimeField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True, help_text="Every batch finished.")
    healthy_since = models.DateTimeField(null=True, blank=True, help_text="Gates all passing since (bake start).")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["rollout_id", "index"]
        constraints = [models.UniqueConstraint(fields=["rollout", "index"], name="approvals_rollout_wave_index")]

    def __str__(self):
        return f"wave {self.index + 1} {self.name} ({self.state})"
