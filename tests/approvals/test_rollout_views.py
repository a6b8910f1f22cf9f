"""The wave timeline on the change-request page, its buttons, and who may press them (no network:
the rollouts here are made as rows; tests/approvals/test_rollout_integration.py drives real ones)."""

import pytest
from django.urls import reverse

from federation.approvals import rollout as rollouts
from federation.approvals.choices import ChangeState, RolloutState, WaveState
from federation.approvals.models import Rollout, RolloutWave
from fedportal.models import AuditEvent
from fedportal.roles import Role
from tests.approvals.factories import staged

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def test_timeline_shows_waves_and_failed_gate_and_buttons_follow_the_role(
    client, dev_resource, prod_cluster, operator, viewer
):
    cr = staged(dev_resource, operator, failed_gate="rollout: prod-a: 0 of 1 updated replicas available")
    client.force_login(viewer)
    page = client.get(reverse("approvals:change_detail", args=[cr.pk]))
    body = page.content.decode()
    assert page.status_code == 200 and 'id="cr-rollout"' in body
    assert "Failed gate: rollout: prod-a: 0 of 1 updated replicas available" in body
    assert 'id="wave-canary"' in body and 'id="wave-prod"' in body
    assert 'id="rollout-abort"' not in body, "a viewer sees no buttons"
    # the page refreshes without JavaScript while the rollout runs, and the htmx fragment is the panel
    assert '<meta http-equiv="refresh"' in body
    fragment = client.get(reverse("approvals:change_detail", args=[cr.pk]), **HX)
    assert b"<html" not in fragment.content and b"cr-rollout" in fragment.content
    client.force_login(operator)
    body = client.get(reverse("approvals:change_detail", args=[cr.pk])).content.decode()
    assert 'id="rollout-abort"' in body and 'id="rollout-resume"' in body and 'id="rollout-pause"' not in body


def test_viewer_cannot_pause_or_abort(client, dev_resource, prod_cluster, operator, viewer):
    cr = staged(dev_resource, operator, state=RolloutState.PROGRESSING, wave_state=WaveState.APPLYING)
    client.force_login(viewer)
    for action in ("pause", "abort"):
        response = client.post(reverse("approvals:change_rollout", args=[cr.pk]), {"action": action})
        assert response.status_code == 403
    assert Rollout.objects.get(change_request=cr).state == RolloutState.PROGRESSING
    assert not AuditEvent.objects.filter(action__startswith="approvals.rollout.").exists()


def test_operator_abort_ends_the_rollout_audited(client, dev_resource, prod_cluster, operator):
    cr = staged(dev_resource, operator)
    client.force_login(operator)
    response = client.post(reverse("approvals:change_rollout", args=[cr.pk]), {"action": "abort"})
    assert response.status_code == 302
    assert Rollout.objects.get(change_request=cr).state == RolloutState.ABORTED
    cr.refresh_from_db()
    assert cr.state == ChangeState.PARTIALLY_FAILED and "aborted by" in cr.apply_error
    assert AuditEvent.objects.filter(action="approvals.rollout.aborted", object_id=str(cr.pk)).exists()
    # the audit CSV export carries it
    csv = client.get(reverse("audit:event_export"), {"action": "approvals.rollout."})
    assert csv.status_code == 200
    assert "approvals.rollout.aborted" in b"".join(csv.streaming_content).decode("utf-8-sig")
    # a second abort is refused with the reason, nothing changes
    again = client.post(reverse("approvals:change_rollout", args=[cr.pk]), {"action": "abort"}, **HX)
    assert again.status_code == 409 and b"only a" in again.content


def test_bad_action_is_a_400_with_the_reason(client, dev_resource, prod_cluster, operator):
    cr = staged(dev_resource, operator)
    client.force_login(operator)
    response = client.post(reverse("approvals:change_rollout", args=[cr.pk]), {"action": "explode"})
    assert response.status_code == 400 and b"Choose pause, resume, abort or rollback" in response.content
    assert Rollout.objects.get(change_request=cr).state == RolloutState.HALTED


def test_pause_then_resume(client, dev_resource, prod_cluster, operator):
    cr = staged(dev_resource, operator, state=RolloutState.PROGRESSING, wave_state=WaveState.BAKING)
    rollouts.pause_rollout(cr, actor=operator)
    assert Rollout.objects.get(change_request=cr).state == RolloutState.PAUSED
    with pytest.raises(rollouts.RolloutError):
        rollouts.pause_rollout(cr, actor=operator)
    rollouts.resume_rollout(cr, actor=operator)
    assert Rollout.objects.get(change_request=cr).state == RolloutState.PROGRESSING
    actions = list(AuditEvent.objects.filter(object_id=str(cr.pk)).values_list("action", flat=True))
    assert "approvals.rollout.paused" in actions and "approvals.rollout.resumed" in actions


