"""Issue 23 item 13: a Health column (Healthy / Progressing / Degraded / Missing) computed per kind
from the collected status, status filters on the resource page, and the counts on the dashboard."""

import pytest
from django.urls import reverse

from federation.choices import Health, PropagationReason, SyncState
from federation.health import health
from federation.models import PropagatedVersion
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import web_deployment

H, P, D, M = Health.HEALTHY, Health.PROGRESSING, Health.DEGRADED, Health.MISSING

CASES = [
    ("Deployment", {"replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3}, H),
    ("Deployment", {"replicas": 5, "updatedReplicas": 5, "availableReplicas": 0, "unavailableReplicas": 5}, P),
    ("Deployment", {"replicas": 3, "updatedReplicas": 1, "availableReplicas": 3}, P),
    (
        "Deployment",
        {
            "replicas": 3,
            "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}],
        },
        D,
    ),
    ("StatefulSet", {"replicas": 2, "readyReplicas": 1}, P),
    ("StatefulSet", {"replicas": 2, "readyReplicas": 2, "currentRevision": "a", "updateRevision": "a"}, H),
    ("DaemonSet", {"desiredNumberScheduled": 4, "updatedNumberScheduled": 4, "numberAvailable": 3}, P),
    ("Job", {"conditions": [{"type": "Failed", "status": "True"}]}, D),
    ("Job", {"conditions": [{"type": "Complete", "status": "True"}]}, H),
    ("Job", {"active": 1}, P),
    # held by its Suspended condition, unless it already finished (where Argo CD says Suspended too)
    ("Job", {"conditions": [{"type": "Suspended", "status": "True"}]}, Health.SUSPENDED),
    ("Job", {"conditions": [{"type": "Suspended", "status": "False"}]}, P),
    ("Job", {"conditions": [{"type": "Complete", "status": "True"}, {"type": "Suspended", "status": "True"}]}, H),
    ("PersistentVolumeClaim", {"phase": "Pending"}, P),
    ("ConfigMap", {}, H),
    ("Deployment", None, H),  # status collection off: it exists, nothing more is known
]


@pytest.mark.parametrize(("kind", "status", "expected"), CASES)
def test_health_per_kind(kind, status, expected):
    assert health(kind, status, written=True) == expected


def test_an_object_never_written_is_missing():
    assert health("Deployment", {"replicas": 1, "availableReplicas": 1}, written=False) == M


@pytest.fixture
def resource_on_three(db):
    for name in ("east", "north", "west"):
        ClusterFactory(name=name)
    resource = web_deployment(placement={"clusters": ["east", "north", "west"]})
    rows = {
        "east": dict(
            status=PropagationReason.OK,
            version="gen:1",
            sync_state=SyncState.IN_SYNC,
            remote_status={"replicas": 2, "updatedReplicas": 2, "availableReplicas": 2},
        ),
        "north": dict(
            status=PropagationReason.OK,
            version="gen:1",
            sync_state=SyncState.IN_SYNC,
            remote_status={"replicas": 5, "updatedReplicas": 5, "unavailableReplicas": 5},
        ),
        "west": dict(status=PropagationReason.CREATION_FAILED, version="", sync_state=SyncState.UNKNOWN),
    }
    for cluster_name, fields in rows.items():
        PropagatedVersion.objects.create(
            resource=resource, cluster=ClusterFactory._meta.model.objects.get(name=cluster_name), **fields
        )
    PropagatedVersion.objects.filter(cluster__name="east").update(sync_state=SyncState.OUT_OF_SYNC)
    return resource


def shown(response) -> dict[str, str]:
    return {row.cluster.name: row.health for row in response.context["rows"]}


@pytest.mark.django_db
def test_resource_page_has_a_health_column_and_status_filters(client, viewer, resource_on_three):
    client.force_login(viewer)
    url = reverse("federation:resource_detail", args=[resource_on_three.pk])
    response = client.get(url)
    assert shown(response) == {"east": H, "north": P, "west": M}
    body = response.content.decode()
    assert "<th>Health</th>" in body and 'data-health="Progressing">Progressing</span>' in body
    assert shown(client.get(url, {"show": "unhealthy"})) == {"north": P, "west": M}
    assert shown(client.get(url, {"show": "failing"})) == {"west": M}
    assert shown(client.get(url, {"show": "outofsync"})) == {"east": H}
    fragment = client.get(url, {"show": "unhealthy"}, HTTP_HX_REQUEST="true")
    html = fragment.content.decode()
    assert "<html" not in html and 'id="resource-status"' in html
    assert [name for name in ("east", "north", "west") if f'data-cluster="{name}"' in html] == ["north", "west"]
    assert "only unhealthy 2" in body and "only failing 1" in body and "only out of sync 1" in body


@pytest.mark.django_db
def test_dashboard_counts_health(client, viewer, resource_on_three):
    client.force_login(viewer)
    response = client.get(reverse("federation:summary"))
    assert response.context["summary"]["health"] == {H: 1, P: 1, D: 0, Health.SUSPENDED: 0, M: 1, Health.UNKNOWN: 0}
    fragment = client.get(reverse("federation:summary"), HTTP_HX_REQUEST="true").content.decode()
    assert 'data-health="Missing">Missing 1</span>' in fragment and 'data-health="Healthy">Healthy 1</span>' in fragment


@pytest.mark.django_db
def test_status_table_keeps_name_and_resync_in_view(client, operator, resource_on_three):
    """Issue 23 item 14: the wide status table scrolls sideways inside its own box with the first
    column and the Re-sync action sticky (static/css/fedportal.css)."""
    client.force_login(operator)
    body = client.get(reverse("federation:resource_detail", args=[resource_on_three.pk])).content.decode()
    assert '<div class="compat-scroll">' in body and 'id="cluster-status"' in body
    assert body.count('<td class="actions">') == 3
    from pathlib import Path

    css = (Path(__file__).resolve().parents[2] / "static/css/fedportal.css").read_text()
    assert ".compat-scroll table.data td.actions { position: sticky; right: 0;" in css


@pytest.mark.django_db
def test_the_header_says_which_clusters_hold_another_revision_than_the_propagated_one(client, viewer):
    """An aborted staged rollout left its later waves on the old revision while the page said
    "Propagated revision 2" and nothing more (a reviewer's finding)."""
    from federation import services

    for name in ("east", "west"):
        ClusterFactory(name=name)
    resource = web_deployment(placement={"clusters": ["east", "west"]})
    first = resource.current_revision
    second = services.update_resource(
        resource, template={**resource.current_revision.template, "metadata": {"labels": {"v": "2"}}}
    )
    type(resource).objects.filter(pk=resource.pk).update(propagated_revision=second)
    manifest = {"kind": "Deployment"}
    for name, revision in (("east", second), ("west", first)):
        PropagatedVersion.objects.create(
            resource=resource,
            cluster=ClusterFactory._meta.model.objects.get(name=name),
            revision=revision,
            status=PropagationReason.OK,
            applied_manifest=manifest,
        )
    client.force_login(viewer)
    body = client.get(reverse("federation:resource_detail", args=[resource.pk])).content.decode()
    assert 'id="revision-lagging"' in body and "1 cluster still at revision 1" in body
    PropagatedVersion.objects.filter(cluster__name="west").update(revision=second)
    body = client.get(reverse("federation:resource_detail", args=[resource.pk])).content.decode()
    assert 'id="revision-lagging"' not in body
