"""Browser journey for change requests: an operator drafts and submits, a second user approves
with a comment (htmx, no reload), the change propagates through the real worker to the fleet
simulator, and the audit page and its CSV download show every step."""

import csv
import io

import pytest

from federation import propagation
from federation.approvals.models import ChangeRequest
from federation.models import PropagationRun
from tests.browser_fixtures import PASSWORD
from tests.federation.factories import federate_namespace, register_fleet, web_deployment
from tests.utils import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TARGETS = ["m128", "m131"]  # staging and dev: one approval is enough


def test_operator_submits_second_user_approves_change_propagates_and_is_audited(
    browser, page, live_server, login, operator, approver, celery_worker, fleet
):
    register_fleet(fleet, TARGETS)
    ns = federate_namespace("shop", TARGETS)
    run = propagation.propagate_revision(ns)
    wait_for(lambda: PropagationRun.objects.filter(pk=run.pk, finished_at__isnull=False).exists(), timeout=60)
    resource = web_deployment(name="web", placement={"clusters": TARGETS}, actor=operator)

    # the operator drafts a change request for the resource's current revision, and submits it
    login(page, operator)
    page.goto(f"{live_server.url}/changes/new/resource/{resource.pk}/")
    page.fill("#id_title", "Roll out web to staging and dev")
    page.click("button:has-text('Open draft')")
    page.wait_for_selector("#cr-state:has-text('Draft')")
    cr = ChangeRequest.objects.get(title="Roll out web to staging and dev")
    assert page.locator("#cr-diff").inner_text().count("create") >= 2
    assert "Drafted CR-" in page.locator("#page-messages").inner_text()
    page.click("button:has-text('Submit for approval')")
    page.wait_for_selector("#cr-state:has-text('Submitted')")
    # the draft's news is cleared with the swap (it stayed beside "Submitted CR-…")
    assert page.locator("#page-messages").is_hidden() and page.locator("#page-messages li").count() == 0
    assert page.locator("#approve-form").count() == 0, "the author gets no approve button"

    # a second user, an approver, sees it in the inbox and approves it with a comment, without a reload
    context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    context.set_default_timeout(15_000)
    other = context.new_page()
    try:
        login(other, approver, PASSWORD)
        other.wait_for_selector("#approvals-badge .badge:has-text('1')")
        other.click("nav >> text=Approvals")
        other.click("text=My inbox")
        other.click(f"a:has-text('CR-{cr.pk}')")
        other.evaluate("window.__noReload = true")
        # a reject without a reason is refused in place (the 400 fragment is swapped in, no reload)
        other.click("#reject-form button")
        other.wait_for_selector("#cr-error:has-text('Say why you reject')")
        assert other.evaluate("window.__noReload === true")
        other.fill("#approve-comment", "Looks good, ship it")
        other.click("#approve-form button")
        other.wait_for_selector("#cr-state:has-text('Applied')", timeout=90_000)
        assert other.evaluate("window.__noReload === true"), "approve swapped the panel in place"
        panel = other.locator("#cr-panel").inner_text()
        assert "Looks good, ship it" in panel and "m128" in panel and "m131" in panel
        assert other.locator("#cr-outcome").inner_text().count("OK") == 2
        for name in TARGETS:
            assert fleet.get_object(name, "apps/v1", "Deployment", "shop", "web") is not None

        # the audit page shows each step, and its CSV download contains them
        other.goto(f"{live_server.url}/audit/?object_type=approvals.changerequest&object_id={cr.pk}")
        listing = other.locator("main").inner_text()
        steps = [
            "approvals.change.create",
            "approvals.change.submit",
            "approvals.change.approve",
            "approvals.change.apply",
            "approvals.change.finish",
        ]
        for action in steps:
            assert action in listing, action
        with other.expect_download() as download_info:
            other.click("text=Export CSV")
        rows = list(csv.reader(io.StringIO(open(download_info.value.path(), encoding="utf-8-sig").read())))
        exported = " ".join(" ".join(row) for row in rows)
        for action in steps:
            assert action in exported, action
        assert "Looks good, ship it" in exported and operator.username in exported and approver.username in exported
    finally:
        context.close()
