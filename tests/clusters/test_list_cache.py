"""The cluster list's rows come from the short-lived page cache (fedportal/fragments.py): a probe that
writes a cluster row or any audited action refreshes them, and roles never share a copy."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster
from fedportal.audit import record_event

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("page_cache")]

LIST = reverse("clusters:cluster_list")


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _cluster(name, version, probed_at):
    return Cluster.objects.create(
        name=name, api_server=f"https://{name}.example:6443", server_version=version, last_probe_at=probed_at
    )


def test_rows_are_cached_until_a_probe_writes_a_cluster_row(viewer):
    client, t0 = _client(viewer), timezone.now() - timedelta(minutes=1)
    cluster = _cluster("m1", "v1.29.0", t0)
    assert "v1.29.0" in client.get(LIST).content.decode()
    Cluster.objects.filter(pk=cluster.pk).update(server_version="v1.30.1")  # neither a probe nor audited
    assert "v1.29.0" in client.get(LIST).content.decode(), "served from the cache"
    Cluster.objects.filter(pk=cluster.pk).update(last_probe_at=t0 + timedelta(seconds=60))  # a probe's write
    assert "v1.30.1" in client.get(LIST).content.decode()


def test_an_audited_action_refreshes_the_rows(viewer):
    client = _client(viewer)
    _cluster("m1", "v1.29.0", None)
    client.get(LIST)
    _cluster("m2", "v1.28.4", None)  # not through the service, so not audited
    assert ">m2<" not in client.get(LIST).content.decode()  # a bare "m2" can occur in the CSRF token
    record_event("cluster.register", summary="registered m2")
    assert ">m2<" in client.get(LIST).content.decode()


def test_htmx_gets_the_cached_rows_alone(viewer):
    client = _client(viewer)
    cluster = _cluster("m1", "v1.29.0", timezone.now())
    client.get(LIST)
    Cluster.objects.filter(pk=cluster.pk).update(server_version="v1.30.1")
    body = client.get(LIST, headers={"HX-Request": "true"}).content.decode()
    assert 'id="cluster-rows"' in body and "<html" not in body
    assert "v1.29.0" in body, "the rows the full page cached"


def test_filters_and_pages_have_their_own_copies(viewer):
    client = _client(viewer)
    _cluster("alpha", "v1.29.0", None)
    _cluster("beta", "v1.28.0", None)
    assert "beta" in client.get(LIST).content.decode()
    filtered = client.get(LIST, {"q": "alpha"}).content.decode()
    assert "alpha" in filtered and ">beta<" not in filtered


def test_roles_do_not_share_a_copy(viewer, admin_user):
    cluster = _cluster("m1", "v1.29.0", timezone.now())
    _client(viewer).get(LIST)
    Cluster.objects.filter(pk=cluster.pk).update(server_version="v1.30.1")
    assert "v1.30.1" in _client(admin_user).get(LIST).content.decode(), "the admin's copy is computed for them"


def test_a_bad_filter_is_shown_with_its_error_and_not_cached(viewer):
    client = _client(viewer)
    cluster = _cluster("m1", "v1.29.0", timezone.now())
    bad = client.get(LIST, {"state": "Sideways"})
    assert bad.status_code == 200 and "state:" in bad.content.decode()
    Cluster.objects.filter(pk=cluster.pk).update(server_version="v1.30.1")
    assert "v1.30.1" in client.get(LIST, {"state": "Sideways"}).content.decode()


def test_a_probe_that_commits_with_an_older_time_still_refreshes_the_rows(viewer):
    """Two poll chunks: the one that took its time first may commit last."""
    client, t0 = _client(viewer), timezone.now()
    newer = _cluster("m1", "v1.29.0", t0)
    older = _cluster("m2", "v1.28.0", t0 - timedelta(seconds=30))
    client.get(LIST)
    Cluster.objects.filter(pk=older.pk).update(
        server_version="v1.28.7", last_probe_at=t0 - timedelta(seconds=1), consecutive_successes=1
    )
    assert Cluster.objects.order_by("-last_probe_at").first() == newer  # the newest time did not move
    assert "v1.28.7" in client.get(LIST).content.decode()
