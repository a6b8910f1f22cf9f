"""Compatibility matrix over federated resources: pages, fragment, permissions, CSV, queries."""

import csv
import html
import io

import pytest
from django.urls import reverse

from drift import compat
from federation.services import create_resource
from fedportal.models import AuditEvent
from tests.drift.conftest import deployment_type

MATRIX = reverse("drift:compat_matrix")
EXPORT = reverse("drift:compat_export")
SIDECAR = "/spec/template/spec/initContainers/0/restartPolicy"

pytestmark = pytest.mark.django_db


def deployment_template(app, *, sidecar=False):
    pod = {"containers": [{"name": "app", "image": "nginx"}]}
    if sidecar:
        pod["initContainers"] = [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]
    return {
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}}, "spec": pod},
        }
    }


@pytest.fixture
def deployments():
    return deployment_type()


@pytest.fixture
def sidecar_resource(sim_fleet, deployments):
    return create_resource(
        deployments,
        namespace="default",
        name="web",
        template=deployment_template("web", sidecar=True),
        placement={"clusterSelector": {}},
    )


def cell_url(resource, cluster):
    return reverse("drift:compat_cell", args=[resource.pk, cluster])


def test_v1_28_only_field_is_red_for_every_v1_25_to_v1_27_target(viewer_client, sidecar_resource):
    response = viewer_client.get(MATRIX)
    assert response.status_code == 200
    [(resource, cells)] = response.context["grid"]
    statuses = {cell.cluster: cell.status for cell in cells}
    assert statuses == {
        "host": "compatible",
        "m25": "incompatible",
        "m26": "incompatible",
        "m27": "incompatible",
        "m28": "compatible",
        "m29": "compatible",
        "m30": "compatible",
        "m31": "compatible",
    }
    body = response.content.decode()
    assert "compat-incompatible" in body and cell_url(resource, "m27") in body


def test_override_removing_the_field_turns_the_cell_green(viewer_client, sim_fleet, deployments):
    create_resource(
        deployments,
        namespace="default",
        name="web",
        template=deployment_template("web", sidecar=True),
        placement={"clusters": ["m27", "m28"]},
        overrides=[{"clusterName": "m27", "clusterOverrides": [{"op": "remove", "path": SIDECAR}]}],
    )
    [(_, cells)] = viewer_client.get(MATRIX).context["grid"]
    statuses = {cell.cluster: cell.status for cell in cells}
    assert statuses["m27"] == "compatible" and statuses["m28"] == "compatible"
    assert statuses["m25"] == "untargeted"


def test_cell_page_names_the_field_the_fix_and_the_upgrade_path(viewer_client, sidecar_resource):
    response = viewer_client.get(cell_url(sidecar_resource, "m26"))
    assert response.status_code == 200
    body = html.unescape(response.content.decode())
    assert "spec.template.spec.initContainers[0].restartPolicy" in body
    assert '"op": "remove"' in body and SIDECAR in body
    assert "v1.28" in body
    plan = response.context["plan"]
    assert [step.minor for step in plan.steps] == [27, 28, 29]  # to the host's v1.29
    assert [step.minor for step in plan.steps if step.became_compatible] == [28]


