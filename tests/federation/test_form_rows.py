"""Issue 23 item 2: the resource form submitted as a browser submits it. Empty extra override / RSP
rows are ignored (they used to submit the first cluster of their <select>, so an untouched override
row failed with "This field is required" and the edit form added a `*` RSP row); a form with errors
shows a summary at the top linking to each field."""

import pytest
from django.urls import reverse

from federation.models import FederatedResource
from tests.browser_form import submitted_fields
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import ftype, web_deployment

pytestmark = pytest.mark.django_db

IMAGE = "/spec/template/spec/containers/0/image"


@pytest.fixture
def clusters():
    return [ClusterFactory(name=n) for n in ("east", "west")]


def test_new_resource_with_untouched_override_row_saves(client, operator, clusters):
    client.force_login(operator)
    url = reverse("federation:resource_create")
    data = submitted_fields(client.get(url).content.decode(), "resource-form")
    data.update(
        {
            "type": [str(ftype("Deployment").pk)],
            "namespace": ["shop"],
            "name": ["web"],
            "clusters": ["east"],
            "_save": ["1"],
        }
    )
    response = client.post(url, data)
    assert response.status_code == 302
    revision = FederatedResource.objects.get(name="web").current_revision
    assert revision.overrides == []
    assert revision.scheduling in (None, {})


def test_editing_keeps_overrides_and_scheduling_and_adds_no_wildcard_row(client, operator, clusters):
    resource = web_deployment(
        placement={"clusters": ["east", "west"]},
        overrides=[
            {"clusterName": "west", "clusterOverrides": [{"op": "replace", "path": IMAGE, "value": "nginx:1.27"}]}
        ],
        scheduling={
            "totalReplicas": 4,
            "rebalance": False,
            "intersectWithClusterSelector": False,
            "clusters": {"east": {"weight": 2}},
        },
    )
    stored_clusters = resource.current_revision.scheduling["clusters"]
    client.force_login(operator)
    url = reverse("federation:resource_edit", args=[resource.pk])
    data = submitted_fields(client.get(url).content.decode(), "resource-form")
    data["total_replicas"] = ["6"]
    data["_save"] = ["1"]
    response = client.post(url, data)
    assert response.status_code == 302
    resource.refresh_from_db()
    revision = resource.current_revision
    assert revision.number == 2
    assert revision.overrides == [
        {"clusterName": "west", "clusterOverrides": [{"op": "replace", "path": IMAGE, "value": "nginx:1.27"}]}
    ]
    assert revision.scheduling["clusters"] == stored_clusters
    assert set(stored_clusters) == {"east"}
    assert revision.scheduling["totalReplicas"] == 6


def test_half_filled_override_row_is_an_error_with_a_summary_link(client, operator, clusters):
    client.force_login(operator)
    url = reverse("federation:resource_create")
    data = submitted_fields(client.get(url).content.decode(), "resource-form")
    data.update(
        {
            "type": [str(ftype("Deployment").pk)],
            "namespace": ["shop"],
            "name": ["web"],
            "clusters": ["east"],
            "ov-0-path": [IMAGE],
            "ov-0-value": ["nginx:1.27"],
            "_save": ["1"],
        }
    )
    response = client.post(url, data)
    assert response.status_code == 400
    html = response.content.decode()
    summary = html[html.index('id="error-summary"') :]
    summary = summary[: summary.index("</div>")]
    assert 'href="#id_ov-0-cluster"' in summary
    assert "Override 1 · Cluster: This field is required." in summary
    assert summary.count("<li>") == 1
    assert not FederatedResource.objects.filter(name="web").exists()


def test_register_form_errors_are_summarised_at_the_top(client, admin_user):
    client.force_login(admin_user)
    response = client.post(
        reverse("clusters:cluster_create"),
        {
            "name": "Not A Label",
            "api_server": "https://x.example.test:6443",
            "role": "member",
            "auth_method": "token",
            "token": "",
        },
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 400
    html = response.content.decode()
    start = html.index('id="error-summary"')
    assert start < html.index('id="id_name"')
    summary = html[start : html.index("</div>", start)]
    assert 'href="#id_name"' in summary
    assert 'href="#id_token"' in summary
    assert "Bearer token: Enter the bearer token." in summary
