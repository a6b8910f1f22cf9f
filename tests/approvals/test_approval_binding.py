"""An approval is of what the approver reviewed: the change request's content on the page they
approved from, the wave they saw waiting. The author re-pointing the request meanwhile, or the
wave passing meanwhile, makes the click a 409 that changes nothing (a security review's finding:
the stale click approved, and auto-apply propagated, content nobody reviewed)."""

import re

import pytest
from django.urls import reverse

from federation import services as federation_services
from federation.approvals.choices import ChangeState, RolloutState, WaveState
from federation.approvals.models import ChangeRequest, RolloutWave
from federation.models import PropagationRun
from fedportal.models import AuditEvent
from fedportal.roles import Role
from tests.approvals.factories import staged, submitted
from tests.federation.factories import WEB_TEMPLATE

pytestmark = pytest.mark.django_db


def replicas(n: int) -> dict:
    return {**WEB_TEMPLATE, "spec": {**WEB_TEMPLATE["spec"], "replicas": n}}


def hidden(page, name: str) -> str:
    """The value of the page's hidden input ``name`` (what the browser posts back). It is kept across
    the panel's self-refresh (hx-preserve): the refresh must not swap in content the approver did
    not open the page with (a review found the 10 s poll re-rendered it)."""
    match = re.search(
        rf'<input type="hidden" name="{name}" id="[^"]+" value="([^"]*)" hx-preserve="true"', page.content.decode()
    )
    assert match, f"no hidden {name} on the page"
    return match.group(1)


def repoint_to_a_new_revision(client_class, resource, cr, author) -> None:
    author_client = client_class()
    author_client.force_login(author)
    federation_services.update_resource(resource, template=replicas(9), placement={"clusters": ["dev-a"]}, actor=author)
    assert author_client.post(reverse("approvals:change_refresh", args=[cr.pk]), {"revise": "1"}).status_code == 302


def test_a_stale_approval_of_repointed_content_is_refused(client, dev_resource, operator, approver):
    cr = submitted(dev_resource, operator)
    client.force_login(approver)
    page = client.get(reverse("approvals:change_detail", args=[cr.pk]))
    seen = hidden(page, "content_hash")
    assert seen == cr.proposed_hash
    repoint_to_a_new_revision(client.__class__, dev_resource, cr, operator)
    events = AuditEvent.objects.count()

    response = client.post(reverse("approvals:change_approve", args=[cr.pk]), {"comment": "lgtm", "content_hash": seen})

    assert response.status_code == 409
    assert b"does not propose what you reviewed" in response.content and b"revision 2" in response.content
    cr = ChangeRequest.objects.get(pk=cr.pk)
    assert cr.state == ChangeState.SUBMITTED and not cr.approvals.exists()
    assert not PropagationRun.objects.filter(resource=dev_resource).exists()
    assert AuditEvent.objects.count() == events
    # the page shown again carries the new content's hash: approving that works
    fresh = hidden(client.get(reverse("approvals:change_detail", args=[cr.pk])), "content_hash")
    assert fresh == cr.proposed_hash != seen
    ok = client.post(reverse("approvals:change_approve", args=[cr.pk]), {"content_hash": fresh})
    assert ok.status_code == 302 and ChangeRequest.objects.get(pk=cr.pk).approvals.count() == 1


def test_an_approval_that_names_no_content_is_a_400(client, dev_resource, operator, approver):
    cr = submitted(dev_resource, operator)
    client.force_login(approver)
    response = client.post(reverse("approvals:change_approve", args=[cr.pk]), {"comment": "lgtm"})
    assert response.status_code == 400 and b"which content you reviewed" in response.content
    assert not ChangeRequest.objects.get(pk=cr.pk).approvals.exists()


def test_the_api_refuses_an_approval_of_content_that_changed(client, dev_resource, operator, approver):
    cr = submitted(dev_resource, operator)
    client.force_login(approver)
    seen = client.get(f"/api/v1/change-requests/{cr.pk}").json()["content_hash"]
    repoint_to_a_new_revision(client.__class__, dev_resource, cr, operator)
    url = f"/api/v1/change-requests/{cr.pk}/approve"

    response = client.post(url, {"content_hash": seen}, content_type="application/json")

    assert response.status_code == 409 and "does not propose what you reviewed" in response.json()["message"]
    assert not ChangeRequest.objects.get(pk=cr.pk).approvals.exists()
    current = client.get(f"/api/v1/change-requests/{cr.pk}").json()["content_hash"]
    assert client.post(url, {"content_hash": current}, content_type="application/json").status_code == 200


