"""Read side of the drift app: build the engines' plain inputs with a fixed number of queries,
and cache the heavy results keyed on a hash of those inputs (recomputed only when they change)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import quote

from django.core.cache import cache
from django.db.models import Count, Max, OuterRef, Q, Subquery
from django.urls import reverse
from django.utils import timezone

from clusters.choices import ClusterRole, ClusterState
from clusters.labels import filter_labels
from clusters.models import Cluster, VersionSample
from clusters.versions import minor_of
from drift import charts, compat
from drift.choices import CompatProblemCode, CompatStatus
from drift.compliance import FleetCompliance, evaluate_cluster
from drift.models import ComplianceSnapshot, VersionPolicy
from drift.skew import (
    ClusterVersion,
    KubeletSkew,
    MinorMatrix,
    PairVerdict,
    SkewFinding,
    SkewPolicy,
    SkewReport,
    evaluate_fleet,
    evaluate_kubelets,
    evaluate_pair,
    minor_matrix,
    parse_version,
    worst,
)
from drift.upgrade import plan_upgrade
from federation.choices import PropagationReason, SyncState
from federation.models import FederatedResource, PropagatedVersion
from federation.overrides import OverrideError, operations_for
from federation.placement import ClusterRef, PlacementError, normalize_placement, select_clusters
from federation.rendering import render_manifest
from fedportal.masking import is_secret_kind, mask_secrets, scrub_message, secret_values

CACHE_SECONDS = 24 * 3600
CACHE_VERSION = "drift-1"
GRID_MAX_CLUSTERS = 40  # the clickable HTML grid (works without JavaScript) up to this size

_ROW_FIELDS = ("pk", "name", "role", "server_version", "kubelet_versions", "labels", "state", "isolated", "served_apis")


@dataclass(frozen=True)
class ClusterRow:
    pk: int
    name: str
    role: str
    server_version: str
    kubelet_versions: dict
    labels: dict
    state: str
    isolated: bool
    served_apis: list = field(default_factory=list)  # group-versions from discovery ([]: not read yet)

    @property
    def is_host(self) -> bool:
        return self.role == ClusterRole.HOST

    @property
    def version_label(self) -> str:
        parsed = parse_version(self.server_version)
        return parsed.label if parsed else "unknown"

    @functools.cached_property
    def compat_group(self) -> tuple:
        """What a compatibility result depends on besides the manifest: the minor (the version
        itself when it cannot be read, as the result names it) and the served group-versions."""
        minor = minor_of(self.server_version)
        return (minor if minor is not None else self.server_version, tuple(self.served_apis or ()))

    def as_input(self) -> ClusterVersion:
        kubelets = self.kubelet_versions if isinstance(self.kubelet_versions, dict) else {}
        return ClusterVersion(self.name, self.role, self.server_version or "", kubelets)


def _filtered_clusters(labels) -> Cluster.objects:
    """Members matching every label term, plus the host(s) always (they anchor the policy)."""
    queryset = Cluster.objects.all()
    if labels:
        members = filter_labels(Cluster.objects.all(), labels)
        queryset = Cluster.objects.filter(Q(role=ClusterRole.HOST) | Q(pk__in=members.values("pk")))
    return queryset


def fleet_rows(*, labels=()) -> list[ClusterRow]:
    """One query: every (filtered) cluster's version inputs, ordered by name."""
    values = _filtered_clusters(labels).order_by("name").values_list(*_ROW_FIELDS)
    return [ClusterRow(*row) for row in values]


