"""Change-request pages: each as a full page, as an htmx fragment and as a user without permission."""

import pytest
from django.urls import reverse

from federation.approvals import services
from federation.approvals.choices import ChangeState
from federation.approvals.models import ChangeRequest
from tests.approvals.factories import draft, submitted

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def login(client, user):
    client.force_login(user)
    return client


# --- list -------------------------------------------------------------------------------------------


def test_list_full_page_filters_and_fragment(client, dev_resource, prod_resource, operator, viewer):
    a = draft(dev_resource, operator)
    b = submitted(prod_resource, operator)
    login(client, viewer)
    page = client.get(reverse("approvals:change_list"))
    assert page.status_code == 200 and b"<html" in page.content
    assert f"CR-{a.pk}".encode() in page.content and f"CR-{b.pk}".encode() in page.content
    fragment = client.get(reverse("approvals:change_list"), {"state": "Submitted"}, **HX)
    assert fragment.status_code == 200 and b"<html" not in fragment.content
    assert f"CR-{b.pk}<".encode() in fragment.content and f"CR-{a.pk}<".encode() not in fragment.content
    by_cluster = client.get(reverse("approvals:change_list"), {"cluster": "prod-a"}, **HX)
    assert f"CR-{b.pk}<".encode() in by_cluster.content and f"CR-{a.pk}<".encode() not in by_cluster.content
    by_author = client.get(reverse("approvals:change_list"), {"author": "nobody-here"}, **HX)
    assert b"No change requests match" in by_author.content


def test_list_bad_filter_is_a_form_error_not_a_500(client, viewer):
    login(client, viewer)
    response = client.get(reverse("approvals:change_list"), {"state": "Bogus", "page": "x"})
    assert response.status_code == 200 and b"errorlist" in response.content


def test_list_paginates_with_a_fixed_number_of_queries(
    client, dev_resource, operator, viewer, django_assert_max_num_queries
):
    for _ in range(30):
        ChangeRequest.objects.create(
            kind="edit",
            title="bulk",
            resource=dev_resource,
            resource_repr=str(dev_resource),
            proposed_revision=dev_resource.current_revision,
            author=operator,
            author_name=operator.username,
        )
    login(client, viewer)
    with django_assert_max_num_queries(12):
        first = client.get(reverse("approvals:change_list"), **HX)
    with django_assert_max_num_queries(12):
        second = client.get(reverse("approvals:change_list"), {"page": 2}, **HX)
    assert b"Page 1 of 2" in first.content and b"Page 2 of 2" in second.content


def test_list_flags_emergency_applies(client, dev_resource, admin_user, viewer):
    services.emergency_apply(dev_resource, actor=admin_user, reason="outage")
    login(client, viewer)
    response = client.get(reverse("approvals:change_list"), {"emergency": "yes"})
    assert b"EMERGENCY" in response.content


def test_list_without_role_is_forbidden(client, nobody):
    login(client, nobody)
    assert client.get(reverse("approvals:change_list")).status_code == 403
    assert client.get(reverse("approvals:change_list"), **HX).status_code == 403


# --- inbox and badge ------------------------------------------------------------------------------


def test_inbox_shows_submitted_requests_waiting_for_me_excluding_my_own(
    client, dev_resource, prod_resource, operator, approver, admin_user, django_assert_max_num_queries
):
    waiting = submitted(dev_resource, operator)
    own = submitted(prod_resource, admin_user)
    draft(dev_resource, operator)
    login(client, admin_user)
    with django_assert_max_num_queries(12):
        response = client.get(reverse("approvals:inbox"))
    assert f"CR-{waiting.pk}<".encode() in response.content and f"CR-{own.pk}<".encode() not in response.content
    login(client, approver)
    fragment = client.get(reverse("approvals:inbox"), **HX)
    assert b"<html" not in fragment.content and f"CR-{own.pk}<".encode() in fragment.content


def test_inbox_drops_a_request_i_approved(client, prod_resource, operator, approver):
    cr = submitted(prod_resource, operator)
    services.approve(cr, actor=approver)
    login(client, approver)
    assert f"CR-{cr.pk}<".encode() not in client.get(reverse("approvals:inbox")).content


def test_inbox_is_for_approvers_only(client, operator, viewer):
    for user in (operator, viewer):
        login(client, user)
        assert client.get(reverse("approvals:inbox")).status_code == 403
        assert client.get(reverse("approvals:inbox"), **HX).status_code == 403


