"""A preflight check: a proposed revision holding values the API server rejects outright (saved
before federation.apiserver_limits existed, or written around the service) blocks approval."""

from federation.apiserver_limits import revision_value_problems
from federation.approvals.choices import ChangeKind, Severity
from federation.approvals.preflight import PreflightProblem

REVISION_KINDS = (ChangeKind.CREATE, ChangeKind.EDIT, ChangeKind.ROLLBACK)


def apiserver_value_check(change_request) -> list[PreflightProblem]:
    if (
        change_request.kind not in REVISION_KINDS
        or change_request.resource is None
        or change_request.proposed_revision is None
    ):
        return []
    return [
        PreflightProblem("", Severity.BLOCKING, f"The API server would reject this revision: {problem}")
        for problem in revision_value_problems(change_request.resource, change_request.proposed_revision)
    ]
