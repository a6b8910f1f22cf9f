"""The cluster list as a django-tables2 table: sorting by a column, filters in the query string,
pages, the CSV export honouring filter and sort, a bad filter refused with its reason."""

import csv
import io

import pytest
from django.urls import reverse

from clusters.choices import ClusterState
from clusters.models import Cluster
from fedportal.tables import records
from tests.clusters.factories import ClusterFactory

pytestmark = pytest.mark.django_db
LIST = reverse("clusters:cluster_list")
HX = {"HTTP_HX_REQUEST": "true"}


def names(response) -> list[str]:
    assert response.status_code == 200
    return [cluster.name for cluster in records(response.context["table"])]


def read_csv(response) -> list[list[str]]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))


@pytest.fixture
def three(db):
    ClusterFactory(name="b-mid", region="eu", version_minor=28, server_version="v1.28.2", labels={"env": "prod"})
    ClusterFactory(name="a-old", region="us", version_minor=27, server_version="v1.27.3", labels={"env": "prod"})
    ClusterFactory(name="c-new", region="ap", version_minor=29, server_version="v1.29.0", labels={"env": "dev"})


def test_sorts_by_a_column_both_ways_and_the_header_links_to_the_other_way(client, viewer, three):
    client.force_login(viewer)
    assert names(client.get(LIST)) == ["a-old", "b-mid", "c-new"]
    assert names(client.get(LIST, {"sort": "region"})) == ["c-new", "b-mid", "a-old"]
    assert names(client.get(LIST, {"sort": "-version"})) == ["c-new", "b-mid", "a-old"]
    body = client.get(LIST, {"sort": "region"}, **HX).content.decode()
    assert 'aria-sort="ascending"' in body
    assert 'href="?sort=-region" hx-get="?sort=-region" hx-target="#cluster-rows"' in body
    # the swapped rows carry the sort into the filter form, so filtering next keeps this order
    assert '<input type="hidden" name="sort" value="region" form="cluster-filters">' in body
    assert names(client.get(LIST, {"sort": "no-such-column"})) == ["a-old", "b-mid", "c-new"]


def test_filters_come_from_the_query_string_and_the_sort_keeps_them(client, viewer, three):
    client.force_login(viewer)
    response = client.get(LIST, {"label": "env=prod", "sort": "-name"})
    assert names(response) == ["b-mid", "a-old"]
    assert "label=env%3Dprod&amp;sort=name" in response.content.decode()


def test_pages_keep_filter_and_sort(client, viewer):
    Cluster.objects.bulk_create(
        [Cluster(name=f"c{i:03d}", api_server=f"https://c{i}.example", state=ClusterState.READY) for i in range(120)]
    )
    client.force_login(viewer)
    second = client.get(LIST, {"sort": "-name", "page": 2})
    assert names(second) == [f"c{i:03d}" for i in range(69, 19, -1)]
    assert "sort=-name&amp;page=3" in second.content.decode() and "Page 2 of 3" in second.content.decode()


def test_csv_export_honours_the_filter_and_the_sort(client, viewer, three):
    client.force_login(viewer)
    rows = read_csv(client.get(LIST, {"label": "env=prod", "sort": "-name", "format": "csv", "page": 2}))
    assert [row[0] for row in rows] == ["Name", "b-mid", "a-old"]
    header = rows[0]
    assert header[-3:] == ["Last probe", "Isolated", "Last error"] and "Platform" in header


def test_a_bad_filter_is_a_form_error_on_the_page_and_a_400_for_the_export(client, viewer, three):
    client.force_login(viewer)
    page = client.get(LIST, {"version": "latest"})
    assert page.status_code == 200 and "minor version" in page.content.decode()
    export = client.get(LIST, {"version": "latest", "format": "csv"})
    assert export.status_code == 400
    assert export.content.decode().startswith("Bad filter: version: Use a minor version")