def test_badge_counts_the_inbox(client, dev_resource, operator, approver, viewer, nobody):
    submitted(dev_resource, operator)
    login(client, approver)
    assert b">1<" in client.get(reverse("approvals:badge"), **HX).content
    assert b">1<" in client.get(reverse("approvals:badge")).content
    login(client, viewer)
    assert b"badge" not in client.get(reverse("approvals:badge"), **HX).content
    login(client, nobody)
    assert client.get(reverse("approvals:badge"), **HX).status_code == 403


def test_home_panel_full_and_fragment(client, dev_resource, operator, approver, nobody):
    submitted(dev_resource, operator)
    login(client, approver)
    assert b"1</strong> waiting" in client.get(reverse("approvals:summary"), **HX).content
    assert b"<html" in client.get(reverse("approvals:summary")).content
    login(client, nobody)
    assert client.get(reverse("approvals:summary")).status_code == 403


def test_nav_has_the_approvals_link_with_an_htmx_badge(client, approver):
    login(client, approver)
    response = client.get(reverse("home"))
    assert (
        reverse("approvals:badge").encode() in response.content and b'hx-trigger="load, every 30s"' in response.content
    )
    assert reverse("approvals:summary").encode() in response.content, "the home panel loads the change-request summary"


# --- detail -----------------------------------------------------------------------------------------


def test_detail_shows_diff_preflight_approvals_and_audit_trail(client, prod_resource, operator, approver):
    cr = submitted(prod_resource, operator)
    services.approve(cr, actor=approver, comment="fine by me")
    login(client, approver)
    response = client.get(reverse("approvals:change_detail", args=[cr.pk]))
    body = response.content.decode()
    assert response.status_code == 200
    for text in ("Approvals: 1 of 2", "fine by me", "prod-a", "Preflight", "approvals.change.submit", "Audit trail"):
        assert text in body
    fragment = client.get(reverse("approvals:change_detail", args=[cr.pk]), **HX)
    assert b"<html" not in fragment.content and b'id="cr-panel"' in fragment.content


def test_detail_missing_is_404_and_no_role_is_403(client, viewer, nobody, dev_resource, operator):
    cr = draft(dev_resource, operator)
    login(client, viewer)
    assert client.get(reverse("approvals:change_detail", args=[999999])).status_code == 404
    login(client, nobody)
    assert client.get(reverse("approvals:change_detail", args=[cr.pk])).status_code == 403
    assert client.get(reverse("approvals:change_detail", args=[cr.pk]), **HX).status_code == 403


def test_detail_offers_buttons_per_role(client, dev_resource, operator, approver, viewer):
    cr = draft(dev_resource, operator)
    login(client, operator)
    assert b"Submit for approval" in client.get(reverse("approvals:change_detail", args=[cr.pk])).content
    login(client, viewer)
    body = client.get(reverse("approvals:change_detail", args=[cr.pk])).content
    assert b"Submit for approval" not in body and b"Cancel request" not in body
    services.submit(cr, actor=operator)
    login(client, approver)
    body = client.get(reverse("approvals:change_detail", args=[cr.pk])).content
    assert b'id="approve-form"' in body and b'id="reject-form"' in body
    login(client, operator)
    assert b'id="approve-form"' not in client.get(reverse("approvals:change_detail", args=[cr.pk])).content


# --- transitions ------------------------------------------------------------------------------------


