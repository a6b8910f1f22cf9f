import csv
import io

import pytest

from fedportal.audit import record_event

pytestmark = pytest.mark.django_db(transaction=True)


def test_viewer_filters_the_audit_log_with_htmx_opens_an_event_and_downloads_the_csv(page, live_server, login, viewer):
    record_event("cluster.register", cluster="east-1", summary="registered east-1", after={"token": "s3cret", "labels": {"env": "prod"}})
    record_event("cluster.unjoin", cluster="west-2", summary="=HYPERLINK(\"http://evil\")")
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
    assert "'=HYPERLINK(\"http://evil\")" in summaries