def test_a_refused_approval_of_a_content_author_changes_nothing(client, dev_resource, operator, make_user):
    both = make_user("both-roles", Role.OPERATOR, Role.APPROVER)
    federation_services.update_resource(
        dev_resource, template=replicas(5), placement={"clusters": ["dev-a"]}, actor=both
    )
    cr = submitted(dev_resource, operator)
    before = ChangeRequest.objects.filter(pk=cr.pk).values().get()
    client.force_login(both)
    events = AuditEvent.objects.count()

    response = client.post(reverse("approvals:change_approve", args=[cr.pk]), {"content_hash": cr.proposed_hash})

    assert response.status_code == 403 and b"You wrote part of" in response.content
    assert ChangeRequest.objects.filter(pk=cr.pk).values().get() == before
    assert AuditEvent.objects.count() == events


def test_a_stale_wave_approval_is_refused(client, dev_resource, prod_cluster, operator, approver):
    cr = staged(
        dev_resource, operator, state=RolloutState.WAITING_APPROVAL, wave_state=WaveState.PENDING, require_approval=True
    )
    waiting = RolloutWave.objects.get(rollout__change_request=cr, index=1)
    RolloutWave.objects.create(
        rollout=waiting.rollout,
        index=2,
        name="us",
        clusters=["prod-a"],
        cluster_states={"prod-a": "Pending"},
        require_approval=True,
    )
    client.force_login(approver)
    page = client.get(reverse("approvals:change_detail", args=[cr.pk]))
    assert hidden(page, "wave") == waiting.name
    # meanwhile the wave on the page is approved by others and passes: "us" waits now
    RolloutWave.objects.filter(pk=waiting.pk).update(state=WaveState.PASSED)

    response = client.post(reverse("approvals:change_wave_approve", args=[cr.pk]), {"wave": waiting.name})

    assert response.status_code == 409 and b"no longer waiting for approval; wave us is" in response.content
    assert RolloutWave.objects.get(rollout__change_request=cr, name="us").approvals == []
    page = client.get(reverse("approvals:change_detail", args=[cr.pk]))
    assert hidden(page, "wave") == "us"
    assert client.post(reverse("approvals:change_wave_approve", args=[cr.pk]), {"wave": "us"}).status_code == 302
    assert len(RolloutWave.objects.get(rollout__change_request=cr, name="us").approvals) == 1


def test_approve_takes_the_reviewed_content_hash(dev_resource, prod_cluster, operator, approver):
    from django.core.management import CommandError, call_command

    cr = submitted(dev_resource, operator)
    for stale in ("", "0" * 64):  # an unset $HASH in a script is refused, not skipped
        with pytest.raises(CommandError, match="does not propose what you reviewed"):
            call_command("fedctl", "approve", str(cr.pk), "--as", approver.username, "--content-hash", stale)
    assert not ChangeRequest.objects.get(pk=cr.pk).approvals.exists()
    call_command("fedctl", "approve", str(cr.pk), "--as", approver.username, "--content-hash", cr.proposed_hash)
    assert ChangeRequest.objects.get(pk=cr.pk).approvals.count() == 1


def test_rollout_approve_takes_the_wave_seen_waiting(dev_resource, prod_cluster, operator, approver):
    from django.core.management import CommandError, call_command

    staged_cr = staged(
        dev_resource, operator, state=RolloutState.WAITING_APPROVAL, wave_state=WaveState.PENDING, require_approval=True
    )
    with pytest.raises(CommandError, match="no longer waiting for approval"):
        call_command("fedctl", "rollout", "approve", str(staged_cr.pk), "--as", approver.username, "--wave", "canary")
    call_command("fedctl", "rollout", "approve", str(staged_cr.pk), "--as", approver.username, "--wave", "prod")
    assert len(RolloutWave.objects.get(rollout__change_request=staged_cr, name="prod").approvals) == 1


def test_the_api_refuses_an_approval_that_names_no_reviewed_content(client, dev_resource, operator, approver):
    """Without content_hash the approval counted for whatever the request proposed when it arrived:
    an author who pointed the request at new content meanwhile had it approved unseen (a reviewer's
    finding). The page's form requires it; the API does too now, and nothing is written."""
    cr = submitted(dev_resource, operator)
    client.force_login(approver)
    repoint_to_a_new_revision(client.__class__, dev_resource, cr, operator)
    events = AuditEvent.objects.count()

    response = client.post(
        f"/api/v1/change-requests/{cr.pk}/approve", {"comment": "lgtm"}, content_type="application/json"
    )

    assert response.status_code == 422 and "content_hash" in response.json()["fields"]
    assert not ChangeRequest.objects.get(pk=cr.pk).approvals.exists()
    assert ChangeRequest.objects.get(pk=cr.pk).state == "Submitted"
    assert AuditEvent.objects.count() == events
