"""The change-request list as a django-tables2 table: sorting, filters in the query string (kind is
new), pages, the CSV export honouring filter and sort, a bad filter refused with its reason, and a
fixed number of queries however many rows."""

import csv
import io

import pytest
from django.urls import reverse

from federation.approvals.models import ChangeRequest
from fedportal.tables import records
from tests.approvals.factories import draft, submitted

pytestmark = pytest.mark.django_db
LIST = reverse("approvals:change_list")
HX = {"HTTP_HX_REQUEST": "true"}


def ids(response) -> list[int]:
    assert response.status_code == 200
    return [cr.pk for cr in records(response.context["table"])]


def read_csv(response) -> list[list[str]]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))


def bulk(resource, author, n, **kw):
    return [
        ChangeRequest.objects.create(
            kind=kw.get("kind", "edit"),
            title=f"bulk {i}",
            resource=resource,
            resource_repr=str(resource),
            proposed_revision=resource.current_revision,
            author=author,
            author_name=author.username,
        )
        for i in range(n)
    ]


def test_sorts_by_a_column_both_ways(client, dev_resource, prod_resource, operator, viewer):
    a = draft(dev_resource, operator)
    b = submitted(prod_resource, operator)
    client.force_login(viewer)
    assert ids(client.get(LIST)) == [b.pk, a.pk]  # newest first
    assert ids(client.get(LIST, {"sort": "id"})) == [a.pk, b.pk]
    assert ids(client.get(LIST, {"sort": "state"})) == [a.pk, b.pk]  # Draft before Submitted
    assert ids(client.get(LIST, {"sort": "-state"})) == [b.pk, a.pk]
    body = client.get(LIST, {"sort": "state"}, **HX).content.decode()
    assert 'href="?sort=-state"' in body and 'aria-sort="ascending"' in body
    assert '<input type="hidden" name="sort" value="state" form="change-filters">' in body


def test_filters_by_kind_and_state_in_the_query_string_and_pages(client, dev_resource, operator, viewer):
    edits = bulk(dev_resource, operator, 30)
    deletes = bulk(dev_resource, operator, 2, kind="delete")
    client.force_login(viewer)
    assert ids(client.get(LIST, {"kind": "delete"})) == [cr.pk for cr in reversed(deletes)]
    second = client.get(LIST, {"kind": "edit", "sort": "id", "page": 2})
    assert ids(second) == [cr.pk for cr in edits[25:]]
    assert "Page 2 of 2" in second.content.decode()
    assert 'href="?kind=edit&amp;sort=id&amp;page=1"' in second.content.decode()


def test_csv_export_honours_the_filter_and_the_sort(client, dev_resource, prod_resource, operator, viewer):
    a = draft(dev_resource, operator)
    b = submitted(prod_resource, operator)
    c = submitted(dev_resource, operator)
    client.force_login(viewer)
    rows = read_csv(client.get(LIST, {"state": "Submitted", "sort": "id", "format": "csv"}))
    assert rows[0][:5] == ["ID", "Title", "Kind", "Subject", "State"]
    assert [int(row[0]) for row in rows[1:]] == [b.pk, c.pk] and a.pk not in [int(row[0]) for row in rows[1:]]
    assert {row[4] for row in rows[1:]} == {"Submitted"}
    assert "<" not in "".join(",".join(row) for row in rows), "no HTML in the CSV"


def test_a_bad_filter_is_a_form_error_and_a_400_for_the_export(client, viewer):
    client.force_login(viewer)
    page = client.get(LIST, {"kind": "sideways"})
    assert page.status_code == 200 and "kind" in page.context["form"].errors
    assert b"errorlist" in page.content
    export = client.get(LIST, {"kind": "sideways", "format": "csv"})
    assert export.status_code == 400 and export.content.decode().startswith("Bad filter: kind:")


def test_query_count_does_not_grow_with_rows(client, dev_resource, operator, viewer, django_assert_max_num_queries):
    bulk(dev_resource, operator, 3)
    client.force_login(viewer)
    client.get(LIST)
    with django_assert_max_num_queries(12) as few:
        client.get(LIST, {"sort": "-updated"})
    bulk(dev_resource, operator, 60)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert client.get(LIST, {"sort": "-updated", "page": 2}, **HX).status_code == 200
