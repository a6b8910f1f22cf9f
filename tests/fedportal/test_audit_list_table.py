"""The audit log as a django-tables2 table: sortable columns, and pages whose query count does not
grow with the log (the filter, pagination, export and bad-filter cases are in test_audit_views)."""

import pytest
from django.urls import reverse

from fedportal.tables import records

pytestmark = pytest.mark.django_db
LIST_URL = reverse("audit:event_list")


def ids(response) -> list[int]:
    assert response.status_code == 200
    return [event.pk for event in records(response.context["table"])]


def test_sorts_by_action_both_ways_newest_first_by_default(viewer_client, make_events):
    b = make_events(1, action="b.thing")[0]
    a = make_events(1, action="a.thing")[0]
    c = make_events(1, action="c.thing")[0]
    assert ids(viewer_client.get(LIST_URL, {"action": "a.thing"})) == [a.pk]
    everything = ids(viewer_client.get(LIST_URL))
    assert everything == sorted(everything, reverse=True)
    shown = [pk for pk in ids(viewer_client.get(LIST_URL, {"sort": "action"})) if pk in (a.pk, b.pk, c.pk)]
    assert shown == [a.pk, b.pk, c.pk]
    shown = [pk for pk in ids(viewer_client.get(LIST_URL, {"sort": "-action"})) if pk in (a.pk, b.pk, c.pk)]
    assert shown == [c.pk, b.pk, a.pk]
    body = viewer_client.get(LIST_URL, {"sort": "action"}).content.decode()
    assert 'href="?sort=-action" hx-get="?sort=-action" hx-target="#audit-rows" hx-swap="innerHTML"' in body


def test_a_sorted_page_keeps_the_filter_and_a_fixed_query_count(
    viewer_client, make_events, django_assert_max_num_queries
):
    make_events(3, cluster="east-1")
    with django_assert_max_num_queries(6) as few:
        viewer_client.get(LIST_URL, {"cluster": "east-1", "sort": "created_at"})
    events = make_events(120, cluster="east-1")
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = viewer_client.get(LIST_URL, {"cluster": "east-1", "sort": "created_at", "page": 2})
    assert ids(response)[0] == events[47].pk  # 3 older ones, then 47 of these on page 1
    assert 'href="?cluster=east-1&amp;sort=created_at&amp;page=3"' in response.content.decode()