def inputs_hash(rows: list[ClusterRow], policy: SkewPolicy, *extra) -> str:
    payload = {
        "v": CACHE_VERSION,
        "clusters": [[r.name, r.role, r.server_version, r.kubelet_versions, r.served_apis] for r in rows],
        "policy": policy.as_dict(),
        "extra": list(extra),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _cached(key: str, compute):
    value = cache.get(key)
    if value is None:
        value = compute()
        cache.set(key, value, CACHE_SECONDS)
    return value


@dataclass
class MemberRow:
    """One line of the host-vs-member table (and of the CSV export)."""

    cluster: ClusterRow
    host: str
    host_version: str
    difference: int | None  # host minor - this cluster's minor
    severity: str | None
    findings: list[SkewFinding]
    kubelets: KubeletSkew

    @property
    def name(self) -> str:
        return self.cluster.name

    @property
    def rules(self) -> str:
        return "; ".join(sorted({str(f.rule) for f in self.findings}))

    @property
    def messages(self) -> str:
        """The CSV's findings, as the page's details list them: severity, message, who has to act."""
        return " | ".join(
            f"{f.severity}: {f.message}"
            + ("" if self.name in f.accountable else f" (for {', '.join(f.accountable)} to fix)")
            for f in self.findings
        )

    @property
    def finding_severities(self) -> set[str]:
        """The severities of every finding on the row, those charged to the host included."""
        return {str(f.severity) for f in self.findings}

    @property
    def labels_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted((self.cluster.labels or {}).items()))


@dataclass
class SkewOverview:
    policy: VersionPolicy
    rows: list[ClusterRow]
    report: SkewReport
    heatmap: dict
    grid: object | None  # MinorMatrix when small enough for the HTML grid
    inputs_hash: str
    member_rows: list[MemberRow] = field(default_factory=list)

    @property
    def hosts(self) -> list[ClusterRow]:
        return [r for r in self.rows if r.is_host]

    def grid_rows(self) -> list[tuple[str, str, list[tuple[str, int | None, str | None]]]]:
        """The HTML grid: (row name, row version, [(column name, difference, severity), ...])."""
        if self.grid is None:
            return []
        g = self.grid
        return [
            (g.names[i], g.versions[i], [(g.names[j], g.cells[i][j], g.severities[i][j]) for j in range(len(g.names))])
            for i in range(len(g.names))
        ]

    @property
    def fleet_findings(self) -> list[SkewFinding]:
        """Findings that are not about one member against the host (peer skew, unknown versions)."""
        return [f for f in self.report.findings if f.rule not in ("host_member_skew", "host_older_than_member")]


def version_pair_severities(rows, inputs, policy: SkewPolicy) -> dict[tuple[str, str], str | None]:
    """For the versions × versions heatmap of a big fleet: the worst severity between any cluster
    on one version and any other cluster on the other, from one stand-in per (version, role)."""
    stand_ins: dict[tuple[str, bool], ClusterVersion] = {}
    for row, cluster in zip(rows, inputs):
        key = (row.version_label, cluster.is_host)
        stand_ins.setdefault(key, ClusterVersion(f"{key[0]}/{cluster.role}", cluster.role, cluster.git_version))
    keys = list(stand_ins)
    small = minor_matrix(list(stand_ins.values()), policy)
    result: dict[tuple[str, str], str | None] = {}
    for i, (label_a, _) in enumerate(keys):
        for j, (label_b, _) in enumerate(keys):
            if i != j:
                result[(label_a, label_b)] = worst([result.get((label_a, label_b)), small.severities[i][j]])
    return result


def compute_skew(rows: list[ClusterRow], policy: SkewPolicy) -> tuple:
    inputs = [r.as_input() for r in rows]
    report = evaluate_fleet(inputs, policy)
    if len(inputs) <= charts.MAX_HEATMAP_CLUSTERS:
        matrix = minor_matrix(inputs, policy)
        heatmap = charts.skew_heatmap(matrix)
    else:
        # past the heatmap's size only the versions matter (charts collapses to versions × versions)
        matrix = MinorMatrix([r.name for r in rows], [r.version_label for r in rows], [], [])
        heatmap = charts.skew_heatmap(matrix, version_severities=version_pair_severities(rows, inputs, policy))
    grid = minor_matrix(inputs, policy) if len(inputs) <= GRID_MAX_CLUSTERS else None
    return report, heatmap, grid


