"""Preflight checks other apps plug in (drift registers an API-compatibility check).

    from federation.approvals.preflight import PreflightProblem, register_preflight

    def check(change_request) -> list[PreflightProblem]: ...
    register_preflight(check)          # e.g. in drift's AppConfig.ready()

A "blocking" problem stops approval unless an admin overrides it with a reason
(``services.override_preflight``); a "warning" is only shown. A check that raises is reported as
a warning naming the check, so one broken plugin never blocks (or hides) every request.
"""

import logging
from dataclasses import asdict, dataclass

from federation.approvals.choices import Severity
from federation.plugins import Registry

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreflightProblem:
    cluster_name: str
    severity: str  # Severity: "blocking" | "warning"
    message: str

    def as_dict(self) -> dict:
        return asdict(self)


CHECKS = Registry()
register_preflight = CHECKS.register
unregister_preflight = CHECKS.unregister
registered_checks = CHECKS.functions


def run_preflight(change_request) -> list[PreflightProblem]:
    problems: list[PreflightProblem] = []
    for check in CHECKS.functions():
        name = getattr(check, "__qualname__", repr(check))
        try:
            found = check(change_request) or []
        except Exception as exc:  # a plugin's bug must not break the workflow
            logger.exception("preflight check %s failed", name)
            problems.append(PreflightProblem("", Severity.WARNING, f"Preflight check {name} failed: {exc}"))
            continue
        for problem in found:
            severity = problem.severity if problem.severity in Severity.values else Severity.WARNING
            problems.append(PreflightProblem(problem.cluster_name or "", severity, str(problem.message)))
    return problems
