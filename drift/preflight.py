"""The API-compatibility preflight for change requests (registered with federation.approvals), and
the same check on the federation preview (registered with federation.preview_checks).

Every target of the proposed revision is checked as the compatibility matrix checks it: an
incompatible target is a *blocking* problem (approval stops until an admin overrides it with a
reason, which approvals audits); an unverifiable target, or an incompatible one that is isolated
(propagation skips it), is a *warning*.
"""

from clusters import schemas
from drift import compat, selectors
from drift.choices import CompatProblemCode, CompatStatus
from federation.approvals.choices import ChangeKind, Severity
from federation.approvals.preflight import PreflightProblem

CHECKED_KINDS = (ChangeKind.CREATE, ChangeKind.EDIT, ChangeKind.ROLLBACK, ChangeKind.RECONCILE)


def _describe(result) -> str:
    parts = []
    for problem in result.problems[:5]:
        text = problem.message
        if problem.fix:
            text += f" Fix: override {problem.fix['op']} {problem.fix['path']}"
            if problem.min_version:
                text += f", or upgrade the cluster to {problem.min_version}"
            text += "."
        parts.append(text)
    more = len(result.problems) - 5
    return " ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def compat_preflight(change_request) -> list[PreflightProblem]:
    if change_request.kind not in CHECKED_KINDS or change_request.proposed_revision_id is None:
        return []
    resource = change_request.resource
    if resource is None:
        return []
    rows = selectors.fleet_rows()
    cells = selectors.compat_row(resource, rows, revision=change_request.proposed_revision)
    by_name = {row.name: row for row in rows}
    problems = []
    for name in sorted(cells):
        cell = cells[name]
        if not cell.targeted or cell.result is None:
            continue
        version = by_name[name].server_version or "unknown version"
        if cell.result.status == CompatStatus.INCOMPATIBLE:
            isolated = by_name[name].isolated
            # a CRD installed since the cluster's discovery was last read is served already: a warning
            crd_only = all(p.code == CompatProblemCode.CRD_NOT_SERVED for p in cell.result.problems)
            problems.append(
                PreflightProblem(
                    name,
                    Severity.WARNING if isolated or crd_only else Severity.BLOCKING,
                    f"Incompatible with {name} ({version}){' — isolated, so propagation skips it' if isolated else ''}: "
                    + _describe(cell.result),
                )
            )
        elif cell.result.status == CompatStatus.UNVERIFIABLE:
            problems.append(
                PreflightProblem(
                    name, Severity.WARNING, f"Cannot verify on {name} ({version}): {_describe(cell.result)}"
                )
            )
        elif cell.result.minor is not None and (
            deprecated := schemas.deprecation_warning(cell.result.minor, resource.type.api_version, resource.type.kind)
        ):
            # served, so compatible; the apiserver answers with this Warning, and a later minor refuses it
            problems.append(
                PreflightProblem(name, Severity.WARNING, f"Deprecated on {name} ({version}): {deprecated}.")
            )
    return problems


def compat_preview_check(manifest: dict, cluster) -> list[str] | None:
    """The preview's warnings for ``manifest`` on ``cluster``: what the compatibility matrix says of it
    (no database access: the preview runs this on its thread pool)."""
    version = cluster.server_version or ""
    result = compat.check_manifest(manifest, version, served=getattr(cluster, "served_apis", None))
    if result.status == CompatStatus.INCOMPATIBLE:
        return [f"Incompatible with {cluster.name} ({version}): {_describe(result)}"]
    if result.status == CompatStatus.UNVERIFIABLE:
        return [f"Cannot verify on {cluster.name} ({version or 'version not polled yet'}): {_describe(result)}"]
    return []
