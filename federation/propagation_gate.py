"""Who may start a propagation run, and of what: the checks propagate_revision and resync_cluster
make themselves (views check the same roles; a service must not rely on that).

``actor=None`` is the system (beat tasks, the unjoin workflow) and passes the role checks.
"""

from django.core.exceptions import PermissionDenied

from federation.protected import protected_namespace_refusal
from fedportal.roles import Role, has_role, require_actor_role


def propagation_refusal(resource, *, actor, emergency: bool = False) -> str:
    """Raise PermissionDenied when ``actor`` may not propagate; return why ``resource`` may not be
    propagated this way ("" when it may). An approved change request is applied by an operator or
    by the approver whose approval completed it; the emergency path is an admin's."""
    if emergency:
        require_actor_role(actor, Role.ADMIN)
    elif actor is not None and not (has_role(actor, Role.OPERATOR) or has_role(actor, Role.APPROVER)):
        raise PermissionDenied("Propagating needs the operator or approver role.")
    return protected_namespace_refusal(resource, emergency=emergency)


def check_resync(actor) -> None:
    """Re-syncing one cluster is an operator's action (as the page's button is)."""
    require_actor_role(actor, Role.OPERATOR)


def check_removal(actor) -> None:
    """Removing a resource from a cluster for an approved unjoin: whoever applies the approved request
    (an operator, or the approver completing it), or the system."""
    if actor is not None and not (has_role(actor, Role.OPERATOR) or has_role(actor, Role.APPROVER)):
        raise PermissionDenied("Removing resources from a cluster needs the operator or approver role.")
