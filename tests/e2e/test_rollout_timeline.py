"""Browser test of a staged rollout: the wave timeline follows the real worker (htmx polling),
shows the failed gate and why, and the operator's Abort button ends the rollout."""

import pytest

from federation import propagation
from federation import services as federation_services
from federation.approvals import services
from federation.approvals.choices import ChangeState, RolloutState
from federation.approvals.models import ChangeRequest, Rollout
from federation.models import PropagationRun
from fedportal.models import AuditEvent
from tests.federation.factories import federate_namespace, register_fleet, web_deployment
from tests.utils import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TARGETS = ["m128", "m130"]  # staging, then prod
STRATEGY = {
    "autoRollback": False,
    "waves": [
        {"name": "staging", "clusters": ["m128"]},
        {"name": "prod", "clusters": ["m130"], "progressDeadlineSeconds": 3},
    ],
}


def test_timeline_shows_progress_and_the_failed_gate_and_abort_works(
    page, live_server, login, operator, approver, make_user, celery_worker, fleet
):
    from fedportal.roles import Role

    second = make_user("second-approver", Role.APPROVER)
    register_fleet(fleet, TARGETS)
    fleet.admin("POST", "/clusters/m130/faults", {"rolloutFail": True})
    ns = federate_namespace("shop", TARGETS)
    run = propagation.propagate_revision(ns)
    wait_for(lambda: PropagationRun.objects.filter(pk=run.pk, finished_at__isnull=False).exists(), timeout=60)
    resource = web_deployment(name="web", placement={"clusters": TARGETS}, actor=operator)
    federation_services.set_rollout_strategy(resource, STRATEGY, actor=operator)
    cr = services.submit(services.create_change_request(resource, actor=operator), actor=operator)
    services.approve(cr, actor=approver)
    services.approve(cr, actor=second)

    login(page, operator)
    page.goto(f"{live_server.url}/changes/{cr.pk}/")
    page.evaluate("window.__noReload = true")
    # the timeline moves by itself: the staging wave passes, the prod wave's gate fails and halts it
    page.wait_for_selector("#wave-staging .state:has-text('Passed')", timeout=60_000)
    assert page.locator("#wave-staging [role=progressbar]").get_attribute("aria-valuenow") == "100"
    page.wait_for_selector("#rollout-state:has-text('Halted')", timeout=60_000)
    gate = page.locator("#wave-prod .failed-gate").inner_text()
    assert "m130" in gate and "not complete within 3s" in gate, gate
    assert page.evaluate("window.__noReload === true"), "htmx polling updated the timeline in place"
    page.click("#rollout-abort")
    page.wait_for_selector("#rollout-state:has-text('Aborted')")
    assert page.locator("#rollout-abort").count() == 0
    assert Rollout.objects.get(change_request=cr).state == RolloutState.ABORTED
    assert ChangeRequest.objects.get(pk=cr.pk).state == ChangeState.PARTIALLY_FAILED
    actions = set(AuditEvent.objects.filter(object_id=str(cr.pk)).values_list("action", flat=True))
    assert {"approvals.rollout.wave_start", "approvals.rollout.halt", "approvals.rollout.aborted"} <= actions
