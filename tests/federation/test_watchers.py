"""Watcher leases (split without overlap, take-over of a dead watcher's clusters by compare-and-set),
which clusters the safety-net sweep lists, the Watchers page and `fedctl watchers`."""

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from clusters.choices import ClusterRole, ClusterState
from federation.models import ClusterWatch, FleetWatcher
from federation.watching import clusters_to_sweep, mark_swept
from federation.watching.leases import claim_clusters, register_watcher, stop_watcher
from tests.clusters.factories import ClusterFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def members():
    return [ClusterFactory(name=f"m{i}", role=ClusterRole.MEMBER, state=ClusterState.READY) for i in range(5)]


def test_one_watcher_holds_every_member_cluster_and_never_the_host(members):
    host = ClusterFactory(name="host", role=ClusterRole.HOST, state=ClusterState.READY)
    held = claim_clusters("w1")
    assert held == {c.pk for c in members}
    assert not ClusterWatch.objects.filter(cluster=host).exists()


def test_two_watchers_split_the_fleet_without_overlap(members):
    claim_clusters("w1")
    register_watcher("w2")
    w2 = claim_clusters("w2")  # w1 still holds everything: nothing free yet
    assert w2 == set()
    w1 = claim_clusters("w1")  # w1 sees two live watchers: gives back beyond its share of 3
    assert len(w1) == 3
    w2 = claim_clusters("w2")
    assert len(w2) == 2 and not (w1 & w2) and (w1 | w2) == {c.pk for c in members}
    assert claim_clusters("w1") == w1 and claim_clusters("w2") == w2, "stable once split"


def test_a_dead_watchers_clusters_are_taken_over_only_once_its_lease_ran_out(members):
    with override_settings(FEDERATION_WATCH_LEASE_SECONDS=30):
        claim_clusters("w1")
        register_watcher("w2")
        assert claim_clusters("w2") == set(), "a live lease is never taken"
        # w1 dies: no heartbeat and no renewal for longer than the lease
        past = timezone.now() - timedelta(seconds=31)
        FleetWatcher.objects.filter(name="w1").update(heartbeat_at=past)
        ClusterWatch.objects.filter(watcher__name="w1").update(lease_until=past)
        assert claim_clusters("w2") == {c.pk for c in members}


def test_a_cleanly_stopped_watcher_frees_its_clusters_at_once(members):
    claim_clusters("w1")
    stop_watcher("w1")
    assert not ClusterWatch.objects.filter(watcher__isnull=False).exists()
    assert claim_clusters("w2") == {c.pk for c in members}


def test_the_sweep_lists_unwatched_and_disconnected_clusters_and_the_rest_only_when_due(members):
    ids = [c.pk for c in members]
    assert clusters_to_sweep() == ids, "no watcher: every Ready cluster, every time"
    claim_clusters("w1")
    ClusterWatch.objects.update(connected=True)
    for pk in ids:
        mark_swept(pk)
    ClusterWatch.objects.filter(cluster_id=ids[1]).update(connected=False)
    assert clusters_to_sweep() == [ids[1]]
    ClusterWatch.objects.filter(cluster_id=ids[3]).update(last_sweep_at=timezone.now() - timedelta(hours=2))
    assert clusters_to_sweep() == [ids[1], ids[3]], "hourly by default"
    ClusterWatch.objects.filter(cluster_id=ids[0]).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert clusters_to_sweep() == [ids[0], ids[1], ids[3]], "a lease that ran out is not a healthy watch"


def _watched(members):
    claim_clusters("w1")
    ClusterWatch.objects.update(connected=True, watches=2, reconnects=1, last_event_at=timezone.now())
    ClusterWatch.objects.filter(cluster=members[2]).update(
        connected=False, watches=1, reconnects=7, last_error="Connection refused by https://m2"
    )


def test_watchers_page_shows_each_watcher_and_the_unhealthy_clusters_first(
    client, viewer, members, django_assert_max_num_queries
):
    _watched(members)
    client.force_login(viewer)
    with django_assert_max_num_queries(12):
        response = client.get(reverse("federation:watcher_list"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<title>Fleet watchers · FedPortal</title>" in html
    rows = response.context["page"].object_list
    assert [cw.cluster.name for cw in rows] == ["m2", "m0", "m1", "m3", "m4"]
    assert "Disconnected" in html and "Connection refused by https://m2" in html
    [w] = response.context["watchers"]
    assert (w.name, w.alive, w.clusters, w.connected) == ("w1", True, 5, 4)


def test_watchers_page_filter_and_fragment(client, viewer, members):
    _watched(members)
    client.force_login(viewer)
    response = client.get(reverse("federation:watcher_list") + "?unhealthy=1", headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "<title>" not in html and 'id="watch-rows"' in html
    assert [cw.cluster.name for cw in response.context["page"].object_list] == ["m2"]


def test_watchers_page_needs_a_role(client, nobody):
    client.force_login(nobody)
    assert client.get(reverse("federation:watcher_list")).status_code == 403


def test_fedctl_watchers_reports_health(members):
    _watched(members)
    out = StringIO()
    call_command("fedctl", "watchers", "-o", "json", stdout=out)
    data = json.loads(out.getvalue())
    assert [(w["name"], w["clusters"], w["connected"]) for w in data["watchers"]] == [("w1", 5, 4)]
    first = data["clusters"][0]
    assert (first["cluster"], first["healthy"], first["reconnects"], first["watches"]) == ("m2", False, 7, 1)
    out = StringIO()
    call_command("fedctl", "watchers", "--unhealthy", stdout=out)
    text = out.getvalue()
    assert "watcher w1" in text and "4/5 clusters connected" in text
    lines = [line for line in text.splitlines() if line.startswith("m")]
    assert len(lines) == 1 and lines[0].split()[:3] == ["m2", "w1", "NO"]


def test_a_watcher_drops_a_connection_whose_credentials_were_rotated(members, admin_user):
    from clusters.services import rotate_credentials
    from federation.watching import handling

    held = handling.connections_for([c.pk for c in members])
    ids = list(held)
    assert handling.rotated(held, handling.credential_versions(ids)) == set()
    rotate_credentials(members[1], token="a-new-token", actor=admin_user, verify=False)
    assert handling.rotated(held, handling.credential_versions(ids)) == {members[1].pk}
    fresh = handling.connections_for([members[1].pk])[members[1].pk]
    assert fresh.cache_key[1] == members[1].credential_version + 1
