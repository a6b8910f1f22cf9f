"""A request applied some time after its approval (auto-apply off) is checked again at apply, as
``approve`` checks it: its targets, the approvals they need, its preflight."""

import pytest

from clusters.models import Cluster
from federation.approvals import services
from federation.approvals.choices import ChangeState, Severity
from federation.approvals.preflight import PreflightProblem, register_preflight, unregister_preflight
from fedportal.models import AuditEvent
from tests.approvals.factories import submitted


@pytest.fixture
def approved_later(dev_resource, operator, approver, settings):
    settings.FEDPORTAL_APPROVALS_AUTO_APPLY = False
    cr = services.approve(submitted(dev_resource, operator), actor=approver)
    assert cr.state == ChangeState.APPROVED and cr.required_approvals == 1
    return cr


def test_a_cluster_turned_production_after_approval_sends_the_request_back_for_its_second_approval(
    approved_later, dev_cluster, operator, approver, second_approver
):
    Cluster.objects.filter(pk=dev_cluster.pk).update(labels={"env": "prod"})

    with pytest.raises(services.TransitionError, match="needs 2 approvals now"):
        services.apply_change_request(approved_later, actor=operator)

    cr = services.ChangeRequest.objects.get(pk=approved_later.pk)
    assert cr.state == ChangeState.SUBMITTED and cr.required_approvals == 2 and not cr.runs.exists()
    event = AuditEvent.objects.get(action="approvals.change.needs_approvals", object_id=str(cr.pk))
    assert event.after["required"] == 2 and event.after["valid"] == 1
    with pytest.raises(services.TransitionError, match="already approved"):
        services.approve(cr, actor=approver)
    assert services.approve(cr, actor=second_approver).state == ChangeState.APPROVED
    assert services.apply_change_request(cr, actor=operator).state == ChangeState.APPLYING


def test_a_blocking_preflight_problem_found_after_approval_refuses_the_apply(approved_later, operator, admin_user):
    def check(cr):
        return [PreflightProblem("dev-a", Severity.BLOCKING, "apps/v1 Deployment field x is not served at v1.24")]

    register_preflight(check)
    try:
        with pytest.raises(services.TransitionError, match="since CR-.* was approved .*field x is not served"):
            services.apply_change_request(approved_later, actor=operator)
        cr = services.ChangeRequest.objects.get(pk=approved_later.pk)
        assert cr.state == ChangeState.APPROVED and not cr.runs.exists()
        assert "field x" in cr.preflight[0]["message"]

        services.override_preflight(cr, actor=admin_user, reason="field is ignored there, accepted risk")
        assert services.apply_change_request(cr, actor=operator).state == ChangeState.APPLYING
    finally:
        unregister_preflight(check)


def test_an_approval_whose_approver_left_the_role_sends_the_request_back_not_stuck(
    approved_later, operator, approver, second_approver
):
    """It stayed Approved with 0 of 1, and no approver could approve an Approved request."""
    from django.contrib.auth.models import Group

    from fedportal.roles import Role

    approver.groups.remove(Group.objects.get(name=Role.APPROVER))
    with pytest.raises(services.TransitionError, match="needs 1 approvals now"):
        services.apply_change_request(approved_later, actor=operator)
    cr = services.ChangeRequest.objects.get(pk=approved_later.pk)
    assert cr.state == ChangeState.SUBMITTED
    assert services.approve(cr, actor=second_approver).state == ChangeState.APPROVED


def test_a_cluster_relabelled_between_the_check_and_the_run_is_caught_under_the_lock(
    dev_resource, dev_cluster, operator, approver, monkeypatch
):
    """Auto-apply re-checks at approval, then applies: a relabel in between (here right after the
    approval's re-check) must not let the run plan production with one approval."""
    refresh = services.refresh_change_request

    def refresh_then_relabel(*args, **kwargs):
        checked = refresh(*args, **kwargs)
        Cluster.objects.filter(pk=dev_cluster.pk).update(labels={"env": "prod"})
        return checked

    cr = submitted(dev_resource, operator)
    monkeypatch.setattr(services, "refresh_change_request", refresh_then_relabel)
    with pytest.raises(services.TransitionError, match="changed a moment ago: they need 2 approvals"):
        services.approve(cr, actor=approver)
    cr = services.ChangeRequest.objects.get(pk=cr.pk)
    assert cr.state == ChangeState.APPROVED and not cr.runs.exists()
