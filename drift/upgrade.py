"""Repair guidance (seed 000, section 1.4 "repair"): upgrade one minor at a time.

Kubernetes upgrades the control plane one minor at a time (no skipping, no downgrades), so the
path from v1.25 to v1.28 is 1.26 -> 1.27 -> 1.28. For each step we say which manifests become
compatible, which become incompatible (an API removed on the way), and what the skew policy
says about the cluster against the host at that step. Plain data in and out; no ORM.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from clusters.versions import minor_of
from drift.choices import CompatStatus
from drift.compat import CompatResult, check_manifest
from drift.skew import ClusterVersion, SkewFinding, SkewPolicy, evaluate_pair


class UpgradePathError(ValueError):
    """The requested upgrade cannot be planned (unreadable version, downgrade)."""


def upgrade_path(current, target) -> list[int]:
    """Minors to pass through, excluding the current one: (v1.25.3, 28) -> [26, 27, 28]."""
    start, end = minor_of(current), minor_of(target)
    if start is None:
        raise UpgradePathError(f"The current version {current!r:.60} cannot be read.")
    if end is None:
        raise UpgradePathError(f"The target version {target!r:.60} cannot be read.")
    if end < start:
        raise UpgradePathError(
            f"v1.{end} is older than v1.{start}: Kubernetes does not support downgrades; "
            "align the host instead or rebuild the cluster."
        )
    return list(range(start + 1, end + 1))


@dataclass(frozen=True)
class UpgradeStep:
    minor: int
    results: dict  # manifest key -> CompatResult at this step
    became_compatible: tuple
    became_incompatible: tuple
    still_incompatible: tuple
    unverifiable: tuple
    skew_findings: tuple[SkewFinding, ...]

    @property
    def label(self) -> str:
        return f"v1.{self.minor}"


@dataclass(frozen=True)
class UpgradePlan:
    cluster: str
    start_minor: int
    target_minor: int
    start_results: dict
    start_skew: tuple[SkewFinding, ...]
    steps: tuple[UpgradeStep, ...]

    @property
    def incompatible_at_start(self) -> list:
        return [k for k, r in self.start_results.items() if r.status == CompatStatus.INCOMPATIBLE]

    @property
    def first_clean_step(self) -> UpgradeStep | None:
        """The first step where every manifest is compatible and the skew policy is satisfied."""
        for step in self.steps:
            if not step.skew_findings and not step.still_incompatible and not step.became_incompatible:
                return step
        return None


def plan_upgrade(
    cluster: ClusterVersion,
    target,
    manifests: Mapping,
    *,
    host: ClusterVersion | None = None,
    policy: SkewPolicy | None = None,
) -> UpgradePlan:
    """The step-by-step upgrade of ``cluster`` to ``target`` and its effect on ``manifests``."""
    policy = policy or SkewPolicy()
    minors = upgrade_path(cluster.git_version, target)
    start = minor_of(cluster.git_version)

    def check_all(minor: int) -> dict[object, CompatResult]:
        return {key: check_manifest(manifest, minor) for key, manifest in manifests.items()}

    def skew_at(minor: int) -> tuple[SkewFinding, ...]:
        if host is None or host.name == cluster.name:
            return ()
        moved = ClusterVersion(cluster.name, cluster.role, f"v1.{minor}.0")
        return evaluate_pair(host, moved, policy).findings

    before = check_all(start)
    start_results = before
    steps = []
    for minor in minors:
        after = check_all(minor)
        was_bad = {k for k, r in before.items() if r.status == CompatStatus.INCOMPATIBLE}
        now_bad = {k for k, r in after.items() if r.status == CompatStatus.INCOMPATIBLE}
        keys = list(manifests)
        steps.append(
            UpgradeStep(
                minor=minor,
                results=after,
                became_compatible=tuple(k for k in keys if k in was_bad and after[k].status == CompatStatus.COMPATIBLE),
                became_incompatible=tuple(k for k in keys if k in now_bad and k not in was_bad),
                still_incompatible=tuple(k for k in keys if k in now_bad and k in was_bad),
                unverifiable=tuple(k for k in keys if after[k].status == CompatStatus.UNVERIFIABLE),
                skew_findings=skew_at(minor),
            )
        )
        before = after
    return UpgradePlan(
        cluster=cluster.name,
        start_minor=start,
        target_minor=minors[-1] if minors else start,
        start_results=start_results,
        start_skew=skew_at(start),
        steps=tuple(steps),
    )
