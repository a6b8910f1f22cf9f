import csv
import io
import time
from datetime import timedelta

import pytest
from django.http import StreamingHttpResponse
from django.urls import reverse
from django.utils import timezone

from fedportal.audit import record_event
from fedportal.csv_export import BOM
from fedportal.models import AuditEvent
from fedportal.tables import records

pytestmark = pytest.mark.django_db

LIST_URL = reverse("audit:event_list")
EXPORT_URL = reverse("audit:event_export")


def listed_ids(response) -> list[int]:
    return [event.pk for event in records(response.context["table"])]


def read_csv(response) -> list[list[str]]:
    text = b"".join(response.streaming_content).decode("utf-8")
    assert text.startswith(BOM)
    return list(csv.reader(io.StringIO(text[len(BOM) :])))


# --- the list page -------------------------------------------------------------------------------


def test_viewer_sees_the_audit_page_newest_first(viewer_client, make_events):
    events = make_events(3)
    response = viewer_client.get(LIST_URL)
    assert response.status_code == 200
    assert listed_ids(response)[:3] == [e.pk for e in reversed(events)]
    body = response.content.decode()
    assert "<html" in body and 'id="audit-rows"' in body
    assert reverse("audit:event_detail", args=[events[0].pk]) in body


def test_htmx_request_gets_only_the_rows_fragment(viewer_client, make_events):
    make_events(2, summary="fragment row")
    response = viewer_client.get(LIST_URL, {"action": "test.event"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body and "<form" not in body
    assert 'class="data audit-events"' in body and "fragment row" in body
    assert "HX-Request" in response["Vary"]


def test_user_without_a_role_gets_403_on_every_audit_view(nobody_client, make_events):
    event = make_events(1)[0]
    for url in (LIST_URL, EXPORT_URL, reverse("audit:event_detail", args=[event.pk])):
        assert nobody_client.get(url).status_code == 403
        assert nobody_client.get(url, HTTP_HX_REQUEST="true").status_code == 403


def test_anonymous_user_is_sent_to_login(client):
    response = client.get(LIST_URL)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"actor": "alice"}, {"alice-login"}),
        ({"action": "cluster.register"}, {"register"}),
        ({"action": "cluster.*"}, {"register", "unjoin"}),
        ({"object_type": "clusters.cluster", "object_id": "7"}, {"unjoin"}),
        ({"cluster": "east-1"}, {"register"}),
    ],
)
def test_filters_narrow_the_list(viewer_client, django_user_model, params, expected):
    alice = django_user_model.objects.create_user("alice")
    record_event("auth.login", actor=alice, summary="alice-login")
    record_event("cluster.register", object_type="clusters.cluster", object_id=3, cluster="east-1", summary="register")
    record_event("cluster.unjoin", object_type="clusters.cluster", object_id=7, cluster="west-2", summary="unjoin")
    record_event("clusterx.other", summary="other")
    response = viewer_client.get(LIST_URL, params)
    assert response.status_code == 200
    assert {event.summary for event in records(response.context["table"])} == expected


def test_time_range_filter_is_inclusive_since_and_exclusive_until(viewer_client, make_events):
    older = make_events(1, summary="older")[0]
    time.sleep(0.01)
    middle = timezone.now()
    time.sleep(0.01)
    newer = make_events(1, summary="newer")[0]
    fmt = "%Y-%m-%dT%H:%M:%S.%f"
    since = viewer_client.get(LIST_URL, {"since": middle.strftime(fmt)})
    until = viewer_client.get(LIST_URL, {"until": middle.strftime(fmt)})
    assert listed_ids(since) == [newer.pk]
    assert older.pk in listed_ids(until) and newer.pk not in listed_ids(until)


