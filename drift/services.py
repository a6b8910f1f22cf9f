"""State changes of the drift app. Every one writes its audit event explicitly."""

from django.db import transaction
from django.utils import timezone

from drift.models import VersionPolicy
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
