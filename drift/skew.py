"""The version-skew policy, evaluated over plain inputs (no ORM, no HTTP).

Rules (defaults from Kubernetes' version-skew policy and the seed 000, section 1.5: "the control
plane is not older than any member, and at most one minor apart"):

* the host (control plane) is not older than any member;
* host–member skew is at most ``host_member_max_minor_skew`` minors (default 1);
* member–member skew is at most ``member_member_max_minor_skew`` minors (default 2);
* a kubelet is never newer than its apiserver and at most ``kubelet_max_older_minors`` minors older
  (3 since Kubernetes 1.28; ``kubelet_max_older_minors_before_1_28`` = 2 for older apiservers).

Severity mapping (seed 000, section 1.3.2, the version-drift impact matrix)::

    rule                           severity  matrix row it follows
    host_member_skew               P0        资源同步失败 "resource sync fails": the host renders
      (member older than host by            templates for its own version; a v1.27 member rejects
       more than the allowed skew)          v1.28 fields (the row's own example, and the v1.28 vs
                                            v1.25 incident in the same section) -> blocking.
    host_member_skew               P0        same row, other direction: the host is older than the
      (member newer than host by            member by more than the allowed skew; section 1.2's
       more than the allowed skew)          tip says the sync controller then fails to (de)serialise.
    host_older_than_member         P1        状态回写异常 "status write-back fails": an older host
      (within the allowed skew)             cannot parse the newer member's status structures.
    kubelet_newer_than_apiserver   P1        调度策略失效 "scheduling decisions go wrong": node and
    kubelet_too_old                P1        resource metrics come in formats the apiserver (and so
                                            the scheduler reading them) does not understand.
    member_member_skew             P2        DNS 记录冲突 "DNS records conflict": members far apart
                                            generate cross-cluster records (service discovery) in
                                            incompatible formats; members are each still checked
                                            against the host, so sync itself is not blocked.
    version_unknown                P3        审计与合规风险 "audit and compliance risk": a version we
    kubelet_version_unknown        P3        cannot read cannot be traced or checked; we say so
                                            rather than guess (and never crash).

A version is parsed (clusters.versions.parse_version) from a gitVersion such as ``v1.27.3``,
``v1.27.3-eks-4f4795d`` or ``v1.28.2+k3s1``; anything else (empty, garbage, a major other than 1) is
"unknown".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property, lru_cache

from clusters.versions import KubeVersion, parse_version
from drift.choices import SEVERITY_ORDER, Severity, SkewRule

HOST = "host"
MEMBER = "member"


@dataclass(frozen=True)
class SkewPolicy:
    host_member_max_minor_skew: int = 1
    member_member_max_minor_skew: int = 2
    kubelet_max_older_minors: int = 3
    kubelet_max_older_minors_before_1_28: int = 2

    def __post_init__(self):
        for name, value in asdict(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value > 50:
                raise ValueError(f"{name} must be a whole number between 0 and 50, not {value!r}.")

    def kubelet_max_older(self, apiserver: KubeVersion) -> int:
        if (apiserver.major, apiserver.minor) < (1, 28):
            return self.kubelet_max_older_minors_before_1_28
        return self.kubelet_max_older_minors

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ClusterVersion:
    name: str
    role: str  # "host" or "member"
    git_version: str = ""
    kubelet_versions: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def version(self) -> KubeVersion | None:
        return parse_version(self.git_version)

    @property
    def is_host(self) -> bool:
        return self.role == HOST


@dataclass(frozen=True)
class SkewFinding:
    rule: str
    severity: str
    message: str
    clusters: tuple[str, ...]
    difference: int | None = None
    nodes: tuple[str, ...] = ()
    # Who has to act (upgrade): the member behind the host, or the host behind a member; empty
    # means every cluster named in ``clusters`` (peer skew, kubelets, unknown versions).
    responsible: tuple[str, ...] = ()

    @property
    def accountable(self) -> tuple[str, ...]:
        return self.responsible or self.clusters

    def as_dict(self) -> dict:
        return {
            "rule": str(self.rule),
            "responsible": list(self.accountable),
            "severity": str(self.severity),
            "message": self.message,
            "clusters": list(self.clusters),
            "difference": self.difference,
            "nodes": list(self.nodes),
        }


def worst(severities: Iterable[str | None]) -> str | None:
    """The most severe of the given severities (P0 worst), or None when there are none."""
    best = None
    for severity in severities:
        if severity is None:
            continue
        if best is None or SEVERITY_ORDER[severity] < SEVERITY_ORDER[best]:
            best = severity
    return best


def _names(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# --- pair rules -----------------------------------------------------------------------------


def _host_member_findings(host: ClusterVersion, member: ClusterVersion, policy: SkewPolicy) -> list[SkewFinding]:
    hv, mv = host.version, member.version
    if hv is None or mv is None:
        return []
    diff = hv.minor - mv.minor  # > 0: host newer
    pair = (host.name, member.name)
    allowed = policy.host_member_max_minor_skew
    if abs(diff) > allowed:
        if diff > 0:
            message = (
                f"Member {member.name} ({mv.label}) is {diff} minors behind host {host.name} ({hv.label}); "
                f"the policy allows {allowed}. Templates using {hv.label} fields will fail to apply."
            )
        else:
            message = (
                f"Host {host.name} ({hv.label}) is {-diff} minors behind member {member.name} ({mv.label}); "
                f"the policy allows {allowed} and the host must not be older than any member."
            )
        return [
            SkewFinding(
                SkewRule.HOST_MEMBER_SKEW,
                Severity.P0,
                message,
                pair,
                diff,
                responsible=(member.name,) if diff > 0 else (host.name,),
            )
        ]
    if diff < 0:
        message = (
            f"Host {host.name} ({hv.label}) is older than member {member.name} ({mv.label}); "
            "the host must not be older than any member (status write-back may fail)."
        )
        return [
            SkewFinding(SkewRule.HOST_OLDER_THAN_MEMBER, Severity.P1, message, pair, diff, responsible=(host.name,))
        ]
    return []


def _member_member_finding(
    older: list[str],
    newer: list[str],
    old: KubeVersion,
    new: KubeVersion,
    policy: SkewPolicy,
    host: ClusterVersion | None = None,
) -> SkewFinding | None:
    diff = new.minor - old.minor
    allowed = policy.member_member_max_minor_skew
    if diff <= allowed:
        return None
    message = (
        f"Members on {old.label} ({_names(older)}) and on {new.label} ({_names(newer)}) are {diff} minors "
        f"apart; the policy allows {allowed}."
    )
    # the older members answer for it: the seeds' repair upgrades the lower member (000 §1.4); a newer
    # member at the host's version meets the target already. Older members at the host's version cannot
    # go past it: the newer ones are ahead of the host, and the host (upgraded first) answers
    behind_host = host is None or host.version is None or old.minor < host.version.minor
    responsible = tuple(older) if behind_host else (host.name,)
    return SkewFinding(
        SkewRule.MEMBER_MEMBER_SKEW, Severity.P2, message, tuple(older) + tuple(newer), diff, responsible=responsible
    )


@dataclass(frozen=True)
class PairVerdict:
    a: ClusterVersion
    b: ClusterVersion
    difference: int | None  # a.minor - b.minor
    relation: str  # "host-member", "member-host", "peer"
    rule_text: str
    findings: tuple[SkewFinding, ...]

    @property
    def severity(self) -> str | None:
        return worst(f.severity for f in self.findings)

    @property
    def ok(self) -> bool:
        return not self.findings


def evaluate_pair(a: ClusterVersion, b: ClusterVersion, policy: SkewPolicy) -> PairVerdict:
    """What the policy says about one ordered pair of clusters (the matrix cell a × b)."""
    va, vb = a.version, b.version
    difference = None if va is None or vb is None else va.minor - vb.minor
    findings: list[SkewFinding] = []
    if a.is_host != b.is_host:
        host, member = (a, b) if a.is_host else (b, a)
        relation = "host-member" if a.is_host else "member-host"
        rule_text = (
            f"Host and member: the host must not be older than the member, and they may be at most "
            f"{policy.host_member_max_minor_skew} minor(s) apart."
        )
        findings = _host_member_findings(host, member, policy)
    else:
        relation = "peer"
        rule_text = (
            f"Two {'hosts' if a.is_host else 'members'}: at most {policy.member_member_max_minor_skew} minor(s) apart."
        )
        if difference is not None and a.name != b.name:
            old, new = sorted([(va, a.name), (vb, b.name)])
            finding = _member_member_finding([old[1]], [new[1]], old[0], new[0], policy)
            findings = [finding] if finding else []
    for cluster in (a, b) if a.name != b.name else (a,):
        if cluster.version is None:
            findings.append(_unknown_finding(cluster))
    return PairVerdict(a, b, difference, relation, rule_text, tuple(findings))


@lru_cache(maxsize=65536)
def _cell_severity(role_a: bool, minor_a: int, role_b: bool, minor_b: int, policy: SkewPolicy) -> str | None:
    a = ClusterVersion("a", HOST if role_a else MEMBER, f"v1.{minor_a}.0")
    b = ClusterVersion("b", HOST if role_b else MEMBER, f"v1.{minor_b}.0")
    return evaluate_pair(a, b, policy).severity


def _unknown_finding(cluster: ClusterVersion) -> SkewFinding:
    shown = cluster.git_version or "(none reported)"
    return SkewFinding(
        SkewRule.VERSION_UNKNOWN,
        Severity.P3,
        f"The version of {cluster.name} is unknown ({shown[:60]}); skew cannot be checked.",
        (cluster.name,),
    )


# --- kubelets -------------------------------------------------------------------------------


@dataclass(frozen=True)
class KubeletSkew:
    cluster: str
    apiserver: KubeVersion | None
    oldest: KubeVersion | None
    newest: KubeVersion | None
    max_older_allowed: int | None
    nodes: int
    unknown_nodes: int
    findings: tuple[SkewFinding, ...]

    @property
    def behind(self) -> int | None:
        if self.apiserver is None or self.oldest is None:
            return None
        return self.apiserver.minor - self.oldest.minor

    @property
    def ahead(self) -> int | None:
        if self.apiserver is None or self.newest is None:
            return None
        return self.newest.minor - self.apiserver.minor

    @property
    def severity(self) -> str | None:
        return worst(f.severity for f in self.findings)


def evaluate_kubelets(cluster: ClusterVersion, policy: SkewPolicy) -> KubeletSkew:
    api = cluster.version
    by_version: dict[KubeVersion | None, list[str]] = defaultdict(list)
    raw_unknown: list[str] = []
    kubelets = cluster.kubelet_versions if isinstance(cluster.kubelet_versions, Mapping) else {}
    for node, text in kubelets.items():
        version = parse_version(text)
        if version is None:
            raw_unknown.append(str(node))
        else:
            by_version[version].append(str(node))
    known = sorted(by_version)
    findings: list[SkewFinding] = []
    max_older = policy.kubelet_max_older(api) if api else None
    if api is not None:
        for version in known:
            nodes = tuple(sorted(by_version[version]))
            diff = api.minor - version.minor
            if diff < 0:
                findings.append(
                    SkewFinding(
                        SkewRule.KUBELET_NEWER,
                        Severity.P1,
                        f"{len(nodes)} node(s) in {cluster.name} ({_names(list(nodes), 3)}) run kubelet "
                        f"{version.label}, newer than the apiserver {api.label}.",
                        (cluster.name,),
                        diff,
                        nodes,
                    )
                )
            elif diff > max_older:
                findings.append(
                    SkewFinding(
                        SkewRule.KUBELET_TOO_OLD,
                        Severity.P1,
                        f"{len(nodes)} node(s) in {cluster.name} ({_names(list(nodes), 3)}) run kubelet "
                        f"{version.label}, {diff} minors behind the apiserver {api.label}; at most "
                        f"{max_older} allowed.",
                        (cluster.name,),
                        diff,
                        nodes,
                    )
                )
    if raw_unknown:
        nodes = tuple(sorted(raw_unknown))
        findings.append(
            SkewFinding(
                SkewRule.KUBELET_VERSION_UNKNOWN,
                Severity.P3,
                f"{len(nodes)} node(s) in {cluster.name} ({_names(list(nodes), 3)}) report a kubelet "
                "version that cannot be read.",
                (cluster.name,),
                None,
                nodes,
            )
        )
    return KubeletSkew(
        cluster=cluster.name,
        apiserver=api,
        oldest=known[0] if known else None,
        newest=known[-1] if known else None,
        max_older_allowed=max_older,
        nodes=len(kubelets),
        unknown_nodes=len(raw_unknown),
        findings=tuple(findings),
    )


# --- the fleet ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MinorMatrix:
    """``cells[i][j]`` = minor(names[i]) - minor(names[j]); None where either is unknown."""

    names: list[str]
    versions: list[str]  # "v1.27" or "unknown"
    cells: list[list[int | None]]
    severities: list[list[str | None]]


def minor_matrix(clusters: list[ClusterVersion], policy: SkewPolicy) -> MinorMatrix:
    parsed = [(c, c.version) for c in clusters]
    names = [c.name for c, _ in parsed]
    versions = [v.label if v else "unknown" for _, v in parsed]
    cells: list[list[int | None]] = []
    severities: list[list[str | None]] = []
    for ca, va in parsed:
        row, sev_row = [], []
        for cb, vb in parsed:
            if va is None or vb is None:
                row.append(None)
                sev_row.append(Severity.P3 if ca.name != cb.name or va is None else None)
                continue
            row.append(va.minor - vb.minor)
            sev_row.append(
                None if ca.name == cb.name else _cell_severity(ca.is_host, va.minor, cb.is_host, vb.minor, policy)
            )
        cells.append(row)
        severities.append(sev_row)
    return MinorMatrix(names, versions, cells, severities)


@dataclass(frozen=True)
class SkewReport:
    policy: SkewPolicy
    findings: tuple[SkewFinding, ...]
    kubelets: dict[str, KubeletSkew]
    worst_by_cluster: dict[str, str | None]
    host_member: list[PairVerdict]
    # like worst_by_cluster, counting only findings the cluster has to act on (SkewFinding.accountable)
    worst_accountable_by_cluster: dict[str, str | None] = field(default_factory=dict)

    def findings_accountable(self, name: str) -> list[SkewFinding]:
        return [f for f in self.findings_for(name) if name in f.accountable]

    @cached_property
    def _by_cluster(self) -> dict[str, list[SkewFinding]]:
        index: dict[str, list[SkewFinding]] = defaultdict(list)
        for finding in self.findings:
            for name in dict.fromkeys(finding.clusters):
                index[name].append(finding)
        return dict(index)

    def findings_for(self, name: str) -> list[SkewFinding]:
        return list(self._by_cluster.get(name, ()))

    @property
    def counts(self) -> dict[str, int]:
        counts = {s: 0 for s in Severity.values}
        for finding in self.findings:
            counts[str(finding.severity)] += 1
        return counts


def evaluate_fleet(clusters: Iterable[ClusterVersion], policy: SkewPolicy | None = None) -> SkewReport:
    """Every finding the policy defines for the fleet, sorted worst first.

    Host–member findings are per pair; member–member findings are grouped by pair of distinct
    minors (1,000 members on 7 minors give at most 21 findings, not half a million).
    """
    policy = policy or SkewPolicy()
    clusters = list(clusters)
    findings: list[SkewFinding] = []
    hosts = [c for c in clusters if c.is_host]
    members = [c for c in clusters if not c.is_host]
    host_member: list[PairVerdict] = []
    for cluster in clusters:
        if cluster.version is None:
            findings.append(_unknown_finding(cluster))
    for host in hosts:
        for member in members:
            verdict = evaluate_pair(host, member, policy)
            host_member.append(verdict)
            findings.extend(f for f in verdict.findings if f.rule != SkewRule.VERSION_UNKNOWN)
    for group in (members, hosts):
        fleet_host = hosts[0] if group is members and hosts else None
        by_minor: dict[KubeVersion, list[str]] = defaultdict(list)
        for cluster in group:
            if cluster.version is not None:
                v = cluster.version
                by_minor[KubeVersion(v.major, v.minor)].append(cluster.name)
        minors = sorted(by_minor)
        for i, old in enumerate(minors):
            for new in minors[i + 1 :]:
                finding = _member_member_finding(
                    sorted(by_minor[old]), sorted(by_minor[new]), old, new, policy, fleet_host
                )
                if finding:
                    findings.append(finding)
    kubelets = {c.name: evaluate_kubelets(c, policy) for c in clusters}
    for skew in kubelets.values():
        findings.extend(skew.findings)
    findings.sort(key=lambda f: (SEVERITY_ORDER[f.severity], str(f.rule), f.clusters))
    worst_by_cluster: dict[str, str | None] = {c.name: None for c in clusters}
    accountable: dict[str, str | None] = {c.name: None for c in clusters}
    for finding in findings:
        for name in finding.clusters:
            worst_by_cluster[name] = worst([worst_by_cluster.get(name), finding.severity])
        for name in finding.accountable:
            accountable[name] = worst([accountable.get(name), finding.severity])
    return SkewReport(policy, tuple(findings), kubelets, worst_by_cluster, host_member, accountable)