def test_a_moment_given_with_any_offset_is_searched_as_that_moment(viewer_client, make_events):
    # ISO 8601 takes an offset up to 23:59, PostgreSQL one up to 15:59: -19:31 came from a fuzzer, as a 500
    event = make_events(1, summary="now")[0]
    offset = timezone.get_fixed_timezone(-(19 * 60 + 31))
    hour_ago = (event.created_at - timedelta(hours=1)).astimezone(offset).isoformat()
    assert hour_ago.endswith("-19:31")
    since = viewer_client.get(LIST_URL, {"since": hour_ago})
    until = viewer_client.get(LIST_URL, {"until": hour_ago})
    assert not since.context["form"].errors and event.pk in listed_ids(since)
    assert not until.context["form"].errors and event.pk not in listed_ids(until)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "yesterday-ish"}, "since"),
        ({"until": "2026-13-45T99:00"}, "until"),
        ({"since": "2026-11-02T00:00", "until": "2026-11-01T00:00"}, "until"),
        ({"action": "clu*ster"}, "action"),
        ({"action": "a**"}, "action"),  # was taken for a search of actions starting with "a*"
        ({"actor": "x" * 151}, "actor"),
        ({"since": "0001-01-01T00:00:00+01:00"}, "since"),  # the same moment in UTC is in year 0
    ],
)
def test_bad_filter_values_are_form_errors_not_500(viewer_client, make_events, params, field):
    make_events(1)
    response = viewer_client.get(LIST_URL, params)
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert records(response.context["table"]) == []
    assert "Fix the filter" in response.content.decode()
    fragment = viewer_client.get(LIST_URL, params, HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and "Fix the filter" in fragment.content.decode()


def test_list_is_paginated_and_bad_page_numbers_do_not_fail(viewer_client, make_events):
    events = make_events(60)
    first = viewer_client.get(LIST_URL, {"action": "test.event"})
    second = viewer_client.get(LIST_URL, {"action": "test.event", "page": 2})
    assert len(listed_ids(first)) == 50
    assert listed_ids(second) == [e.pk for e in reversed(events[:10])]
    assert "page=2" in first.content.decode()
    for bad in ("zero", "-1", "9999"):
        assert viewer_client.get(LIST_URL, {"page": bad}).status_code == 200


def test_pagination_links_keep_the_filter(viewer_client, make_events):
    make_events(60, action="cluster.poll")
    body = viewer_client.get(LIST_URL, {"action": "cluster.poll"}).content.decode()
    assert "action=cluster.poll&amp;page=2" in body
    assert 'hx-get="?action=cluster.poll&amp;page=2"' in body


def test_list_runs_a_fixed_number_of_queries(viewer_client, make_events, django_assert_max_num_queries):
    make_events(3)
    with django_assert_max_num_queries(6) as few:
        viewer_client.get(LIST_URL)
    make_events(120, cluster="east-1")
    with django_assert_max_num_queries(len(few.captured_queries)):
        viewer_client.get(LIST_URL, {"page": 2})
    with django_assert_max_num_queries(len(few.captured_queries)):
        viewer_client.get(LIST_URL, {"cluster": "east-1"}, HTTP_HX_REQUEST="true")


# --- the detail page -----------------------------------------------------------------------------


def test_detail_shows_before_and_after_with_secrets_redacted(viewer_client):
    event = record_event(
        "cluster.rotate_credentials",
        cluster="east-1",
        before={"token": "old-secret-token", "server": "https://a"},
        after={"token": "new-secret-token", "server": "https://b"},
    )
    response = viewer_client.get(reverse("audit:event_detail", args=[event.pk]))
    body = response.content.decode()
    assert response.status_code == 200
    assert "https://a" in body and "https://b" in body and "[redacted]" in body
    assert "secret-token" not in body
    assert event.hash in body


def test_detail_of_a_missing_event_is_404(viewer_client):
    assert viewer_client.get(reverse("audit:event_detail", args=[999999])).status_code == 404


# --- the CSV export ------------------------------------------------------------------------------


def test_export_streams_the_filtered_set_oldest_first(viewer_client, make_events):
    wanted = make_events(3, action="cluster.register", cluster="east-1")
    make_events(2, action="cluster.unjoin")
    response = viewer_client.get(EXPORT_URL, {"action": "cluster.register"})
    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="audit-events-')
    rows = read_csv(response)
    assert rows[0][:4] == ["ID", "Time (UTC)", "Actor", "Action"]
    assert [int(row[0]) for row in rows[1:]] == [e.pk for e in wanted]
    assert all(row[7] == "east-1" for row in rows[1:])


def test_export_neutralises_formula_injection(viewer_client):
    payloads = ['=HYPERLINK("http://evil")', "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd", "  =1+1"]
    for payload in payloads:
        record_event("test.injection", summary=payload, object_repr=payload)
    rows = read_csv(viewer_client.get(EXPORT_URL, {"action": "test.injection"}))
    summaries = [row[8] for row in rows[1:]]
    assert summaries == ["'" + payload for payload in payloads]
    assert all(row[6].startswith("'") for row in rows[1:])


def test_export_is_itself_audited_with_the_filter(viewer_client, viewer, make_events):
    make_events(2)
    response = viewer_client.get(EXPORT_URL, {"actor": "system", "action": "test.*"})
    rows = read_csv(response)
    export = AuditEvent.objects.filter(action="audit.export").get()
    assert export.actor_name == viewer.username
    assert export.after["filter"] == {"actor": "system", "action": "test.*"}
    assert export.request_id == response["X-Request-ID"]
    assert "actor=system" in export.summary
    assert export.pk not in [int(row[0]) for row in rows[1:]], "the export's own event is not part of its file"


def test_export_with_a_bad_filter_is_400_with_the_reason(viewer_client):
    response = viewer_client.get(EXPORT_URL, {"since": "not-a-date"})
    assert response.status_code == 400
    assert "since" in response.content.decode()
    assert not AuditEvent.objects.filter(action="audit.export").exists()


def test_export_reads_rows_in_chunks_through_values_list(viewer_client, make_events, django_assert_max_num_queries):
    make_events(5)
    response = viewer_client.get(EXPORT_URL, {"action": "test.event"})
    with django_assert_max_num_queries(2) as queries:
        rows = read_csv(response)
    assert len(rows) == 6
    sql = queries.captured_queries[-1]["sql"]
    assert '"fedportal_auditevent"."before"' in sql and "ORDER BY" in sql and "LIMIT" not in sql


def test_export_link_on_the_page_carries_the_filter_but_not_the_page(viewer_client, make_events):
    make_events(60, action="cluster.poll")
    body = viewer_client.get(LIST_URL, {"action": "cluster.poll", "page": 2}).content.decode()
    assert f'href="{EXPORT_URL}?action=cluster.poll"' in body


def test_detail_and_export_answer_htmx_requests_like_full_requests(viewer_client, make_events):
    event = make_events(1)[0]
    detail = viewer_client.get(reverse("audit:event_detail", args=[event.pk]), HTTP_HX_REQUEST="true")
    assert detail.status_code == 200 and event.action in detail.content.decode()
    export = viewer_client.get(EXPORT_URL, {"action": "test.event"}, HTTP_HX_REQUEST="true")
    assert export.status_code == 200 and len(read_csv(export)) == 2


def test_operator_approver_and_admin_can_read_the_audit_log(client, operator, approver, admin_user):
    for user in (operator, approver, admin_user):
        client.force_login(user)
        assert client.get(LIST_URL).status_code == 200


# --- issue 23 item 6: prefix match, hide log-ins, the export follows the page's filter -------------


def test_action_filter_matches_a_prefix_and_hide_logins_drops_sign_ins_and_outs(viewer_client, make_events):
    registered = make_events(2, action="cluster.register")
    unjoined = make_events(1, action="cluster.unjoin")
    make_events(1, action="federation.resource.create")
    login = record_event("auth.login", summary="someone logged in")
    failed = record_event("auth.login_failed", summary="a failed log-in")
    assert listed_ids(viewer_client.get(LIST_URL, {"action": "cluster."})) == [
        e.pk for e in reversed(registered + unjoined)
    ]
    assert listed_ids(viewer_client.get(LIST_URL, {"action": "cluster.*"})) == [
        e.pk for e in reversed(registered + unjoined)
    ]
    # "auth.login" and not "auth": creating the test's users is audited too (auth.user.create)
    shown = listed_ids(viewer_client.get(LIST_URL, {"action": "auth.login", "hide_logins": "on"}))
    assert shown == [failed.pk]
    assert login.pk in listed_ids(viewer_client.get(LIST_URL, {"action": "auth.login"}))
    rows = read_csv(viewer_client.get(EXPORT_URL, {"action": "auth.login", "hide_logins": "on"}))
    assert [int(row[0]) for row in rows[1:]] == [failed.pk]


def test_list_offers_the_known_actions_and_the_fragment_carries_the_export_link(viewer_client, make_events):
    make_events(1, action="cluster.register")
    make_events(1, action="cluster.unjoin")
    body = viewer_client.get(LIST_URL).content.decode()
    assert '<option value="cluster.register"><option value="cluster.unjoin"></datalist>' in body
    fragment = viewer_client.get(LIST_URL, {"action": "cluster.", "hide_logins": "on"}, HTTP_HX_REQUEST="true")
    assert (
        f'id="audit-export" href="{EXPORT_URL}?action=cluster.&amp;hide_logins=on" download hx-swap-oob="true"'
        in fragment.content.decode()
    )