def test_operator_cannot_approve_a_wave_they_authored(client, dev_resource, prod_cluster, make_user, approver):
    author = make_user("dual", Role.OPERATOR, Role.APPROVER)
    cr = staged(
        dev_resource,
        author,
        state=RolloutState.WAITING_APPROVAL,
        wave_state=WaveState.PENDING,
        require_approval=True,
    )
    client.force_login(author)
    body = client.get(reverse("approvals:change_detail", args=[cr.pk])).content.decode()
    assert 'id="rollout-approve"' not in body
    response = client.post(reverse("approvals:change_wave_approve", args=[cr.pk]), {"wave": "prod"})
    assert response.status_code == 403
    assert RolloutWave.objects.get(rollout__change_request=cr, name="prod").approvals == []
    client.force_login(approver)
    response = client.post(reverse("approvals:change_wave_approve", args=[cr.pk]), {"wave": "prod"})
    assert response.status_code == 302
    wave = RolloutWave.objects.get(rollout__change_request=cr, name="prod")
    assert [a["username"] for a in wave.approvals] == [approver.username]
    assert Rollout.objects.get(change_request=cr).state == RolloutState.WAITING_APPROVAL, "prod needs 2"


def test_rollback_without_an_earlier_revision_is_refused(dev_resource, prod_cluster, operator):
    cr = staged(dev_resource, operator)
    assert cr.base_revision_id is None
    with pytest.raises(rollouts.RolloutError, match="no earlier revision"):
        rollouts.rollback_rollout(cr, actor=operator)
    assert Rollout.objects.get(change_request=cr).state == RolloutState.HALTED


def _fedctl(*args) -> str:
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("fedctl", *args, stdout=out)
    return out.getvalue()


def test_fedctl_rollout_status_json_and_actions(dev_resource, prod_cluster, operator, viewer):
    import json

    from django.core.management import CommandError

    cr = staged(dev_resource, operator, failed_gate="rollout: prod-a: deadline")
    status = json.loads(_fedctl("rollout", "status", str(cr.pk), "-o", "json"))
    assert status["state"] == RolloutState.HALTED
    assert [(w["name"], w["state"], w["failedGate"]) for w in status["waves"]] == [
        ("canary", WaveState.PASSED, None),
        ("prod", WaveState.FAILED, "rollout: prod-a: deadline"),
    ]
    assert status["waves"][0]["clusters"] == {"dev-a": "Healthy"}
    assert "failed gate: rollout: prod-a: deadline" in _fedctl("rollout", "status", str(cr.pk))
    with pytest.raises(CommandError, match="viewer"):
        _fedctl("rollout", "abort", str(cr.pk), "--as", viewer.username)
    with pytest.raises(CommandError, match="No active user"):
        _fedctl("rollout", "pause", str(cr.pk))
    with pytest.raises(CommandError, match="only a"):
        _fedctl("rollout", "pause", str(cr.pk), "--as", operator.username)  # halted: resume, roll back or abort
    assert json.loads(_fedctl("rollout", "abort", str(cr.pk), "--as", operator.username, "-o", "json"))["state"] == (
        RolloutState.ABORTED
    )
    # a request that does not exist is not "a request without a staged rollout" (a reviewer's finding)
    with pytest.raises(CommandError, match="There is no change request CR-999999."):
        _fedctl("rollout", "status", "999999")
    from tests.approvals.factories import draft

    plain = draft(dev_resource, operator)
    with pytest.raises(CommandError, match=f"CR-{plain.pk} has no staged rollout."):
        _fedctl("rollout", "status", str(plain.pk))
    for bad in ("-1", "0", "x"):
        with pytest.raises(CommandError, match="is not a change request id"):
            _fedctl("rollout", "status", bad)


def test_a_request_that_drops_the_resources_waves_says_so_to_its_approvers(
    client, dev_resource, prod_cluster, operator, approver
):
    """A request may carry its own strategy; ``{}`` sent a change to every cluster at once while
    its page and the API showed nothing of it (a reviewer's finding)."""
    from api.endpoints.changes import change_detail_out
    from federation import services as federation_services
    from federation.approvals import services

    waves = {"waves": [{"name": "canary", "clusters": ["dev-a"]}, {"name": "prod", "clusters": ["prod-a"]}]}
    federation_services.set_rollout_strategy(dev_resource, waves, actor=operator)
    with_waves = services.create_change_request(dev_resource, actor=operator)
    at_once = services.create_change_request(dev_resource, actor=operator, rollout_strategy={})
    client.force_login(approver)
    body = client.get(reverse("approvals:change_detail", args=[at_once.pk])).content.decode()
    assert 'id="cr-skips-waves"' in body and "every placed cluster at once" in body
    assert (
        'id="cr-skips-waves"'
        not in client.get(reverse("approvals:change_detail", args=[with_waves.pk])).content.decode()
    )
    detail = change_detail_out(at_once)
    assert (detail["rollout_strategy"], detail["staged"]) == ({}, False)
    detail = change_detail_out(with_waves)
    assert (detail["rollout_strategy"], detail["staged"]) == (None, True)


