import csv
import io

import pytest
from playwright.sync_api import expect

from fedportal.audit import record_event
from fedportal.models import AuditEvent

pytestmark = pytest.mark.django_db(transaction=True)


def test_viewer_filters_the_audit_log_with_htmx_opens_an_event_and_downloads_the_csv(page, live_server, login, viewer):
    record_event(
        "cluster.register",
        cluster="east-1",
        summary="registered east-1",
        after={"token": "s3cret", "labels": {"env": "prod"}},
    )
    record_event("cluster.unjoin", cluster="west-2", summary='=HYPERLINK("http://evil")')
    login(page, viewer)
    page.click("nav >> text=Audit")
    page.wait_for_selector("table.audit-events")
    assert page.locator("table.audit-events tbody tr").count() >= 3  # two events and the login

    page.fill("#id_cluster", "east-1")
    with page.expect_response(lambda r: "/audit/?" in r.url and r.request.headers.get("hx-request") == "true"):
        page.click("#audit-filter button[type=submit]")
    rows = page.locator("table.audit-events tbody tr")
    rows.first.wait_for()
    assert rows.count() == 1 and "registered east-1" in rows.first.inner_text()
    assert "cluster=east-1" in page.url  # hx-push-url: reload and back work

    page.fill("#id_since", "2026-12-02T00:00")
    page.fill("#id_until", "2026-12-01T00:00")
    page.click("#audit-filter button[type=submit]")
    page.wait_for_selector("text=Fix the filter")

    page.goto(f"{live_server.url}/audit/?cluster=east-1")
    page.click("table.audit-events tbody tr a")
    page.wait_for_selector("pre.after-json")
    detail = page.locator("pre.after-json").inner_text()
    assert "[redacted]" in detail and "s3cret" not in detail and '"env": "prod"' in detail

    page.goto(f"{live_server.url}/audit/")
    with page.expect_download() as download_info:
        page.click("text=Export CSV")
    text = open(download_info.value.path(), encoding="utf-8-sig").read()
    rows = list(csv.reader(io.StringIO(text)))
    summaries = [row[8] for row in rows[1:]]
    assert "registered east-1" in summaries
    assert '\'=HYPERLINK("http://evil")' in summaries


def test_audit_filters_live_in_the_url_and_the_export_follows_them(page, live_server, login, viewer):
    """Issue 23 item 6: action prefix with suggestions, hide log-ins, the query string drives the
    page (shareable, back button) and the CSV export exports exactly the filtered rows."""
    for n in range(3):
        record_event("cluster.register", cluster=f"c{n}", summary=f"registered c{n}")
    record_event("cluster.unjoin", cluster="c9", summary="unjoined c9")
    record_event("federation.resource.create", summary="created web")
    login(page, viewer)
    page.goto(f"{live_server.url}/audit/")
    page.wait_for_selector("table.audit-events")
    options = page.locator("#audit-actions option")
    offered = [options.nth(i).get_attribute("value") for i in range(options.count())]
    assert {"auth.login", "cluster.register", "cluster.unjoin", "federation.resource.create"} <= set(offered)

    page.fill("#id_action", "cluster.")
    page.click("#audit-filter button[type=submit]")
    page.wait_for_url("**/audit/?*action=cluster.*")
    expect(page.locator("table.audit-events tbody tr")).to_have_count(4)
    assert "action=cluster." in page.locator("#audit-export").get_attribute("href")
    with page.expect_download() as download_info:
        page.click("#audit-export")
    rows = list(csv.reader(io.StringIO(open(download_info.value.path(), encoding="utf-8-sig").read())))
    assert sorted(row[8] for row in rows[1:]) == ["registered c0", "registered c1", "registered c2", "unjoined c9"]

    page.fill("#id_action", "")
    page.check("#id_hide_logins")
    page.click("#audit-filter button[type=submit]")
    page.wait_for_url("**hide_logins=on**")
    # the 5 above, the export, and the audited creation of the test's users; no log-in
    shown = AuditEvent.objects.exclude(action__in=("auth.login", "auth.logout")).count()
    assert shown >= 6 and AuditEvent.objects.filter(action="auth.login").exists()
    expect(page.locator("table.audit-events tbody tr")).to_have_count(shown)
    assert "logged in" not in page.locator("table.audit-events").inner_text()

    page.go_back()
    expect(page.locator("table.audit-events tbody tr")).to_have_count(4)
    assert page.input_value("#id_action") == "cluster."
    assert not page.is_checked("#id_hide_logins")

    shared = page.context.new_page()
    shared.goto(page.url)
    shared.wait_for_selector("table.audit-events")
    assert shared.locator("table.audit-events tbody tr").count() == 4
    assert shared.input_value("#id_action") == "cluster."