def skew_overview(*, labels=()) -> SkewOverview:
    """Findings, heatmap and per-member rows for the (filtered) fleet: two queries, cached compute."""
    policy_row = VersionPolicy.load()
    policy = policy_row.as_skew_policy()
    rows = fleet_rows(labels=labels)
    digest = inputs_hash(rows, policy)
    report, heatmap, grid = _cached(f"drift:skew:{digest}", lambda: compute_skew(rows, policy))
    overview = SkewOverview(policy_row, rows, report, heatmap, grid, digest)
    hosts = overview.hosts
    host = hosts[0] if hosts else None
    host_version = parse_version(host.server_version) if host else None
    for row in rows:
        if row.is_host:
            continue
        version = parse_version(row.server_version)
        difference = host_version.minor - version.minor if host_version and version else None
        findings = report.findings_for(row.name)
        overview.member_rows.append(
            MemberRow(
                cluster=row,
                host=host.name if host else "",
                host_version=host.version_label if host else "",
                difference=difference,
                # the compliance report's rule: a cluster is rated by the findings it has to act on;
                # a host-older finding is listed on the member's row but charged to the host
                severity=report.worst_accountable_by_cluster.get(row.name),
                findings=findings,
                kubelets=report.kubelets[row.name],
            )
        )
    return overview


def filter_member_rows(rows: list[MemberRow], severity: str) -> list[MemberRow]:
    """The rows a severity filter lists: "ok", the members with nothing to act on (their rating,
    ``MemberRow.severity``, is none); a severity, the members with a finding of it, whoever has to
    act on it. A host-side finding (the host older than a member) is listed only on its member's
    row, so it is found under its severity there: every finding the page's counts include that names
    a member is on a row under its severity (the others, about the host alone, are fleet findings)."""
    if not severity:
        return rows
    if severity == "ok":
        return [r for r in rows if r.severity is None]
    return [r for r in rows if severity in r.finding_severities]


@dataclass
class PairDetail:
    a: ClusterRow
    b: ClusterRow
    verdict: PairVerdict
    kubelets_a: KubeletSkew
    kubelets_b: KubeletSkew
    policy: VersionPolicy


def skew_pair(a_name: str, b_name: str) -> PairDetail | None:
    """What the policy says about clusters a × b (two queries); None when either does not exist."""
    policy_row = VersionPolicy.load()
    policy = policy_row.as_skew_policy()
    found = {
        row[1]: ClusterRow(*row) for row in Cluster.objects.filter(name__in=[a_name, b_name]).values_list(*_ROW_FIELDS)
    }
    if a_name not in found or b_name not in found:
        return None
    a, b = found[a_name], found[b_name]
    return PairDetail(
        a,
        b,
        evaluate_pair(a.as_input(), b.as_input(), policy),
        evaluate_kubelets(a.as_input(), policy),
        evaluate_kubelets(b.as_input(), policy),
        policy_row,
    )


# --- version history ----------------------------------------------------------------------------


def _baseline(since: datetime):
    return Subquery(
        VersionSample.objects.filter(cluster=OuterRef("pk"), sampled_at__lte=since)
        .order_by("-sampled_at", "-id")
        .values("git_version")[:1]
    )


def _samples(cluster_ids_query, since: datetime) -> list[tuple[str, datetime, str]]:
    return list(
        VersionSample.objects.filter(cluster__in=cluster_ids_query, sampled_at__gt=since)
        .order_by("sampled_at", "id")
        .values_list("cluster__name", "sampled_at", "git_version")
    )


def _series(baselines, samples, since) -> dict[str, list[tuple[datetime, str]]]:
    series: dict[str, list[tuple[datetime, str]]] = {name: [] for name, _ in baselines}
    for name, base in baselines:
        if base:
            series[name].append((since, base))
    for name, at, git_version in samples:
        series.setdefault(name, []).append((at, git_version))
    return {name: points for name, points in series.items() if points}


def history_clusters(*, labels=(), since: datetime):
    """The (filtered) clusters with their version at ``since``, for pagination."""
    return _filtered_clusters(labels).order_by("name").annotate(baseline=_baseline(since))


