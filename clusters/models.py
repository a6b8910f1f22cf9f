"""Cluster registry: clusters, their credentials (encrypted), health state and version history."""

import functools

from django.conf import settings
from django.core.validators import URLValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from clusters import crypto
from clusters.choices import AuthMethod, ClusterRole, ClusterState
from clusters.labels import EQUALS, EXISTS, Requirement, filter_labels
from clusters.validators import (
    normalize_api_server,
    validate_dns1123_label,
    validate_labels,
    validate_no_userinfo,
)

api_server_validator = URLValidator(schemes=["https", "http"])


class ClusterQuerySet(models.QuerySet):
    def members(self):
        return self.filter(role=ClusterRole.MEMBER)

    def ready(self):
        return self.filter(state=ClusterState.READY)

    def with_label(self, key: str, value: str | None = None):
        """Clusters labelled ``key`` (=``value``); works for any key, dots and slashes included."""
        return self.with_labels([Requirement(key, EXISTS) if value is None else Requirement(key, EQUALS, (value,))])

    def with_labels(self, requirements):
        """Clusters matching every label requirement (clusters.labels.parse_selector)."""
        return filter_labels(self, requirements)


@functools.cache
def _cluster_url_prefix() -> str:
    return reverse("clusters:cluster_detail", args=[987654321]).split("987654321/", 1)[0]


class Cluster(models.Model):
    """A KubeFedCluster: how to reach one Kubernetes API server and what we last saw there."""

    name = models.CharField(max_length=63, unique=True, validators=[validate_dns1123_label])
    api_server = models.CharField(
        "API server URL", max_length=2048, validators=[api_server_validator, validate_no_userinfo]
    )
    role = models.CharField(max_length=16, choices=ClusterRole.choices, default=ClusterRole.MEMBER)
    labels = models.JSONField(default=dict, blank=True, validators=[validate_labels])
    region = models.CharField(max_length=253, blank=True, db_index=True, help_text="From the nodes' topology labels.")
    zones = models.JSONField(default=list, blank=True, help_text="From the nodes' topology labels.")

    # Credentials: one encrypted JSON blob ({"token": ...} or {"client_certificate": ..., "client_key": ...}).
    # Never rendered, logged or exported; read only through clusters.services.connection_for().
    auth_method = models.CharField(max_length=32, choices=AuthMethod.choices, default=AuthMethod.TOKEN)
    credentials_encrypted = models.TextField(blank=True, editable=False)
    credential_version = models.PositiveIntegerField(default=1, editable=False)
    credentials_rotated_at = models.DateTimeField(null=True, blank=True, editable=False)
    ca_bundle = models.TextField("CA bundle (PEM)", blank=True)
    insecure_skip_tls_verify = models.BooleanField("skip TLS verification", default=False)

    # Health (KubeFed semantics; see clusters.probing.next_state).
    state = models.CharField(max_length=16, choices=ClusterState.choices, default=ClusterState.UNKNOWN, db_index=True)
    state_changed_at = models.DateTimeField(null=True, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    consecutive_successes = models.PositiveIntegerField(default=0)
    last_probe_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    probe_lease_until = models.DateTimeField(null=True, blank=True, editable=False)

    # Version (from GET /version and the node list).
    server_version = models.CharField(max_length=64, blank=True, help_text="gitVersion, e.g. v1.27.3")
    version_major = models.PositiveSmallIntegerField(null=True, blank=True)
    version_minor = models.PositiveSmallIntegerField(null=True, blank=True)
    platform = models.CharField(max_length=64, blank=True)
    kubelet_versions = models.JSONField(default=dict, blank=True, help_text="{node name: kubelet version}")
    served_apis = models.JSONField(
        default=list,
        blank=True,
        help_text="Group-versions the cluster's discovery serves (read with the inventory; empty: not read yet).",
    )
    node_count = models.PositiveIntegerField(default=0)
    inventory_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="When /readyz and the node list were last read (a poll refreshes them every "
        "FEDPORTAL_INVENTORY_REFRESH_SECONDS; see clusters/probing.py).",
    )

    # Isolation (set by drift/compliance work; excluded from propagation while set).
    isolated = models.BooleanField(default=False, db_index=True)
    isolated_reason = models.TextField(blank=True)
    isolated_at = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ClusterQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["role"], condition=Q(role="host"), name="clusters_at_most_one_host"),
        ]
        indexes = [models.Index(fields=["version_major", "version_minor"], name="clusters_version_idx")]

    def __str__(self):
        return self.name

    def clean(self):
        # one spelling per server (clusters.validators.normalize_api_server): the duplicate check
        # compares stored URLs with it
        self.api_server = normalize_api_server(self.api_server)

    def get_absolute_url(self) -> str:
        """The cluster's page (a list shows 50: one reverse() per process, not one per row)."""
        return f"{_cluster_url_prefix()}{self.pk}/"

    @property
    def is_host(self) -> bool:
        return self.role == ClusterRole.HOST

    @property
    def minor_version(self) -> str:
        """ "1.27" (empty when the version is not known yet)."""
        if self.version_major is None or self.version_minor is None:
            return ""
        return f"{self.version_major}.{self.version_minor}"

    @property
    def is_ready(self) -> bool:
        return self.state == ClusterState.READY

    @property
    def has_credentials(self) -> bool:
        return bool(self.credentials_encrypted)

    @property
    def cache_key(self) -> tuple:
        """Key for the per-cluster ApiClient cache: a new credential_version means a new client."""
        return (self.pk, self.credential_version)

    # Credentials are only written and read through these two methods.
    def set_credentials(self, credentials: dict) -> None:
        self.credentials_encrypted = crypto.encrypt_json({k: v for k, v in credentials.items() if v})

    def get_credentials(self) -> dict:
        return crypto.decrypt_json(self.credentials_encrypted)


