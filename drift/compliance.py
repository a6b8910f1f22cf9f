"""Fleet compliance scoring: plain data in, per-cluster verdicts out (no ORM).

A cluster is compliant when none of these rules fails; its score starts at 100 and loses the
points of each failing rule (the worst skew finding only):

    rule              fails when                                             points
    version_policy    a skew finding of P0 / P1 / P2 / P3 the cluster has to  50 / 25 / 10 / 0
                      act on (a member behind the host, the host behind a
                      member; both sides of a member-member skew)
    api_compat        a federated resource targeting it is incompatible      up to 30 (share of targets)
    propagation       a propagated version reports a failure reason          up to 20 (share)
    resource_drift    a propagated object is OutOfSync                       up to 10 (share)
    isolation         the cluster is isolated (excluded from propagation)    10

P3 findings (an unknown version) and unverifiable compatibility are reported but do not fail
compliance: they are risks to look at, not violations. The overall score is the mean score.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from drift.choices import Severity

SKEW_POINTS = {Severity.P0: 50, Severity.P1: 25, Severity.P2: 10, Severity.P3: 0}
COMPAT_POINTS = 30
PROPAGATION_POINTS = 20
DRIFT_POINTS = 10
ISOLATION_POINTS = 10


@dataclass(frozen=True)
class RuleResult:
    rule: str
    ok: bool
    points_lost: float
    explanation: str


@dataclass
class ClusterCompliance:
    name: str
    role: str
    version: str
    isolated: bool
    skew_severity: str | None
    skew_messages: list[str]
    compat: dict[str, int]  # compatible / incompatible / unverifiable
    propagation: dict[str, int]  # in_sync / out_of_sync / failed / other
    rules: list[RuleResult] = field(default_factory=list)

    @property
    def score(self) -> int:
        return max(0, round(100 - sum(r.points_lost for r in self.rules)))

    @property
    def compliant(self) -> bool:
        return all(r.ok for r in self.rules)

    @property
    def failed_rules(self) -> list[str]:
        return [r.rule for r in self.rules if not r.ok]

    @property
    def failed_rules_text(self) -> str:
        return ", ".join(self.failed_rules)

    @property
    def explanations(self) -> str:
        return " | ".join(f"{r.rule}: {r.explanation}" for r in self.rules if not r.ok)

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "role": self.role,
            "version": self.version,
            "isolated": self.isolated,
            "score": self.score,
            "compliant": self.compliant,
            "version_policy": self.skew_severity,
            "skew_findings": self.skew_messages,
            "compat": self.compat,
            "propagation": self.propagation,
            "rules": [
                {"rule": r.rule, "ok": r.ok, "points_lost": round(r.points_lost, 2), "explanation": r.explanation}
                for r in self.rules
            ],
        }


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def evaluate_cluster(
    *,
    name: str,
    role: str,
    version: str,
    isolated: bool,
    skew_severity: str | None,
    skew_messages: list[str],
    compat: dict[str, int],
    propagation: dict[str, int],
) -> ClusterCompliance:
    result = ClusterCompliance(
        name, role, version, isolated, skew_severity, skew_messages, dict(compat), dict(propagation)
    )
    rules = result.rules
    if skew_severity is None:
        rules.append(RuleResult("version_policy", True, 0, "Within the version-skew policy."))
    else:
        points = SKEW_POINTS[skew_severity]
        rules.append(
            RuleResult(
                "version_policy",
                points == 0,
                points,
                f"Worst skew finding {skew_severity}: " + (skew_messages[0] if skew_messages else ""),
            )
        )
    targets = sum(compat.values())
    bad = compat.get("incompatible", 0)
    unverifiable = compat.get("unverifiable", 0)
    if bad:
        rules.append(
            RuleResult(
                "api_compat",
                False,
                COMPAT_POINTS * _share(bad, targets),
                f"{bad} of {targets} targeting federated resources use fields or apiVersions its version rejects.",
            )
        )
    else:
        rules.append(RuleResult("api_compat", True, 0, _compat_explanation(targets, unverifiable)))
    placed = sum(propagation.values())
    failed = propagation.get("failed", 0)
    out_of_sync = propagation.get("out_of_sync", 0)
    rules.append(
        RuleResult(
            "propagation",
            failed == 0,
            PROPAGATION_POINTS * _share(failed, placed),
            f"{failed} of {placed} propagated objects report a failure."
            if failed
            else f"No failures among {placed} propagated objects.",
        )
    )
    rules.append(
        RuleResult(
            "resource_drift",
            out_of_sync == 0,
            DRIFT_POINTS * _share(out_of_sync, placed),
            f"{out_of_sync} propagated objects drifted from what FedPortal applied."
            if out_of_sync
            else "No open drift.",
        )
    )
    rules.append(
        RuleResult(
            "isolation",
            not isolated,
            ISOLATION_POINTS if isolated else 0,
            "Isolated: excluded from placement, scheduling and propagation." if isolated else "Not isolated.",
        )
    )
    return result


@dataclass
class FleetCompliance:
    clusters: list[ClusterCompliance]

    @property
    def total(self) -> int:
        return len(self.clusters)

    @property
    def compliant(self) -> int:
        return sum(1 for c in self.clusters if c.compliant)

    @property
    def compliant_share(self) -> float:
        return self.compliant / self.total if self.total else 1.0

    @property
    def score(self) -> int:
        return round(sum(c.score for c in self.clusters) / self.total) if self.total else 100

    @property
    def open_drift(self) -> int:
        return sum(c.propagation.get("out_of_sync", 0) for c in self.clusters)

    @property
    def incompatible_cells(self) -> int:
        return sum(c.compat.get("incompatible", 0) for c in self.clusters)

    @property
    def isolated(self) -> int:
        return sum(1 for c in self.clusters if c.isolated)

    def rule_failures(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for cluster in self.clusters:
            for rule in cluster.rules:
                counts.setdefault(rule.rule, 0)
                if not rule.ok:
                    counts[rule.rule] += 1
        return counts


def _compat_explanation(targets: int, unverifiable: int) -> str:
    """The passing API-compatibility rule's explanation: what was verified, and what could not be
    (an unreadable version, one outside the schemas' range, a custom resource) is not called
    compatible."""
    if not unverifiable:
        return f"All {targets} targeting resources are compatible."
    if unverifiable == targets:
        return f"None of the {targets} targeting resources can be verified against this cluster's version."
    return (
        f"{targets - unverifiable} of {targets} targeting resources are compatible; {unverifiable} cannot be verified."
    )
