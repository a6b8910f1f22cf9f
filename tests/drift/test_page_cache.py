"""The fleet-wide tables are cached briefly (fedportal/fragments.py): fresh copies are served, any
audited action refreshes them, a stale copy is recomputed, and what a viewer may do is never shared."""

import pytest
from django.test import override_settings
from django.urls import reverse

from fedportal import fragments
from fedportal.audit import record_event

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("page_cache")]

MATRIX = reverse("drift:skew_matrix")
COMPLIANCE = reverse("drift:compliance_report")


def _set_version(cluster, version):
    type(cluster).objects.filter(pk=cluster.pk).update(server_version=version)  # a poll: no audit event


def test_a_fresh_copy_is_served_until_an_audited_action(viewer_client, make_cluster):
    make_cluster("host", "v1.29.0", role="host")
    member = make_cluster("m1", "v1.29.0")
    assert "1.29" in viewer_client.get(MATRIX).content.decode()
    _set_version(member, "v1.21.7")
    assert "1.21" not in viewer_client.get(MATRIX).content.decode(), "served from the cache"
    record_event("test.action", summary="someone did something")
    assert "1.21" in viewer_client.get(MATRIX).content.decode(), "an audited action refreshes the tables"


def test_a_stale_copy_is_recomputed(viewer_client, make_cluster, monkeypatch):
    make_cluster("host", "v1.29.0", role="host")
    member = make_cluster("m1", "v1.29.0")
    viewer_client.get(MATRIX)
    _set_version(member, "v1.21.7")
    later = fragments.time.time() + 31
    monkeypatch.setattr(fragments.time, "time", lambda: later)
    assert "1.21" in viewer_client.get(MATRIX).content.decode()


def test_while_one_request_refreshes_others_get_the_stale_copy(rf, viewer, make_cluster, monkeypatch):
    make_cluster("host", "v1.29.0", role="host")
    request = rf.get(MATRIX)
    assert fragments.cached_fragment(request, "t", lambda: "old") == "old"
    later = fragments.time.time() + 31
    monkeypatch.setattr(fragments.time, "time", lambda: later)
    seen = []

    def refresh():
        seen.append(fragments.cached_fragment(request, "t", lambda: "newer"))  # a second request meanwhile
        return "new"

    assert fragments.cached_fragment(request, "t", refresh) == "new"
    assert seen == ["old"], "the concurrent request is not made to wait for (or repeat) the refresh"
    assert fragments.cached_fragment(request, "t", lambda: "unused") == "new"


def test_filters_and_pages_are_cached_apart(viewer_client, make_cluster):
    make_cluster("host", "v1.29.0", role="host")
    make_cluster("prod-1", "v1.28.0", labels={"env": "prod"})
    make_cluster("dev-1", "v1.27.0", labels={"env": "dev"})
    everything = viewer_client.get(MATRIX).content.decode()
    only_dev = viewer_client.get(MATRIX, {"labels": "env=dev"}).content.decode()
    assert "prod-1" in everything and "dev-1" in only_dev and "prod-1" not in only_dev


def test_what_a_viewer_may_do_is_not_shared_through_the_cache(viewer_client, admin_client_, make_cluster):
    make_cluster("host", "v1.29.0", role="host")
    make_cluster("m1", "v1.27.0")
    isolate = reverse("drift:cluster_isolate", args=["m1"])
    assert isolate in admin_client_.get(COMPLIANCE).content.decode()
    assert isolate not in viewer_client.get(COMPLIANCE).content.decode()


def test_htmx_gets_the_cached_results_alone(viewer_client, make_cluster):
    make_cluster("host", "v1.29.0", role="host")
    member = make_cluster("m1", "v1.27.0")
    full = viewer_client.get(MATRIX).content.decode()
    _set_version(member, "v1.21.7")
    fragment = viewer_client.get(MATRIX, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in fragment and fragment.strip() and fragment.strip() in full
    assert "1.21" not in fragment, "the htmx request is served the cached results"


def test_turned_off_with_zero(viewer_client, make_cluster):
    make_cluster("host", "v1.29.0", role="host")
    member = make_cluster("m1", "v1.29.0")
    with override_settings(FEDPORTAL_FRAGMENT_CACHE_SECONDS=0):
        viewer_client.get(MATRIX)
        _set_version(member, "v1.21.7")
        assert "1.21" in viewer_client.get(MATRIX).content.decode()
