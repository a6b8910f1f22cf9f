"""An object on a cluster that is not Ready is never shown InSync nor Healthy: neither the watch nor
the sweep can see that cluster, so an edit made there meanwhile would go unseen. The page, the API,
``fedctl status``, the dashboard's health counts and the compliance report's counts say Unknown
(as Argo CD shows an unreachable cluster's apps) and keep what the last check found; an OutOfSync
seen before the cluster went away stays OutOfSync."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from api.tokens import create_token
from clusters.choices import ClusterState
from clusters.models import Cluster
from drift.selectors import fleet_compliance
from federation.choices import Health, PropagationReason, SyncState
from federation.models import PropagatedVersion
from federation.selectors import health_counts
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import web_deployment

pytestmark = pytest.mark.django_db

COMPLETE = {"replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2}


@pytest.fixture
def resource():
    for name in ("up", "down", "drifted-down"):
        ClusterFactory(name=name)
    resource = web_deployment(placement={"clusters": ["up", "down", "drifted-down"]})
    for cluster in Cluster.objects.all():
        PropagatedVersion.objects.create(
            resource=resource,
            cluster=cluster,
            status=PropagationReason.OK,
            version="gen:1",
            sync_state=SyncState.OUT_OF_SYNC if cluster.name == "drifted-down" else SyncState.IN_SYNC,
            remote_status=COMPLETE,
        )
    Cluster.objects.filter(name__in=["down", "drifted-down"]).update(state=ClusterState.NOT_READY)
    return resource


def test_the_resource_page_shows_unknown_for_a_cluster_that_is_not_ready(client, viewer, resource):
    client.force_login(viewer)
    response = client.get(reverse("federation:resource_detail", args=[resource.pk]))
    rows = {row.cluster.name: row for row in response.context["rows"]}
    assert {name: (row.shown_sync_state, row.health) for name, row in rows.items()} == {
        "up": (SyncState.IN_SYNC, Health.HEALTHY),
        "down": (SyncState.UNKNOWN, Health.UNKNOWN),
        "drifted-down": (SyncState.OUT_OF_SYNC, Health.UNKNOWN),
    }
    body = response.content.decode()
    assert 'data-sync="Unknown">Unknown</span>' in body
    assert "down is NotReady: last seen InSync" in body
    assert "drifted-down is NotReady" not in body  # OutOfSync is shown as it was seen
    # the unhealthy filter lists both unreachable clusters
    unhealthy = client.get(reverse("federation:resource_detail", args=[resource.pk]), {"show": "unhealthy"})
    assert sorted(row.cluster.name for row in unhealthy.context["rows"]) == ["down", "drifted-down"]


def test_the_api_and_fedctl_say_unknown_and_keep_the_last_verdict(client, viewer, resource):
    token = create_token(viewer, actor=viewer).secret
    body = client.get(f"/api/v1/resources/{resource.pk}", headers={"Authorization": f"Bearer {token}"}).json()
    states = {row["cluster"]: (row["sync_state"], row["last_sync_state"]) for row in body["clusters"]}
    assert states == {
        "up": ("InSync", "InSync"),
        "down": ("Unknown", "InSync"),
        "drifted-down": ("OutOfSync", "OutOfSync"),
    }
    out = StringIO()
    call_command("fedctl", "status", "shop/web", "--kind", "Deployment", "-o", "json", stdout=out)
    rows = {row["cluster"]: (row["syncState"], row["lastSyncState"]) for row in json.loads(out.getvalue())["clusters"]}
    assert rows == states


def test_the_dashboard_and_the_compliance_report_do_not_count_an_unseen_cluster_in_sync(resource):
    assert health_counts()[Health.HEALTHY] == 1 and health_counts()[Health.UNKNOWN] == 2
    report, _skew_counts = fleet_compliance()
    counts = {c.name: c.propagation for c in report.clusters}
    assert counts["up"]["in_sync"] == 1
    assert counts["down"] == {"failed": 0, "out_of_sync": 0, "in_sync": 0, "other": 1}
    assert counts["drifted-down"]["out_of_sync"] == 1


def test_back_to_ready_shows_the_verdict_again(client, viewer, resource):
    Cluster.objects.filter(name="down").update(state=ClusterState.READY)
    client.force_login(viewer)
    response = client.get(reverse("federation:resource_detail", args=[resource.pk]))
    rows = {row.cluster.name: row.shown_sync_state for row in response.context["rows"]}
    assert rows["down"] == SyncState.IN_SYNC