def timeline_figure(clusters_on_page, *, since: datetime, now: datetime) -> dict:
    """Per-cluster version timeline for one page of clusters (one query for their samples)."""
    baselines = [(c.name, c.baseline) for c in clusters_on_page]
    samples = _samples([c.pk for c in clusters_on_page], since)
    return charts.version_timeline(_series(baselines, samples, since), until=now)


def distribution_figure(*, labels=(), since: datetime, now: datetime, points: int = 30) -> dict:
    """Fleet version distribution over the window; cached until a new sample arrives (3 queries)."""
    stats = VersionSample.objects.aggregate(last=Max("id"), count=Count("id"))
    bucket = now.replace(minute=0, second=0, microsecond=0)
    key = (
        "drift:dist:"
        + hashlib.sha256(
            json.dumps(
                [CACHE_VERSION, labels, since.isoformat()[:13], stats, bucket.isoformat(), points], default=str
            ).encode()
        ).hexdigest()
    )

    def compute():
        clusters = _filtered_clusters(labels)
        baselines = list(clusters.annotate(baseline=_baseline(since)).values_list("name", "baseline"))
        samples = _samples(clusters.values("pk"), since)
        series = _series(baselines, samples, since)
        step = (now - since) / max(points - 1, 1)
        times = [since + step * i for i in range(points)]
        return charts.version_distribution(charts.distribution_over_time(series, times))

    return _cached(key, compute)


def history_window(days: int, now: datetime | None = None) -> tuple[datetime, datetime]:
    now = now or timezone.now()
    return now - timedelta(days=days), now


# --- API compatibility of federated resources ---------------------------------------------------


@dataclass
class CompatCell:
    """One resource on one cluster. ``result`` is None when the cluster is not a target."""

    resource_id: int
    cluster: str
    targeted: bool
    result: object | None = None  # drift.compat.CompatResult
    manifest: dict | None = None
    overridden: bool = False

    @property
    def status(self) -> str:
        return str(self.result.status) if self.result is not None else "untargeted"

    @property
    def url(self) -> str:
        """The cell's detail URL (a page shows 750 cells: one reverse() per page, not per cell)."""
        prefix, suffix = _compat_cell_url_parts()
        return f"{prefix}{self.resource_id}/{quote(self.cluster, safe='')}{suffix}"


@functools.cache
def _compat_cell_url_parts() -> tuple[str, str]:
    sample = reverse("drift:compat_cell", args=[987654321, "cluster-name"])
    prefix, rest = sample.split("987654321/", 1)
    return prefix, rest.split("cluster-name", 1)[1]


def _resource_queryset():
    return FederatedResource.objects.select_related("type", "current_revision").order_by(
        "type__kind", "namespace", "name", "pk"
    )


def compat_resources(*, kind: str = "", namespace: str = ""):
    queryset = _resource_queryset()
    if kind:
        queryset = queryset.filter(type__kind=kind)
    if namespace:
        queryset = queryset.filter(namespace=namespace)
    return queryset


def _target_names(revision, rows: list[ClusterRow], memo: dict | None = None) -> set[str]:
    """The names ``revision``'s placement selects among ``rows``; ``memo`` (one per list of rows)
    keeps them by placement, which most resources share (1,000 selector matches once, not 200 times)."""
    key = json.dumps(revision.placement or {}, sort_keys=True, default=str) if memo is not None else None
    if key in (memo or {}):
        return memo[key]
    try:
        placement = normalize_placement(revision.placement or {})
    except PlacementError:
        names = set()
    else:
        names = set(select_clusters(placement, [ClusterRef(r.name, r.labels or {}) for r in rows]))
    if memo is not None:
        memo[key] = names
    return names


def compat_row(resource, rows: list[ClusterRow], *, revision=None, targets_memo=None) -> dict[str, CompatCell]:
    """Cells of one federated resource over ``rows``: rendered once, plus once per cluster with overrides.

    ``revision`` defaults to the resource's current revision (a change request passes its proposal).
    The manifest is rendered as propagation renders it (template, identity, the cluster's
    overrides; replicas from scheduling do not change validity and are left out), then checked
    against each target's version and served APIs through drift.compat's (content hash, minor,
    served) cache. ``targets_memo``: see ``_target_names``.
    """
    return {
        row.name: CompatCell(resource.pk, row.name, targeted, result, manifest, overridden)
        for row, targeted, result, manifest, overridden in _compat_results(resource, rows, revision, targets_memo)
    }