def test_submit_without_js_redirects_back(client, dev_resource, operator):
    cr = draft(dev_resource, operator)
    login(client, operator)
    response = client.post(reverse("approvals:change_submit", args=[cr.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("approvals:change_detail", args=[cr.pk])
    cr.refresh_from_db()
    assert cr.state == ChangeState.SUBMITTED


def test_htmx_approve_with_comment_swaps_the_panel(client, prod_resource, operator, approver):
    cr = submitted(prod_resource, operator)
    login(client, approver)
    response = client.post(
        reverse("approvals:change_approve", args=[cr.pk]), {"comment": "LGTM", "content_hash": cr.proposed_hash}, **HX
    )
    assert response.status_code == 200 and b"<html" not in response.content
    assert (
        b'id="cr-panel"' in response.content
        and b"LGTM" in response.content
        and b"Approvals: 1 of 2" in response.content
    )


def test_htmx_reject_without_comment_is_a_400_with_the_reason(client, dev_resource, operator, approver):
    cr = submitted(dev_resource, operator)
    login(client, approver)
    response = client.post(reverse("approvals:change_reject", args=[cr.pk]), {"comment": ""}, **HX)
    assert response.status_code == 400 and b"Say why you reject" in response.content
    response = client.post(reverse("approvals:change_reject", args=[cr.pk]), {"comment": "no"}, **HX)
    assert response.status_code == 200 and b"Rejected" in response.content


def test_illegal_transition_is_a_409_with_the_reason(client, dev_resource, operator, approver):
    cr = draft(dev_resource, operator)
    login(client, approver)
    seen = {"content_hash": cr.proposed_hash}
    response = client.post(reverse("approvals:change_approve", args=[cr.pk]), seen, **HX)
    assert response.status_code == 409 and b"only a Submitted request can be approved" in response.content
    full = client.post(reverse("approvals:change_approve", args=[cr.pk]), seen)
    assert full.status_code == 409 and b"<html" in full.content
    login(client, operator)
    assert client.post(reverse("approvals:change_apply", args=[cr.pk])).status_code == 409


def test_author_approving_own_request_is_403_with_the_reason(client, dev_resource, admin_user):
    cr = submitted(dev_resource, admin_user)
    login(client, admin_user)
    response = client.post(reverse("approvals:change_approve", args=[cr.pk]), {"content_hash": cr.proposed_hash}, **HX)
    assert response.status_code == 403 and b"another approver" in response.content


def test_transitions_need_their_role(client, dev_resource, operator, viewer, approver):
    cr = draft(dev_resource, operator)
    login(client, viewer)
    for name in (
        "change_submit",
        "change_approve",
        "change_reject",
        "change_cancel",
        "change_apply",
        "change_override",
    ):
        assert client.post(reverse(f"approvals:{name}", args=[cr.pk]), **HX).status_code == 403, name
    login(client, approver)
    assert client.post(reverse("approvals:change_submit", args=[cr.pk])).status_code == 403
    cr.refresh_from_db()
    assert cr.state == ChangeState.DRAFT


def test_cancel_and_comment(client, dev_resource, operator, viewer):
    cr = draft(dev_resource, operator)
    login(client, viewer)
    assert client.post(reverse("approvals:change_comment", args=[cr.pk]), {"body": "hm"}, **HX).status_code == 200
    empty = client.post(reverse("approvals:change_comment", args=[cr.pk]), {"body": ""}, **HX)
    assert empty.status_code == 400 and b"Write a comment." in empty.content
    # a null character: the form says so (the page used to say "at most 5000 characters")
    nul = client.post(reverse("approvals:change_comment", args=[cr.pk]), {"body": "x\x00"}, **HX)
    assert nul.status_code == 400 and b"Null characters are not allowed." in nul.content
    assert cr.comments.count() == 1
    login(client, operator)
    response = client.post(reverse("approvals:change_cancel", args=[cr.pk]), {"reason": "not needed"})
    assert response.status_code == 302
    cr.refresh_from_db()
    assert cr.state == ChangeState.CANCELLED and cr.comments.count() == 1


def test_refresh_and_revise_from_current(client, dev_resource, operator):
    from federation import services as federation_services
    from tests.federation.factories import WEB_TEMPLATE

    cr = draft(dev_resource, operator)
    new = federation_services.update_resource(
        dev_resource,
        template={**WEB_TEMPLATE, "spec": {**WEB_TEMPLATE["spec"], "replicas": 4}},
        placement={"clusters": ["dev-a"]},
        actor=operator,
    )
    login(client, operator)
    body = client.get(reverse("approvals:change_detail", args=[cr.pk])).content
    assert b"newer revision" in body
    assert client.post(reverse("approvals:change_refresh", args=[cr.pk]), **HX).status_code == 200
    assert client.post(reverse("approvals:change_refresh", args=[cr.pk]), {"revise": "1"}, **HX).status_code == 200
    cr.refresh_from_db()
    assert cr.proposed_revision == new


# --- create, unjoin, emergency ----------------------------------------------------------------------


def test_request_change_page_opens_a_draft(client, dev_resource, operator):
    login(client, operator)
    url = reverse("approvals:change_create", args=[dev_resource.pk])
    page = client.get(url)
    assert page.status_code == 200 and b"Open draft" in page.content
    assert b"<html" not in client.get(url, **HX).content
    response = client.post(url, {"title": "Roll out web", "description": "first time"})
    cr = ChangeRequest.objects.get(title="Roll out web")
    assert response.status_code == 302 and response["Location"] == reverse("approvals:change_detail", args=[cr.pk])
    assert cr.state == ChangeState.DRAFT and cr.author == operator
    htmx = client.post(url, {"title": "again"}, **HX)
    assert htmx.status_code == 200 and htmx["HX-Redirect"].startswith("/changes/")


def test_request_change_with_unknown_revision_is_a_form_error(client, dev_resource, operator, viewer):
    login(client, operator)
    url = reverse("approvals:change_create", args=[dev_resource.pk])
    response = client.post(url, {"revision": 99}, **HX)
    assert response.status_code == 400 and b"has no revision 99" in response.content
    assert client.get(reverse("approvals:change_create", args=[999999])).status_code == 404
    login(client, viewer)
    assert client.get(url).status_code == 403


def test_emergency_page_is_admin_only_and_needs_a_reason(client, dev_resource, operator, admin_user):
    url = reverse("approvals:emergency_apply", args=[dev_resource.pk])
    login(client, operator)
    assert client.get(url).status_code == 403 and client.post(url, {"reason": "x"}).status_code == 403
    login(client, admin_user)
    assert client.get(url).status_code == 200 and b"<html" not in client.get(url, **HX).content
    assert client.post(url, {"reason": ""}).status_code == 400
    response = client.post(url, {"reason": "INC-7"})
    cr = ChangeRequest.objects.get(emergency=True)
    assert response.status_code == 302 and cr.state == ChangeState.APPLYING


def test_unjoin_request_page(client, dev_cluster, operator, admin_user):
    url = reverse("approvals:change_create_unjoin", args=[dev_cluster.pk])
    login(client, operator)
    assert client.get(url).status_code == 403
    login(client, admin_user)
    assert client.get(url).status_code == 200 and b"<html" not in client.get(url, **HX).content
    assert client.post(url, {"reason": "decommission"}).status_code == 302
    assert ChangeRequest.objects.get(kind="unjoin").cluster_name == "dev-a"


def test_request_change_page_prefills_kind_and_revision_from_the_query(client, dev_resource, operator):
    login(client, operator)
    response = client.get(
        reverse("approvals:change_create", args=[dev_resource.pk]), {"kind": "rollback", "revision": "1"}
    )
    assert b'<option value="rollback" selected>' in response.content


def test_list_counts_only_valid_approvals(client, prod_resource, operator, approver, viewer):
    from federation import services as federation_services
    from tests.federation.factories import WEB_TEMPLATE

    cr = submitted(prod_resource, operator)
    services.approve(cr, actor=approver)
    new = federation_services.update_resource(
        prod_resource,
        template={**WEB_TEMPLATE, "spec": {**WEB_TEMPLATE["spec"], "replicas": 6}},
        placement={"clusters": ["prod-a", "dev-a"]},
        actor=operator,
    )
    services.revise_change_request(cr, actor=operator, revision=new)
    login(client, viewer)
    assert b"<td>0 / 2</td>" in client.get(reverse("approvals:change_list"), **HX).content


def test_detail_of_an_applied_request_shows_the_per_cluster_outcome(client, dev_resource, operator, approver, viewer):
    cr = services.sync_change_request(services.approve(submitted(dev_resource, operator), actor=approver))
    login(client, viewer)
    body = client.get(reverse("approvals:change_detail", args=[cr.pk])).content.decode()
    assert 'id="cr-outcome"' in body and "ClusterNotReady" in body and "Applied" in body
    # what the header says of the clusters is when the request was drafted (it said "never propagated")
    assert "drafted before the resource was first propagated" in body and "never propagated" not in body


def test_detail_of_unjoin_and_emergency_requests(client, dev_cluster, dev_resource, admin_user, viewer):
    unjoin = services.create_change_request(kind="unjoin", cluster=dev_cluster, actor=admin_user)
    emergency = services.emergency_apply(dev_resource, actor=admin_user, reason="INC-9")
    login(client, viewer)
    assert b"cluster dev-a" in client.get(reverse("approvals:change_detail", args=[unjoin.pk])).content
    body = client.get(reverse("approvals:change_detail", args=[emergency.pk])).content
    assert b"EMERGENCY" in body and b"INC-9" in body and b'hx-trigger="every 2s"' in body


def test_an_action_clears_the_pages_old_flash_and_the_panels_refresh_does_not(client, dev_resource, operator):
    cr = draft(dev_resource, operator)
    login(client, operator)
    refresh = client.get(reverse("approvals:change_detail", args=[cr.pk]), **HX)
    assert b"hx-swap-oob" not in refresh.content  # it would clear a message every 10 s
    submitted = client.post(reverse("approvals:change_submit", args=[cr.pk]), **HX)
    assert b'id="page-messages" role="status" hidden hx-swap-oob="true"' in submitted.content
    page = client.get(reverse("approvals:change_detail", args=[cr.pk])).content.decode()
    assert page.count('id="page-messages"') == 1  # the full page has the one from base.html only