def test_cell_fragment_for_htmx_and_404s(viewer_client, sidecar_resource):
    response = viewer_client.get(cell_url(sidecar_resource, "m25"), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "<html" not in response.content.decode()
    assert viewer_client.get(cell_url(sidecar_resource, "nope")).status_code == 404
    assert viewer_client.get(reverse("drift:compat_cell", args=[999999, "m25"])).status_code == 404


def test_matrix_fragment_and_bad_filter(viewer_client, sidecar_resource):
    response = viewer_client.get(MATRIX, {"kind": "Deployment"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "<html" not in response.content.decode()
    bad = viewer_client.get(MATRIX, {"namespace": "Not_A_NS"})
    assert bad.status_code == 200 and bad.context["form"].errors
    assert viewer_client.get(EXPORT, {"kind": "a b"}).status_code == 400


def test_compat_pages_refuse_users_without_a_role(nobody_client, sidecar_resource):
    assert nobody_client.get(MATRIX).status_code == 403
    assert nobody_client.get(EXPORT).status_code == 403
    assert nobody_client.get(cell_url(sidecar_resource, "m25")).status_code == 403


def test_compat_export_lists_targets_with_fields_and_fixes(viewer_client, sidecar_resource):
    response = viewer_client.get(EXPORT)
    text = b"".join(response.streaming_content).decode("utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 8
    by_cluster = {r["Cluster"]: r for r in rows}
    assert by_cluster["m25"]["Status"] == "incompatible"
    assert by_cluster["m25"]["Unsupported fields"] == "spec.template.spec.initContainers[0].restartPolicy"
    assert by_cluster["m25"]["Minimum version"] == "v1.28"
    assert SIDECAR in by_cluster["m25"]["Suggested override"]
    assert AuditEvent.objects.filter(action="drift.compat.export").exists()


def test_compat_matrix_queries_do_not_grow_with_resources_or_clusters(
    viewer_client, sim_fleet, deployments, make_cluster, django_assert_max_num_queries
):
    create_resource(
        deployments,
        namespace="default",
        name="r0",
        template=deployment_template("r0"),
        placement={"clusterSelector": {}},
    )
    with django_assert_max_num_queries(10):
        viewer_client.get(MATRIX)
    for i in range(1, 30):
        create_resource(
            deployments,
            namespace="default",
            name=f"r{i}",
            template=deployment_template(f"r{i}", sidecar=i % 2 == 0),
            placement={"clusterSelector": {}},
        )
    for i in range(40):
        make_cluster(f"x{i}", f"v1.{25 + i % 7}.0")
    compat.clear_cache()
    with django_assert_max_num_queries(10):
        response = viewer_client.get(MATRIX)
    assert len(response.context["grid"]) == 25 and len(response.context["clusters"]) == 30


def test_a_secret_cell_whose_overrides_do_not_apply_shows_no_value(viewer_client, sim_fleet, viewer):
    """The render error of an override that does not apply quotes the document it walked (jsonpointer
    names the mapping it searched): on a Secret that is its data. Create and update refuse such
    overrides, so the revision is written directly, as an older FedPortal may have stored it."""
    import base64
    import json

    from api.tokens import create_token
    from federation.models import Revision
    from federation.services import find_type

    value = "sentinel-cell-K4pW9z's\\value"
    encoded = base64.b64encode(value.encode()).decode()
    resource = create_resource(
        find_type("Secret"),
        namespace="default",
        name="db",
        template={"type": "Opaque", "data": {"password": encoded}, "stringData": {"plain": value}},
        placement={"clusters": ["m29"]},
    )
    broken = [{"clusterName": "m29", "clusterOverrides": [{"op": "add", "path": "/data/nested/key", "value": "eA=="}]}]
    Revision.objects.filter(pk=resource.current_revision_id).update(overrides=broken)

    page = viewer_client.get(cell_url(resource, "m29"))
    assert page.status_code == 200
    problems = [p.message for p in page.context["cell"].result.problems]
    assert problems and all(message.startswith("The overrides do not apply") for message in problems)
    token = create_token(viewer, actor=viewer).secret
    api = viewer_client.get("/api/v1/drift/compatibility", headers={"Authorization": f"Bearer {token}"})
    assert api.status_code == 200
    texts = {
        "page": page.content.decode(),
        "export": b"".join(viewer_client.get(EXPORT).streaming_content).decode(),
        "api": json.dumps(api.json()),
    }
    forms = {value, encoded, repr(value)[1:-1], json.dumps(value)[1:-1], "sentinel-cell-K4pW9z"}
    assert {where: [f for f in forms if f in text] for where, text in texts.items()} == {w: [] for w in texts}