def _compat_results(resource, rows: list[ClusterRow], revision=None, targets_memo=None):
    """(row, targeted, result, manifest, overridden) per row, for ``compat_row``. Clusters without
    overrides share one result per ``ClusterRow.compat_group`` (a fleet of 1,000 runs a handful):
    checking every cell on its own was most of the cold compliance report's 3 s."""
    revision = revision or resource.current_revision
    if revision is None:
        for row in rows:
            yield row, False, None, None, False
        return
    targets = _target_names(revision, rows, targets_memo)
    overrides = revision.overrides or []
    common = {
        "target": resource.type.target,
        "template": revision.template or {},
        "namespace": resource.namespace,
        "name": resource.name,
    }
    base = None  # (manifest, digest), or the error rendering it raised
    by_group: dict[tuple, tuple] = {}  # compat_group -> (result, manifest, overridden) without overrides
    for row in rows:
        if row.name not in targets:
            yield row, False, None, None, False
            continue
        ops = operations_for(overrides, row.name) if overrides else []
        if ops:
            try:
                rendered = (render_manifest(cluster=row.name, overrides=overrides, **common), None)
            except (OverrideError, ValueError, TypeError) as exc:
                rendered = exc
            yield row, True, *_compat_check(row, rendered, overridden=True)
            continue
        shared = by_group.get(row.compat_group)
        if shared is None:
            if base is None:
                try:
                    manifest = render_manifest(cluster=row.name, overrides=[], **common)
                    base = (manifest, compat.content_hash(manifest))
                except (OverrideError, ValueError, TypeError) as exc:
                    base = exc
            shared = by_group[row.compat_group] = _compat_check(row, base, overridden=False)
        yield row, True, *shared


def _compat_check(row: ClusterRow, rendered, *, overridden: bool) -> tuple:
    """(result, manifest, overridden) for a rendered ``(manifest, digest or None)`` or the error
    rendering it raised."""
    if isinstance(rendered, Exception):
        result = compat.CompatResult(
            CompatStatus.INCOMPATIBLE,
            minor_of(row.server_version),
            (compat.CompatProblem(CompatProblemCode.INVALID, "", f"The overrides do not apply: {rendered}"),),
        )
        return result, None, True
    manifest, digest = rendered
    return (
        compat.check_manifest(manifest, row.server_version, digest=digest, served=row.served_apis),
        manifest,
        overridden,
    )


def compat_grid(resources, rows: list[ClusterRow]) -> list[tuple[object, list[CompatCell]]]:
    """[(resource, [cell per row]), ...] for one page of resources × one page of clusters."""
    out, targets_memo = [], {}
    for resource in resources:
        cells = compat_row(resource, rows, targets_memo=targets_memo)
        out.append((resource, [cells[r.name] for r in rows]))
    return out


def compat_cell(resource_id: int, cluster_name: str):
    """(resource, cluster row, cell) for the drill-down page, or None when either is missing."""
    resource = _resource_queryset().filter(pk=resource_id).first()
    row = Cluster.objects.filter(name=cluster_name).values_list(*_ROW_FIELDS).first()
    if resource is None or row is None:
        return None
    cluster = ClusterRow(*row)
    # Placement may use labels of every cluster only through the selector, which needs just this one.
    cell = compat_row(resource, [cluster])[cluster.name]
    return resource, cluster, cell


def host_row() -> ClusterRow | None:
    row = Cluster.objects.filter(role=ClusterRole.HOST).values_list(*_ROW_FIELDS).first()
    return ClusterRow(*row) if row else None


