"""Two roles attacking change requests (a reviewer's findings): submitting someone else's draft, and
approvals of someone no longer an approver."""

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied

from federation.approvals import services
from federation.approvals.choices import ChangeKind, ChangeState
from federation.approvals.models import ChangeRequest
from fedportal.roles import Role
from tests.approvals.factories import draft, submitted


@pytest.fixture
def operator_and_approver(make_user):
    return make_user("bea-both", Role.OPERATOR, Role.APPROVER)


def test_another_operator_cannot_submit_someones_draft_and_approve_it(
    dev_resource, operator, operator_and_approver, admin_user, client
):
    cr = draft(dev_resource, operator)
    with pytest.raises(PermissionDenied, match="Only the author"):
        services.submit(cr, actor=operator_and_approver)
    client.force_login(operator_and_approver)
    page = client.get(f"/changes/{cr.pk}/")
    assert b'action="/changes/%d/submit/"' % cr.pk not in page.content
    assert client.post(f"/changes/{cr.pk}/submit/").status_code == 403
    assert ChangeRequest.objects.get(pk=cr.pk).state == ChangeState.DRAFT
    assert services.submit(cr, actor=admin_user).state == ChangeState.SUBMITTED


def test_a_draft_the_system_opened_is_submitted_by_any_operator(dev_resource, operator, operator_and_approver):
    cr = draft(dev_resource, operator)
    ChangeRequest.objects.filter(pk=cr.pk).update(author=None, author_name="", kind=ChangeKind.RECONCILE)
    assert services.submit(cr, actor=operator_and_approver).state == ChangeState.SUBMITTED


def test_a_draft_whose_author_was_deleted_is_submitted_by_an_admin_only(
    dev_resource, operator, operator_and_approver, admin_user
):
    """No author is not the system's draft: another operator who is an approver too released and
    approved a departed colleague's edit alone (a reviewer's finding)."""
    cr = draft(dev_resource, operator)
    ChangeRequest.objects.filter(pk=cr.pk).update(author=None)
    with pytest.raises(PermissionDenied, match="Only the author"):
        services.submit(cr, actor=operator_and_approver)
    assert services.submit(cr, actor=admin_user).state == ChangeState.SUBMITTED


def test_an_approval_stops_counting_when_its_approver_leaves_the_role(
    prod_resource, operator, approver, second_approver
):
    cr = submitted(prod_resource, operator)
    assert cr.required_approvals == 2
    cr = services.approve(cr, actor=approver)
    assert services.approval_summary(cr).valid == 1
    approver.groups.remove(Group.objects.get(name=Role.APPROVER))

    assert services.approval_summary(cr).valid == 0
    cr = services.approve(cr, actor=second_approver)
    assert cr.state == ChangeState.SUBMITTED and services.approval_summary(cr).valid == 1


def test_a_wave_approval_stops_counting_when_its_approver_leaves_the_role(approver, second_approver):
    from federation.approvals import rollout as rollouts
    from federation.approvals.models import RolloutWave

    wave = RolloutWave(
        name="prod",
        clusters=[],
        approvals=[{"user_id": approver.pk, "user": approver.username}, {"user_id": second_approver.pk}],
    )
    assert rollouts.wave_approval_count(None, wave)[0] == 2
    approver.groups.remove(Group.objects.get(name=Role.APPROVER))
    assert rollouts.wave_approval_count(None, wave)[0] == 1


def test_content_sent_by_a_request_that_failed_everywhere_keeps_its_approval_count(dev_resource, operator, approver):
    cr = services.approve(submitted(dev_resource, operator), actor=approver)
    ChangeRequest.objects.filter(pk=cr.pk).update(state=ChangeState.FAILED)
    assert services.approvals_granted(dev_resource, dev_resource.current_revision) == 1
