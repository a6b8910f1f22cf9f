"""Preflight: a namespaced resource whose namespace is missing on a target cluster and not federated
to it. A warning per cluster (the request may still be approved, e.g. while the Namespace's own
request is in flight: its targets wait and are retried once the namespace is propagated)."""

from federation.approvals.choices import ChangeKind, Severity
from federation.approvals.preflight import PreflightProblem
from federation.propagation.namespaces import missing_namespaces

CHECKED_KINDS = (ChangeKind.CREATE, ChangeKind.EDIT, ChangeKind.ROLLBACK, ChangeKind.RECONCILE)


def namespace_preflight(change_request) -> list[PreflightProblem]:
    if change_request.kind not in CHECKED_KINDS or change_request.proposed_revision_id is None:
        return []
    resource = change_request.resource
    if resource is None:
        return []
    missing = missing_namespaces(resource, change_request.proposed_revision)
    return [PreflightProblem(name, Severity.WARNING, missing[name]) for name in sorted(missing)]