def repair_plan(row: ClusterRow, key: str, manifest: dict, result):
    """Upgrade guidance for one incompatible cell: up to the version that accepts every field, or
    the host's version when that is newer (the host anchors the skew policy); None when neither is
    known. Raises drift.upgrade.UpgradePathError for an impossible path (downgrade)."""
    host = host_row()
    host_version = parse_version(host.server_version) if host else None
    candidates = []
    if result.min_version:
        candidates.append(minor_of(result.min_version))
    if host_version is not None:
        candidates.append(host_version.minor)
    own = parse_version(row.server_version)
    if not candidates or own is None:
        return None
    target = max(candidates + [own.minor])
    return plan_upgrade(
        row.as_input(),
        target,
        {key: manifest},
        host=host.as_input() if host else None,
        policy=VersionPolicy.load().as_skew_policy(),
    )


# --- compliance -----------------------------------------------------------------------------------


_PROPAGATION_FAILURES = frozenset(
    {
        PropagationReason.CREATION_FAILED,
        PropagationReason.UPDATE_FAILED,
        PropagationReason.DELETION_FAILED,
        PropagationReason.APPLY_OVERRIDES_FAILED,
        PropagationReason.ALREADY_EXISTS,
        PropagationReason.RETRIEVAL_FAILED,
        PropagationReason.VERSION_RETRIEVAL_FAILED,
        PropagationReason.NAMESPACE_NOT_FEDERATED,
        PropagationReason.FIELD_NOT_SUPPORTED,
    }
)


def _propagation_counts(rows: list[ClusterRow]) -> dict[str, dict[str, int]]:
    """{cluster name: {failed, out_of_sync, in_sync, other}} of ``rows`` in one aggregate query: a
    handful of (cluster, status, sync state) groups per cluster, read from the covering index
    federation_pv_cluster_idx (no join, no table rows), partitioned here. InSync on a cluster that is
    not Ready counts as other (federation.health.shown_sync_state: nobody can see it)."""
    names = {r.pk: r.name for r in rows}
    unseen = {r.pk for r in rows if r.state != ClusterState.READY}
    out = {}
    groups = (
        PropagatedVersion.objects.values_list("cluster_id", "status", "sync_state").annotate(n=Count("*")).order_by()
    )
    for cluster_id, status, sync_state, n in groups:
        name = names.get(cluster_id)
        if name is None:
            continue
        counts = out.setdefault(name, {"failed": 0, "out_of_sync": 0, "in_sync": 0, "other": 0})
        if status in _PROPAGATION_FAILURES:
            counts["failed"] += n
        elif sync_state == SyncState.OUT_OF_SYNC:
            counts["out_of_sync"] += n
        elif sync_state == SyncState.IN_SYNC and cluster_id not in unseen:
            counts["in_sync"] += n
        else:
            counts["other"] += n
    return out


def compat_counts_by_cluster(rows: list[ClusterRow], resources) -> dict[str, dict[str, int]]:
    """{cluster: {compatible, incompatible, unverifiable}} over every federated resource targeting it.

    A resource without overrides has one result per ``ClusterRow.compat_group`` among the clusters
    its placement selects, so it is checked on one cluster of each group and tallied by (placement,
    group); the tallies are spread over the clusters at the end. 200 resources x 1,000 clusters cost
    200 x a handful of checks, not 200,000 cells (150 ms of the cold report's CPU)."""
    statuses = ("compatible", "incompatible", "unverifiable")
    counts = {r.name: dict.fromkeys(statuses, 0) for r in rows}
    targets_memo: dict = {}
    placements: dict[int, tuple[set, list[ClusterRow]]] = {}  # id(targets) -> (targets, one row per group)
    tally: dict[tuple, int] = {}  # (id(targets), compat_group, status) -> resources
    for resource in resources:
        revision = resource.current_revision
        if revision is None:
            continue
        if revision.overrides:
            for row, targeted, result, _, _ in _compat_results(resource, rows, targets_memo=targets_memo):
                if targeted:
                    counts[row.name][str(result.status)] += 1
            continue
        targets = _target_names(revision, rows, targets_memo)
        if id(targets) not in placements:
            groups = {}
            for row in rows:
                if row.name in targets:
                    groups.setdefault(row.compat_group, row)
            placements[id(targets)] = (targets, list(groups.values()))
        for row, _, result, _, _ in _compat_results(resource, placements[id(targets)][1], targets_memo=targets_memo):
            key = (id(targets), row.compat_group, str(result.status))
            tally[key] = tally.get(key, 0) + 1
    for key, (targets, _) in placements.items():
        for row in rows:
            if row.name in targets:
                for status in statuses:
                    counts[row.name][status] += tally.get((key, row.compat_group, status), 0)
    return counts


