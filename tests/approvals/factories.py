"""Helpers that walk a change request through its states with the real services, and a rollout
made as rows (no network) for the pages that show one."""

from federation.approvals import services
from federation.approvals.choices import ChangeState, RolloutState, WaveState
from federation.approvals.models import ChangeRequest, Rollout, RolloutWave


def draft(resource, author, **kw):
    return services.create_change_request(resource, actor=author, **kw)


def submitted(resource, author, **kw):
    return services.submit(draft(resource, author, **kw), actor=author)


def staged(resource, author, state=RolloutState.HALTED, **kw):
    """A request applying as a two-wave rollout: canary (dev-a) passed, prod (prod-a) failed
    unless ``wave_state`` says otherwise."""
    cr = draft(resource, author)
    ChangeRequest.objects.filter(pk=cr.pk).update(state=ChangeState.APPLYING)
    rollout = Rollout.objects.create(change_request=cr, state=state, halt_reason=kw.pop("halt_reason", ""))
    RolloutWave.objects.create(
        rollout=rollout,
        index=0,
        name="canary",
        state=WaveState.PASSED,
        clusters=["dev-a"],
        cluster_states={"dev-a": "Healthy"},
    )
    RolloutWave.objects.create(
        rollout=rollout,
        index=1,
        name="prod",
        state=kw.pop("wave_state", WaveState.FAILED),
        clusters=["prod-a"],
        cluster_states={"prod-a": "Failed"},
        failed_gate=kw.pop("failed_gate", ""),
        gate_message=kw.pop("gate_message", ""),
        require_approval=kw.pop("require_approval", False),
    )
    return ChangeRequest.objects.get(pk=cr.pk)
