"""python manage.py changes: thin over the services."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from federation.approvals.choices import ChangeState
from federation.approvals.models import ChangeRequest

pytestmark = pytest.mark.django_db


def run(*args):
    out, err = StringIO(), StringIO()
    call_command("changes", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_submit_prints_the_id_then_two_approvers_approve(prod_resource, operator, approver, second_approver):
    out, _ = run("submit", "shop/api", "--as", operator.username, "--title", "api v2")
    cr = ChangeRequest.objects.get(pk=int(out.strip()))
    assert cr.state == ChangeState.SUBMITTED and cr.title == "api v2"
    run("approve", str(cr.pk), "--as", approver.username, "--comment", "ok")
    assert ChangeRequest.objects.get(pk=cr.pk).state == ChangeState.SUBMITTED
    run("approve", str(cr.pk), "--as", second_approver.username)
    assert ChangeRequest.objects.get(pk=cr.pk).state == ChangeState.APPLYING
    listed = json.loads(run("list", "-o", "json")[0])
    assert listed[0]["id"] == cr.pk and listed[0]["approvals"] == 2 and listed[0]["targets"] == ["dev-a", "prod-a"]
    assert "api v2" in run("list")[0]


def test_author_cannot_approve_and_reject_needs_a_comment(dev_resource, operator, admin_user, approver):
    cr_id = run("submit", "shop/web", "--as", admin_user.username)[0].strip()
    with pytest.raises(CommandError, match="Permission denied: You wrote this request"):
        run("approve", cr_id, "--as", admin_user.username)
    with pytest.raises(CommandError):
        run("reject", cr_id, "--as", approver.username)
    run("reject", cr_id, "--as", approver.username, "--comment", "not now")
    assert ChangeRequest.objects.get(pk=cr_id).state == ChangeState.REJECTED
    with pytest.raises(CommandError, match="is Rejected"):
        run("approve", cr_id, "--as", approver.username)


def test_bad_input_is_a_clear_error(dev_resource, operator):
    with pytest.raises(CommandError, match="No federated resource shop/nope"):
        run("submit", "shop/nope", "--as", operator.username)
    with pytest.raises(CommandError, match="No active user"):
        run("submit", "shop/web", "--as", "ghost")
    with pytest.raises(CommandError, match="No change request 424242"):
        run("approve", "424242", "--as", operator.username)


def test_emergency_is_admin_only(dev_resource, operator, admin_user):
    with pytest.raises(CommandError, match="Permission denied"):
        run("emergency", "shop/web", "--as", operator.username, "--reason", "x")
    out, _ = run("emergency", "shop/web", "--as", admin_user.username, "--reason", "INC-1")
    assert ChangeRequest.objects.get(pk=int(out)).emergency