def fleet_compliance(*, labels=()):
    """The fleet compliance report (drift.compliance.FleetCompliance) with a fixed number of queries;
    the compute is cached keyed on every input (versions, labels, policy, revisions, propagation)."""
    policy = VersionPolicy.load().as_skew_policy()
    rows = fleet_rows(labels=labels)
    # the type decides the apiVersion a manifest is rendered with (an admin may edit it)
    revisions = list(
        _resource_queryset().values_list(
            "pk", "current_revision__content_hash", "type__group", "type__version", "type__kind", "type__scope"
        )
    )
    propagation = _propagation_counts(rows)
    digest = inputs_hash(
        rows, policy, "compliance", [[r.name, r.labels, r.isolated] for r in rows], revisions, propagation
    )

    def compute():
        skew = evaluate_fleet([r.as_input() for r in rows], policy)
        compat_counts = compat_counts_by_cluster(rows, _resource_queryset().iterator(chunk_size=200))
        empty = {"failed": 0, "out_of_sync": 0, "in_sync": 0, "other": 0}
        clusters = []
        for row in rows:
            findings = skew.findings_accountable(row.name)
            clusters.append(
                evaluate_cluster(
                    name=row.name,
                    role=row.role,
                    version=row.server_version,
                    isolated=row.isolated,
                    skew_severity=skew.worst_accountable_by_cluster.get(row.name),
                    skew_messages=[f.message for f in findings],
                    compat=compat_counts[row.name],
                    propagation=propagation.get(row.name, empty),
                )
            )
        return FleetCompliance(clusters), skew.counts

    report, skew_counts = _cached(f"drift:compliance:{digest}", compute)
    return report, skew_counts


def compliance_trend_figure(*, days: int = 90) -> dict:
    """Compliant share and open drift over time from ComplianceSnapshot rows (one query)."""
    since = timezone.now() - timedelta(days=days)
    points = [
        (at, (compliant / total) if total else 1.0, drift)
        for at, compliant, total, drift in ComplianceSnapshot.objects.filter(taken_at__gte=since)
        .order_by("taken_at")
        .values_list("taken_at", "clusters_compliant", "clusters_total", "open_drift")[:2000]
    ]
    return charts.compliance_trend(points)


def isolated_clusters(limit: int = 5) -> dict:
    """{"count": n, "clusters": [(name, reason), ...first ``limit``]} in one query."""
    names = list(
        Cluster.objects.filter(isolated=True).order_by("name").values_list("name", "isolated_reason")[: limit + 1]
    )
    count = len(names)
    if count > limit:
        count = Cluster.objects.filter(isolated=True).count()
    return {"count": count, "clusters": names[:limit]}


def mask_compat_cell(resource, cell):
    """``cell`` with Secret values masked in its manifest and in its problems' messages and fixes:
    what the cell page, the matrix's CSV export and the API's /drift/compatibility show."""
    if not cell.targeted or not is_secret_kind(resource.type.kind):
        return cell
    # the overrides did not apply (no manifest): their error may quote the document it walked
    revision = resource.current_revision
    source = cell.manifest or ({"template": revision.template, "overrides": revision.overrides} if revision else {})
    known = secret_values(source, secret=True)
    result = cell.result
    if result is not None:
        result = dataclasses.replace(
            result,
            problems=tuple(
                dataclasses.replace(
                    p, message=scrub_message(p.message, source), fix=mask_secrets(p.fix, secret=True, known=known)
                )
                for p in result.problems
            ),
        )
    return dataclasses.replace(cell, manifest=mask_secrets(cell.manifest, secret=True, known=known), result=result)