class VersionSample(models.Model):
    """A cluster's version as seen at one probe; written only when something changed."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="version_samples")
    sampled_at = models.DateTimeField(default=timezone.now, db_index=True)
    git_version = models.CharField(max_length=64)
    version_major = models.PositiveSmallIntegerField(null=True, blank=True)
    version_minor = models.PositiveSmallIntegerField(null=True, blank=True)
    platform = models.CharField(max_length=64, blank=True)
    kubelet_versions = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-sampled_at", "-id"]
        indexes = [models.Index(fields=["cluster", "-sampled_at"], name="clusters_vsample_cluster_idx")]

    def __str__(self):
        return f"{self.cluster_id} {self.git_version} @ {self.sampled_at:%Y-%m-%d %H:%M:%S}"


class ClusterStateChange(models.Model):
    """One transition of a cluster's state, for the detail page's history."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="state_changes")
    from_state = models.CharField(max_length=16, choices=ClusterState.choices)
    to_state = models.CharField(max_length=16, choices=ClusterState.choices)
    reason = models.TextField(blank=True)
    at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["cluster", "-at"], name="clusters_statechg_cluster_idx")]

    def __str__(self):
        return f"{self.cluster_id} {self.from_state} -> {self.to_state}"


class PollRequest(models.Model):
    """A "poll now" for one cluster or the whole fleet; progress = clusters probed since started_at."""

    started_at = models.DateTimeField(default=timezone.now)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    total = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self):
        return f"poll {self.pk} ({self.cluster_id or 'fleet'})"


class ManagedCluster(models.Model):
    """A Cluster API Cluster found on a registered management cluster, linked to the registered
    member it describes, with what its objects said at the last poll (clusters/lifecycle.py).

    ``control_plane``: {name, version, replicas, updatedReplicas, readyReplicas, statusVersion};
    ``machine_deployments``: [{name, version, replicas, updatedReplicas, readyReplicas,
    availableReplicas, phase}]; ``machines``: [{name, phase, version, role, owner, nodeName}].
    """

    management = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="capi_clusters")
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    member = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.SET_NULL, related_name="capi_managed_by"
    )
    link_source = models.CharField(
        max_length=16, blank=True, help_text="How the member was linked: name, endpoint or manual."
    )
    endpoint = models.CharField(max_length=512, blank=True, help_text="spec.controlPlaneEndpoint host:port")
    phase = models.CharField(max_length=32, blank=True)
    control_plane = models.JSONField(default=dict, blank=True)
    machine_deployments = models.JSONField(default=list, blank=True)
    machines = models.JSONField(default=list, blank=True)
    observed_at = models.DateTimeField(null=True, blank=True)
    gone = models.BooleanField(default=False, help_text="No longer found on the management cluster.")

    class Meta:
        ordering = ["management__name", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["management", "namespace", "name"], name="clusters_capi_unique"),
        ]

    def __str__(self):
        return f"{self.management.name}:{self.namespace}/{self.name}"

    @property
    def rolling(self) -> bool:
        """Machines are being replaced (``rolling_reasons``)."""
        return bool(self.rolling_reasons)

    @property
    def rolling_reasons(self) -> list[str]:
        """What is still being replaced: the control plane's machines not all updated and ready, a
        Machine not Running, a MachineDeployment rolling out (``machine_deployment_rolling_out``)."""
        reasons = []
        cp = self.control_plane or {}
        replicas = cp.get("replicas")
        if cp and (cp.get("updatedReplicas") != replicas or cp.get("readyReplicas") != replicas):
            label = f"control plane {cp['name']}" if cp.get("name") else "control plane"
            reasons.append(
                f"{label}: {cp.get('updatedReplicas')} of {replicas} machines updated, {cp.get('readyReplicas')} ready"
            )
        reasons += [
            f"Machine {m.get('name')} is {m.get('phase') or 'not Running'}"
            for m in self.machines or []
            if m.get("phase") != "Running"
        ]
        reasons += [
            machine_deployment_progress(md)
            for md in self.machine_deployments or []
            if machine_deployment_rolling_out(md)
        ]
        return reasons


def machine_deployment_rolling_out(md: dict) -> bool:
    """Cluster API's rule (topology scope, MachineDeploymentState.IsRollingOut, over
    mdutil.DeploymentComplete): a MachineDeployment is rolling out until its controller has observed
    its latest spec and every desired replica is updated, available and ready, with no extra machine
    (status.replicas) and none unavailable. ``md`` as clusters.lifecycle records it."""
    replicas = md.get("replicas")
    complete = (
        md.get("updatedReplicas") == replicas
        and md.get("statusReplicas") == replicas
        and md.get("availableReplicas") == replicas
        and (md.get("observedGeneration") or 0) >= (md.get("generation") or 0)
    )
    return not complete or md.get("readyReplicas") != replicas or (md.get("unavailableReplicas") or 0) > 0


def machine_deployment_progress(md: dict) -> str:
    """Where a MachineDeployment's roll-out stands, in the terms of ``machine_deployment_rolling_out``."""
    replicas = md.get("replicas")
    parts = [
        f"{md.get('updatedReplicas')} of {replicas} updated",
        f"{md.get('availableReplicas')} available",
        f"{md.get('readyReplicas')} ready",
    ]
    if (md.get("observedGeneration") or 0) < (md.get("generation") or 0):
        parts.append("its latest spec not yet observed by its controller")
    if md.get("statusReplicas") != replicas:
        parts.append(f"{md.get('statusReplicas')} machines for {replicas} wanted")
    if md.get("unavailableReplicas"):
        parts.append(f"{md.get('unavailableReplicas')} unavailable")
    return f"MachineDeployment {md.get('name')}: {', '.join(parts)}"
