"""State changes of the drift app. Every one writes its audit event explicitly."""

from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster
from drift import selectors
from drift.choices import Severity
from drift.models import ComplianceSnapshot, VersionPolicy
from fedportal.audit import record_event
from fedportal.roles import Role, require_role

POLICY_FIELDS = (
    "host_member_max_minor_skew",
    "member_member_max_minor_skew",
    "kubelet_max_older_minors",
    "kubelet_max_older_minors_before_1_28",
    "auto_isolate_on_p0",
)


def update_version_policy(*, actor, **changes) -> VersionPolicy:
    """Change the fleet's version policy (admins only); audited with before and after."""
    require_role(actor, Role.ADMIN)
    unknown = set(changes) - set(POLICY_FIELDS)
    if unknown:
        raise ValueError(f"Not policy fields: {', '.join(sorted(unknown))}.")
    with transaction.atomic():
        policy = VersionPolicy.objects.select_for_update().filter(pk=1).first() or VersionPolicy(pk=1)
        before = policy.snapshot()
        for name, value in changes.items():
            setattr(policy, name, value)
        policy.full_clean()
        policy.as_skew_policy()  # raises ValueError on nonsense the field validators let through
        policy.updated_at = timezone.now()
        policy.updated_by = actor if getattr(actor, "pk", None) else None
        policy.save()
        after = policy.snapshot()
        changed = sorted(k for k in after if after[k] != before[k])
        record_event(
            "drift.policy.update",
            actor=actor,
            obj=policy,
            summary=f"version policy changed: {', '.join(changed) or 'nothing'}",
            before=before,
            after=after,
        )
    return policy


# --- compliance snapshots -------------------------------------------------------------------------


def take_compliance_snapshot(*, at=None, actor=None):
    """Record the fleet's compliance now (the daily beat job, or an admin's "Snapshot now", which is
    audited); returns the ComplianceSnapshot."""
    if actor is not None:
        require_role(actor, Role.ADMIN)
    report, skew_counts = selectors.fleet_compliance()
    snapshot = ComplianceSnapshot.objects.create(
        taken_at=at or timezone.now(),
        clusters_total=report.total,
        clusters_compliant=report.compliant,
        open_drift=report.open_drift,
        findings_p0=skew_counts.get("P0", 0),
        findings_p1=skew_counts.get("P1", 0),
        findings_p2=skew_counts.get("P2", 0),
        findings_p3=skew_counts.get("P3", 0),
        incompatible_cells=report.incompatible_cells,
        isolated_clusters=report.isolated,
        details={"score": report.score, "rule_failures": report.rule_failures()},
    )
    if actor is not None:
        record_event(
            "drift.compliance_snapshot",
            actor=actor,
            obj=snapshot,
            summary=f"Took a compliance snapshot: {snapshot.clusters_compliant}/{snapshot.clusters_total} clusters compliant",
        )
    return snapshot


# --- isolation (seed 000, 1.4 "isolate") ----------------------------------------------------------


class IsolationError(ValueError):
    """An isolation request that cannot be carried out; the message says why."""


def isolate_cluster(cluster, *, actor=None, reason: str, automatic: bool = False):
    """Take a cluster out of placement, scheduling and propagation until restored. Audited.

    Compare-and-set on ``isolated`` so two requests (or the auto-isolation job and a person)
    never both record it.
    """
    if actor is not None or not automatic:  # only the system (no actor) isolates automatically
        require_role(actor, Role.ADMIN)
    reason = (reason or "").strip()
    if not reason:
        raise IsolationError("Say why the cluster is isolated (the reason is shown in its banner).")
    if len(reason) > 1000:
        raise IsolationError("Keep the reason under 1,000 characters.")
    if cluster.is_host:
        raise IsolationError("The host cluster cannot be isolated: it runs the federation control plane.")
    now = timezone.now()
    with transaction.atomic():
        updated = Cluster.objects.filter(pk=cluster.pk, isolated=False).update(
            isolated=True, isolated_reason=reason, isolated_at=now
        )
        if not updated:
            raise IsolationError(f"{cluster.name} is already isolated.")
        record_event(
            "cluster.isolate",
            actor=actor,
            obj=cluster,
            cluster=cluster.name,
            summary=f"{'Automatically isolated' if automatic else 'Isolated'} {cluster.name}: {reason}",
            before={"isolated": False},
            after={"isolated": True, "reason": reason, "automatic": automatic},
        )
    cluster.isolated, cluster.isolated_reason, cluster.isolated_at = True, reason, now
    return cluster


def restore_cluster(cluster, *, actor, note: str = ""):
    """Put an isolated cluster back into placement and propagation (explicitly, by an admin). Audited."""
    require_role(actor, Role.ADMIN)
    with transaction.atomic():
        previous = Cluster.objects.filter(pk=cluster.pk).values_list("isolated_reason", flat=True).first()
        updated = Cluster.objects.filter(pk=cluster.pk, isolated=True).update(
            isolated=False, isolated_reason="", isolated_at=None
        )
        if not updated:
            raise IsolationError(f"{cluster.name} is not isolated.")
        record_event(
            "cluster.restore",
            actor=actor,
            obj=cluster,
            cluster=cluster.name,
            summary=f"Restored {cluster.name} to placement and propagation" + (f": {note}" if note else ""),
            before={"isolated": True, "reason": previous},
            after={"isolated": False, "note": note},
        )
    cluster.isolated, cluster.isolated_reason, cluster.isolated_at = False, "", None
    return cluster


def enforce_version_policy() -> list[str]:
    """When the policy's auto-isolate option is on, isolate every member the policy marks P0.

    Returns the names isolated now. Members already isolated are left alone; nothing is ever
    restored automatically (restoring is an explicit, audited decision).
    """
    policy = VersionPolicy.load()
    if not policy.auto_isolate_on_p0:
        return []
    overview = selectors.skew_overview()
    # every member in a P0 pair, also one the host is too old for (the host is the one to fix it,
    # but propagating to that member is what fails meanwhile)
    worst = overview.report.worst_by_cluster
    blocking = [
        row.name for row in overview.member_rows if worst.get(row.name) == Severity.P0 and not row.cluster.isolated
    ]
    isolated = []
    for cluster in Cluster.objects.filter(name__in=blocking, isolated=False):
        messages = [f.message for f in overview.report.findings_for(cluster.name) if f.severity == Severity.P0]
        try:
            isolate_cluster(
                cluster,
                reason="Version policy P0 (auto-isolate on): " + (messages[0] if messages else "blocking skew"),
                automatic=True,
            )
        except IsolationError:
            continue  # isolated concurrently
        isolated.append(cluster.name)
    return isolated