def test_a_wave_waiting_for_approval_is_in_the_approvers_inbox_and_badge(
    client, dev_resource, prod_cluster, operator, approver, make_user
):
    """A rollout waiting for its prod wave's approval showed only as "Applying": the inbox said
    nothing waited and the badge stayed empty (a reviewer's finding)."""
    cr = staged(
        dev_resource, operator, state=RolloutState.WAITING_APPROVAL, wave_state=WaveState.PENDING, require_approval=True
    )
    client.force_login(approver)
    page = client.get(reverse("approvals:inbox")).content.decode()
    assert 'id="waiting-waves"' in page and f"CR-{cr.pk}" in page and "wave <strong>prod</strong>" in page
    assert ">1<" in client.get(reverse("approvals:badge")).content.decode()
    from federation.approvals import selectors

    assert selectors.badge_count(approver) == 1
    assert selectors.waves_waiting_for(operator) == [], "the change's author cannot approve its waves"
    rollouts.approve_wave(cr, actor=approver)
    assert selectors.waves_waiting_for(approver) == [], "approved by them already"
    other = make_user("other-approver", Role.APPROVER)
    assert [wave.name for _, wave in selectors.waves_waiting_for(other)] == ["prod"]


def test_the_wave_approval_button_goes_once_you_approved_and_the_count_shows(
    client, dev_resource, prod_cluster, operator, approver, settings
):
    settings.FEDPORTAL_APPROVALS_PROD = 2
    cr = staged(
        dev_resource, operator, state=RolloutState.WAITING_APPROVAL, wave_state=WaveState.PENDING, require_approval=True
    )
    client.force_login(approver)
    url = reverse("approvals:change_detail", args=[cr.pk])
    body = client.get(url).content.decode()
    assert 'id="rollout-approve"' in body and "Wave prod: 0 of 2 approvals." in body
    client.post(reverse("approvals:change_wave_approve", args=[cr.pk]), {"wave": "prod"})
    body = client.get(url).content.decode()
    assert 'id="rollout-approve"' not in body, "approving again would only be refused"
    assert "Wave prod: 1 of 2 approvals, yours included." in body


def test_the_badge_counts_waiting_waves_in_a_fixed_number_of_queries(
    client, make_resource, dev_cluster, prod_cluster, operator, approver
):
    """The badge is polled every 30 s by every approver: its query count does not grow with the
    rollouts waiting (a reviewer measured 8, 12, 17, 22 for 1 to 4)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from federation.approvals import selectors

    def wait_for_approval(name):
        resource = make_resource(name, ("dev-a",))
        return staged(
            resource, operator, state=RolloutState.WAITING_APPROVAL, wave_state=WaveState.PENDING, require_approval=True
        )

    wait_for_approval("one")
    selectors.badge_count(approver)  # the user's roles are read once and kept on it
    with CaptureQueriesContext(connection) as one:
        assert selectors.badge_count(approver) == 1
    for name in ("two", "three", "four", "five"):
        wait_for_approval(name)
    with CaptureQueriesContext(connection) as five:
        assert selectors.badge_count(approver) == 5
    assert len(five) == len(one)


def test_a_revision_author_is_not_offered_the_wave_of_a_request_someone_else_opened(
    dev_resource, prod_cluster, operator, approver, make_user
):
    from federation import services as federation_services
    from federation.approvals import selectors
    from tests.federation.factories import WEB_TEMPLATE

    writer = make_user("writer", Role.OPERATOR, Role.APPROVER)
    federation_services.update_resource(
        dev_resource, template={**WEB_TEMPLATE, "spec": {**WEB_TEMPLATE["spec"], "replicas": 4}}, actor=writer
    )
    staged(
        dev_resource, operator, state=RolloutState.WAITING_APPROVAL, wave_state=WaveState.PENDING, require_approval=True
    )
    assert selectors.waves_waiting_for(writer) == [] and selectors.badge_count(writer) == 0
    assert [wave.name for _, wave in selectors.waves_waiting_for(approver)] == ["prod"]


def test_the_badge_leaves_out_a_wave_whose_request_carries_a_revision_the_approver_wrote_in_between(
    dev_resource, prod_cluster, operator, approver, make_user
):
    """The approver wrote a revision between the propagated one and the proposed one (someone else
    wrote the proposed one on top): approve_wave refuses them, and the badge counted the wave anyway
    (it looked at the proposed revision's author only)."""
    from federation import services as federation_services
    from federation.approvals import selectors
    from tests.federation.factories import WEB_TEMPLATE

    writer = make_user("writer", Role.OPERATOR, Role.APPROVER)
    for author, replicas in ((writer, 4), (operator, 5)):
        federation_services.update_resource(
            dev_resource,
            template={**WEB_TEMPLATE, "spec": {**WEB_TEMPLATE["spec"], "replicas": replicas}},
            actor=author,
        )
    cr = staged(
        dev_resource, operator, state=RolloutState.WAITING_APPROVAL, wave_state=WaveState.PENDING, require_approval=True
    )
    assert cr.proposed_revision.author == operator
    assert selectors.waves_waiting_for(writer, check_authors=False) == [] and selectors.badge_count(writer) == 0
    assert selectors.badge_count(approver) == 1
    with pytest.raises(Exception, match="wrote"):
        rollouts.approve_wave(cr, actor=writer)
