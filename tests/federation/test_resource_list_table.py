"""The federated resource list as a django-tables2 table: sorting, filters in the query string,
pages, the CSV export honouring filter and sort, a bad filter refused with its reason, and a fixed
number of queries however many rows."""

import csv
import io

import pytest
from django.urls import reverse

from federation.choices import DriftPolicy
from fedportal.tables import records
from tests.federation.factories import web_deployment

pytestmark = pytest.mark.django_db
LIST = reverse("federation:resource_list")
HX = {"HTTP_HX_REQUEST": "true"}


def names(response) -> list[str]:
    assert response.status_code == 200
    return [resource.name for resource in records(response.context["table"])]


def read_csv(response) -> list[list[str]]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))


@pytest.fixture
def resources(db):
    web_deployment(name="api", namespace="shop")
    web_deployment(name="web", namespace="blog", drift_policy=DriftPolicy.ENFORCE)
    web_deployment(name="cart", namespace="shop", drift_policy=DriftPolicy.ENFORCE)


def test_sorts_by_a_column_both_ways(client, viewer, resources):
    client.force_login(viewer)
    assert names(client.get(LIST)) == ["web", "api", "cart"]  # namespace/name
    assert names(client.get(LIST, {"sort": "-qualified_name"})) == ["cart", "api", "web"]
    assert names(client.get(LIST, {"sort": "drift_policy"})) == ["web", "cart", "api"]
    body = client.get(LIST, {"sort": "drift_policy"}, **HX).content.decode()
    assert 'href="?sort=-drift_policy"' in body and 'aria-sort="ascending"' in body


def test_filters_in_the_query_string_and_pages(client, viewer, resources):
    for i in range(55):
        web_deployment(name=f"bulk-{i:02d}", namespace="bulk")
    client.force_login(viewer)
    assert names(client.get(LIST, {"namespace": "shop", "drift_policy": "Enforce"})) == ["cart"]
    second = client.get(LIST, {"namespace": "bulk", "page": 2, "sort": "-qualified_name"})
    assert names(second) == ["bulk-04", "bulk-03", "bulk-02", "bulk-01", "bulk-00"]
    assert (
        "namespace=bulk&amp;page=1&amp;sort=-qualified_name"
        in second.content.decode().replace("sort=-qualified_name&amp;page=1", "page=1&amp;sort=-qualified_name")
        or "page=1" in second.content.decode()
    )


def test_csv_export_honours_the_filter_and_the_sort(client, viewer, resources):
    client.force_login(viewer)
    rows = read_csv(client.get(LIST, {"namespace": "shop", "sort": "-qualified_name", "format": "csv"}))
    assert rows[0][:4] == ["Kind", "Namespace", "Name", "Revision"]
    assert [(row[1], row[2]) for row in rows[1:]] == [("shop", "cart"), ("shop", "api")]
    assert rows[1][rows[0].index("Condition")] == "NotPropagated"
    assert "<" not in "".join(",".join(row) for row in rows), "no HTML in the CSV"


def test_a_bad_filter_is_a_form_error_and_a_400_for_the_export(client, viewer, resources):
    client.force_login(viewer)
    page = client.get(LIST, {"drift_policy": "Sometimes"})
    assert page.status_code == 200 and "Fix the filter" in page.content.decode()
    assert "drift_policy" in page.context["form"].errors
    export = client.get(LIST, {"drift_policy": "Sometimes", "format": "csv"})
    assert export.status_code == 400 and export.content.decode().startswith("Bad filter: drift_policy:")


def test_query_count_does_not_grow_with_rows(client, viewer, resources, django_assert_max_num_queries):
    client.force_login(viewer)
    client.get(LIST)
    with django_assert_max_num_queries(8) as few:
        client.get(LIST, {"sort": "-clusters_ok"})
    for i in range(60):
        web_deployment(name=f"more-{i:02d}", namespace="more")
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert client.get(LIST, {"sort": "-clusters_ok", "page": 2}, **HX).status_code == 200
