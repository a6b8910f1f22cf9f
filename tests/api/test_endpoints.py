"""The API's endpoints without the network: filters, cursors, errors, Idempotency-Key, CSV, docs."""

import csv
import io
import json

import pytest
import yaml

from api.models import ApiToken, IdempotencyRecord
from clusters.choices import ClusterState
from clusters.models import Cluster
from federation.approvals.models import Approval, ChangeRequest
from federation.models import FederatedResource
from fedportal.audit import record_event
from fedportal.models import AuditEvent
from tests.clusters.factories import ClusterFactory
from tests.utils import EXTERNAL_ASSET

pytestmark = pytest.mark.django_db

CONFIGMAP_YAML = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default}
data: {colour: blue}
"""

FEDERATED_DEPLOYMENT_YAML = """\
apiVersion: types.kubefed.io/v1beta1
kind: FederatedDeployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          containers: [{name: web, image: "nginx:1.25"}]
  placement:
    clusters: [{name: east}]
  overrides:
  - clusterName: east
    clusterOverrides:
    - {path: /spec/replicas, value: 2}
"""


@pytest.fixture
def viewer_api(api_as, viewer):
    return api_as(viewer)


@pytest.fixture
def operator_api(api_as, operator):
    return api_as(operator)


def test_cluster_list_filters_by_label_selector_state_and_version(viewer_api):
    ClusterFactory(name="a", labels={"env": "prod", "tier": "web"}, server_version="v1.27.3", version_minor=27)
    ClusterFactory(name="b", labels={"env": "prod"}, server_version="v1.28.1", version_minor=28)
    ClusterFactory(name="c", labels={"env": "dev", "tier": "web"}, state=ClusterState.OFFLINE)

    def names(**q):
        return [c["name"] for c in viewer_api.get("/api/v1/clusters", q).json()["items"]]

    assert names() == ["a", "b", "c"]
    assert names(label_selector="env=prod") == ["a", "b"]
    assert names(label_selector="env=prod,tier") == ["a"]
    assert names(state="Offline") == ["c"]
    assert names(version="1.28") == ["b"]
    assert names(version="v1.27.3") == ["a"]


@pytest.mark.parametrize(
    "query,field",
    [
        ({"state": "Sleeping"}, "state"),
        ({"version": "latest"}, "version"),
        ({"label_selector": "bad key!"}, "label_selector"),
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
    ],
)
def test_cluster_list_bad_filter_is_a_4xx_naming_the_field(viewer_api, query, field):
    response = viewer_api.get("/api/v1/clusters", query)
    assert response.status_code in (400, 422)
    body = response.json()
    assert set(body) == {"error", "message", "fields"} and field in body["fields"], body


def test_cluster_list_cursor_pages_through_every_cluster_once(viewer_api):
    for i in range(7):
        ClusterFactory(name=f"c{i}")
    seen, cursor = [], None
    while True:
        body = viewer_api.get("/api/v1/clusters", {"limit": 3, **({"cursor": cursor} if cursor else {})}).json()
        seen += [c["name"] for c in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"c{i}" for i in range(7)]


def test_a_forged_cursor_is_400(viewer_api):
    response = viewer_api.get("/api/v1/clusters", {"cursor": "bm9wZQ"})
    assert response.status_code == 400 and response.json()["error"] == "invalid_cursor"


@pytest.mark.parametrize(
    "cursor",
    [
        "WyJjbHVzdGVycyIsICJcdWQ4MDAiXQ",  # ["clusters", "\ud800"]: a lone surrogate, no driver encodes it
        "WyJjbHVzdGVycyIsICJcdTAwMDAiXQ",  # ["clusters", "\u0000"]: a NUL, PostgreSQL refuses it
    ],
)
def test_a_cursor_holding_text_the_database_cannot_compare_is_400(viewer_api, cursor):
    ClusterFactory(name="east")
    response = viewer_api.get("/api/v1/clusters", {"cursor": cursor})
    assert response.status_code == 400, response.content
    assert response.json() == {
        "error": "invalid_cursor",
        "message": "The cursor is not one this list returned; start again without it.",
        "fields": {"cursor": ["Not a valid cursor."]},
    }


@pytest.mark.parametrize(
    "path,field",
    [
        ("/api/v1/resources", "q"),
        ("/api/v1/change-requests", "author"),
        ("/api/v1/change-requests", "q"),
        ("/api/v1/change-requests", "resource"),
        ("/api/v1/change-requests", "cluster"),
        ("/api/v1/clusters", "q"),
        ("/api/v1/audit/events", "actor"),
    ],
)
def test_a_list_filter_the_filter_form_refuses_is_400_naming_the_field(viewer_api, path, field):
    # the forms refuse NUL (PostgreSQL cannot compare it); the resource and change-request
    # selectors raised a plain ValueError for that, a 500
    response = viewer_api.get(path, {field: "a\x00"})
    assert response.status_code == 400, response.content
    assert response.json() == {
        "error": "invalid",
        "message": f"{field}: Null characters are not allowed.",
        "fields": {field: ["Null characters are not allowed."]},
    }


def test_cluster_detail_has_versions_and_inventory_and_never_credentials(viewer_api):
    cluster = ClusterFactory(name="east", token="very-secret-token")
    from clusters.models import VersionSample

    VersionSample.objects.create(cluster=cluster, git_version="v1.29.4", kubelet_versions={"n1": "v1.29.4"})
    response = viewer_api.get(f"/api/v1/clusters/{cluster.pk}")
    body = response.json()
    assert body["id"] == cluster.pk and body["versions"][0]["git_version"] == "v1.29.4"
    assert body["inventory"]["kubelet_versions"] == {"east-node-1": "v1.29.4"}
    assert "very-secret-token" not in response.content.decode() and "credentials_encrypted" not in body


def test_register_cluster_with_bad_input_is_400_with_fields_and_writes_nothing(api_as, admin_user):
    response = api_as(admin_user).post(
        "/api/v1/clusters", {"name": "Bad_Name", "api_server": "ftp://x", "verify": False}
    )
    assert response.status_code == 400
    assert "name" in response.json()["fields"] or "api_server" in response.json()["fields"], response.json()
    assert not AuditEvent.objects.filter(action="cluster.register").exists()


@pytest.mark.parametrize("value", ["yes", "true", 1, "on"])
def test_a_boolean_sent_as_a_string_or_number_is_a_422_and_changes_nothing(api_as, admin_user, value):
    """Lax pydantic read "yes" as true: a PATCH turned off TLS verification (a reviewer's finding)."""
    from tests.clusters.factories import ClusterFactory

    cluster = ClusterFactory(name="east")
    response = api_as(admin_user).patch(f"/api/v1/clusters/{cluster.pk}", {"insecure_skip_tls_verify": value})
    assert response.status_code == 422, response.content
    assert "insecure_skip_tls_verify" in response.json()["fields"]
    cluster.refresh_from_db()
    assert cluster.insecure_skip_tls_verify is False
    assert not AuditEvent.objects.filter(action="cluster.edit").exists()


def test_admin_registers_updates_labels_and_rotates_credentials(api_as, admin_user):
    client = api_as(admin_user)
    created = client.post(
        "/api/v1/clusters",
        {
            "name": "west",
            "api_server": "https://west.example:6443",
            "labels": {"env": "dev"},
            "token": "first",
            "verify": False,
        },
    )
    assert created.status_code == 201, created.content
    cluster_id = created.json()["id"]
    assert "first" not in created.content.decode()
    patched = client.patch(f"/api/v1/clusters/{cluster_id}", {"labels": {"env": "prod"}, "verify": False})
    assert patched.json()["labels"] == {"env": "prod"}
    rotated = client.post(f"/api/v1/clusters/{cluster_id}/rotate-credentials", {"token": "second", "verify": False})
    assert rotated.status_code == 200 and "second" not in rotated.content.decode()
    assert list(AuditEvent.objects.filter(cluster="west").order_by("id").values_list("action", flat=True)) == [
        "cluster.register",
        "cluster.edit",
        "cluster.rotate_credentials",
    ]


def test_a_cluster_moves_to_a_new_api_server_with_its_credentials_in_the_same_patch(api_as, admin_user):
    """ClusterPatch had no credential fields and the service refuses a new server without them:
    no PATCH could ever move a cluster (a reviewer's finding). Without them: a 400 naming the field."""
    from clusters.models import Cluster

    client = api_as(admin_user)
    created = client.post(
        "/api/v1/clusters", {"name": "west", "api_server": "https://west.example:6443", "token": "a", "verify": False}
    ).json()
    url = f"/api/v1/clusters/{created['id']}"

    refused = client.patch(url, {"api_server": "https://west2.example:6443", "verify": False})
    assert refused.status_code == 400 and "api_server" in refused.json()["fields"], refused.content
    assert Cluster.objects.get(name="west").api_server == "https://west.example:6443"

    moved = client.patch(url, {"api_server": "https://west2.example:6443", "token": "b", "verify": False})
    assert moved.status_code == 200, moved.content
    assert moved.json()["api_server"] == "https://west2.example:6443" and "b" not in moved.json().values()
    assert Cluster.objects.get(name="west").get_credentials() == {"token": "b"}


def test_create_resource_from_yaml_and_from_json_manifest(operator_api):
    created = operator_api.request("POST", "/api/v1/resources", data=CONFIGMAP_YAML, content_type="application/yaml")
    assert created.status_code == 201, created.content
    [result] = created.json()["results"]
    resource = FederatedResource.objects.get(pk=result["id"])
    assert (resource.name, resource.namespace, result["action"]) == ("settings", "default", "created")
    same = operator_api.post(
        "/api/v1/resources",
        {
            "manifest": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "default"},
                "data": {"colour": "blue"},
            }
        },
    )
    assert same.status_code == 200 and same.json()["results"][0]["action"] == "unchanged"
    changed = operator_api.request(
        "PUT",
        f"/api/v1/resources/{resource.pk}",
        data=CONFIGMAP_YAML.replace("blue", "red"),
        content_type="application/yaml",
    )
    assert changed.json()["results"][0] == {
        "id": resource.pk,
        "kind": "ConfigMap",
        "namespace": "default",
        "name": "settings",
        "action": "configured",
        "revision": 2,
    }


def test_types_list_what_may_be_federated(viewer_api):
    from tests.federation.factories import ftype

    ftype("Deployment")
    types = {t["kind"]: t for t in viewer_api.get("/api/v1/types").json()}
    assert types["Deployment"]["api_version"] == "apps/v1" and types["Deployment"]["plural"] == "deployments"
    assert types["Deployment"]["id"] > 0


def test_put_of_another_resources_manifest_is_400_and_changes_nothing(operator_api):
    operator_api.request("POST", "/api/v1/resources", data=CONFIGMAP_YAML, content_type="application/yaml")
    resource = FederatedResource.objects.get()
    other = CONFIGMAP_YAML.replace("settings", "other")
    response = operator_api.request(
        "PUT", f"/api/v1/resources/{resource.pk}", data=other, content_type="application/yaml"
    )
    assert response.status_code == 400
    assert FederatedResource.objects.count() == 1


def test_dry_run_saves_nothing(operator_api):
    response = operator_api.request(
        "POST", "/api/v1/resources?dry_run=true", data=CONFIGMAP_YAML, content_type="application/yaml"
    )
    assert response.status_code == 200 and response.json()["results"][0]["id"] is None
    assert not FederatedResource.objects.exists()


@pytest.mark.parametrize(
    "body,content_type,status",
    [
        ("kind: [", "application/yaml", 400),
        ("apiVersion: v1\nkind: Nope\nmetadata: {name: x}\n", "application/yaml", 400),
        ('{"manifest": 5}', "application/json", 400),
        ("{not json", "application/json", 400),
        ("<xml/>", "application/xml", 415),
        # a NUL (a YAML "\\0" or JSON "\\u0000" escape) or a lone surrogate: PostgreSQL's jsonb refuses them
        (CONFIGMAP_YAML.replace("blue", '"bl\\0ue"'), "application/yaml", 400),
        (CONFIGMAP_YAML.replace("blue", '"bl\\ud800ue"'), "application/yaml", 400),
        (
            '{"manifest": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a\\u0000": "b"}}}',
            "application/json",
            400,
        ),
    ],
)
def test_bad_manifests_are_4xx_json(operator_api, body, content_type, status):
    response = operator_api.request("POST", "/api/v1/resources", data=body, content_type=content_type)
    assert response.status_code == status, response.content
    assert response.json()["error"] and response.json()["message"]
    assert not FederatedResource.objects.exists()


@pytest.mark.parametrize(
    "text,message",
    [
        (CONFIGMAP_YAML.replace("blue", '"bl\\0ue"'), "The value at /data/colour cannot be stored: Null characters"),
        (CONFIGMAP_YAML.replace("colour", '"col\\x00our"'), "A key at /data cannot be stored: Null characters"),
    ],
)
def test_a_null_character_in_a_manifest_is_400_and_saves_nothing(operator_api, text, message):
    response = operator_api.request("POST", "/api/v1/resources", data=text, content_type="application/yaml")
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid" and message in response.json()["message"]
    assert not FederatedResource.objects.exists()


def test_an_override_index_that_is_not_ascii_digits_is_400_and_saves_nothing(operator_api):
    ClusterFactory(name="east")
    text = FEDERATED_DEPLOYMENT_YAML.replace("/spec/replicas", "/spec/template/spec/containers/²/image")
    response = operator_api.request("POST", "/api/v1/resources", data=text, content_type="application/yaml")
    assert response.status_code == 400, response.content
    assert "containers/²/image does not exist" in response.json()["message"]
    assert not FederatedResource.objects.exists()


@pytest.fixture
def configmap(operator_api):
    operator_api.request("POST", "/api/v1/resources", data=CONFIGMAP_YAML, content_type="application/yaml")
    return FederatedResource.objects.get()


def test_a_cluster_id_on_a_request_for_a_resource_is_refused_not_ignored(operator_api, configmap):
    from federation.approvals.models import ChangeRequest

    cluster = ClusterFactory(name="west")
    response = operator_api.post("/api/v1/change-requests", {"resource_id": configmap.pk, "cluster_id": cluster.pk})
    assert response.status_code == 400, response.content
    assert response.json()["fields"] == {"cluster_id": ["Only with kind=unjoin."]}
    assert not ChangeRequest.objects.exists()


def test_a_resource_request_of_another_kind_is_a_422_and_a_create_of_a_propagated_one_is_refused(
    operator_api, configmap
):
    """kind=upgrade on a resource was a 409 "Unknown change kind"; kind=create on a propagated
    resource opened a request that changed nothing under a "Create" title (a reviewer's findings)."""
    from federation.models import Revision

    upgrade = operator_api.post("/api/v1/change-requests", {"resource_id": configmap.pk, "kind": "upgrade"})
    assert upgrade.status_code == 422 and "kind" in upgrade.json()["fields"], upgrade.content
    FederatedResource.objects.filter(pk=configmap.pk).update(
        propagated_revision=Revision.objects.get(resource=configmap, number=1)
    )
    create = operator_api.post("/api/v1/change-requests", {"resource_id": configmap.pk, "kind": "create"})
    assert create.status_code == 409 and "was propagated already" in create.json()["message"], create.content
    assert not ChangeRequest.objects.exists()


def test_idempotency_key_replays_the_first_reply_and_refuses_a_different_body(operator_api, configmap):
    key = {"Idempotency-Key": "abc-1"}
    first = operator_api.post("/api/v1/change-requests", {"resource_id": configmap.pk}, **key)
    second = operator_api.post("/api/v1/change-requests", {"resource_id": configmap.pk}, **key)
    assert first.status_code == second.status_code == 201
    assert first.json() == second.json() and second["Idempotent-Replayed"] == "true"
    assert ChangeRequest.objects.count() == 1
    other = operator_api.post("/api/v1/change-requests", {"resource_id": configmap.pk, "title": "x"}, **key)
    assert other.status_code == 422 and other.json()["error"] == "idempotency_key_reused"
    fresh = operator_api.post("/api/v1/change-requests", {"resource_id": configmap.pk}, **{"Idempotency-Key": "abc-2"})
    assert fresh.status_code == 201 and fresh.json()["id"] != first.json()["id"]


def test_an_idempotency_key_does_not_replay_a_reply_to_another_content_type(operator_api):
    """The same bytes as YAML (no apiVersion: 400) and then as JSON are two requests: the key's reuse
    is refused, as for another body (the 400 was replayed: the fingerprint left the content type
    out, a reviewer's finding)."""
    body = json.dumps({"manifest": {**yaml.safe_load(CONFIGMAP_YAML)}})
    key = {"Idempotency-Key": "ct-1"}
    as_yaml = operator_api.request("POST", "/api/v1/resources", data=body, content_type="application/yaml", headers=key)
    assert as_yaml.status_code == 400
    as_json = operator_api.request("POST", "/api/v1/resources", data=body, headers=key)
    assert as_json.status_code == 422 and as_json.json()["error"] == "idempotency_key_reused"
    assert (
        operator_api.request("POST", "/api/v1/resources", data=body, headers={"Idempotency-Key": "ct-2"}).status_code
        == 201
    )


def test_an_idempotency_key_does_not_replay_a_csrf_refusal(operator, configmap):
    """A browser session's POST without its CSRF token is refused (403); the retry with the token
    got that 403 replayed, not its change request (a reviewer's finding)."""
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator)
    browser.get("/api/v1/clusters")
    browser.get("/")
    token = browser.cookies["csrftoken"].value
    key = {"Idempotency-Key": "csrf-1"}
    body = json.dumps({"resource_id": configmap.pk})
    refused = browser.post("/api/v1/change-requests", body, content_type="application/json", headers=key)
    assert refused.status_code == 403
    retried = browser.post(
        "/api/v1/change-requests", body, content_type="application/json", headers={**key, "X-CSRFToken": token}
    )
    assert retried.status_code == 201, retried.content
    assert "Idempotent-Replayed" not in retried and ChangeRequest.objects.count() == 1


def test_idempotency_keys_are_per_user(api_as, operator, make_user, configmap):
    from fedportal.roles import Role

    other = make_user("olga-operator", Role.OPERATOR)
    a = api_as(operator).post("/api/v1/change-requests", {"resource_id": configmap.pk}, **{"Idempotency-Key": "k"})
    b = api_as(other).post("/api/v1/change-requests", {"resource_id": configmap.pk}, **{"Idempotency-Key": "k"})
    assert a.json()["id"] != b.json()["id"] and IdempotencyRecord.objects.count() == 2


def test_an_idempotency_key_does_not_replay_a_reply_to_a_user_who_lost_a_role(api_as, make_user, configmap):
    """The operator who opened a change request and lost the operator role since gets a 403 for the
    retry, not the stored 201 (the view would refuse them now); a role added since changes nothing."""
    from django.contrib.auth.models import Group

    from fedportal.roles import Role

    user = make_user("oona-operator", Role.OPERATOR)
    key = {"Idempotency-Key": "roles-1"}
    api = api_as(user)  # one token: the key's fingerprint names it
    first = api.post("/api/v1/change-requests", {"resource_id": configmap.pk}, **key)
    assert first.status_code == 201
    user.groups.add(Group.objects.get_or_create(name=Role.APPROVER)[0])
    again = api.post("/api/v1/change-requests", {"resource_id": configmap.pk}, **key)
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"

    user.groups.remove(Group.objects.get(name=Role.OPERATOR))
    refused = api.post("/api/v1/change-requests", {"resource_id": configmap.pk}, **key)
    assert refused.status_code == 403 and "Idempotent-Replayed" not in refused
    assert refused.json()["error"] == "forbidden" and "operator" in refused.json()["message"]
    assert ChangeRequest.objects.count() == 1


def test_change_request_actions_and_errors(operator_api, api_as, approver, configmap):
    cr = operator_api.post("/api/v1/change-requests", {"resource_id": configmap.pk}).json()
    assert cr["state"] == "Draft" and cr["resource_id"] == configmap.pk
    assert operator_api.post(f"/api/v1/change-requests/{cr['id']}/approve").status_code == 403
    submitted = operator_api.post(f"/api/v1/change-requests/{cr['id']}/submit")
    assert submitted.json()["state"] == "Submitted"
    again = operator_api.post(f"/api/v1/change-requests/{cr['id']}/submit")
    assert again.status_code == 409 and again.json()["error"] == "conflict"
    reject = api_as(approver).post(f"/api/v1/change-requests/{cr['id']}/reject", {"comment": ""})
    # bad input, not a conflict (it was a 409); the request stays as it was
    assert reject.status_code == 400 and "comment is required" in reject.json()["message"]
    assert reject.json()["fields"] == {"comment": ["Required: say why you reject the request."]}
    assert operator_api.get(f"/api/v1/change-requests/{cr['id']}").json()["state"] == "Submitted"
    rejected = api_as(approver).post(f"/api/v1/change-requests/{cr['id']}/reject", {"comment": "not now"})
    assert rejected.json()["state"] == "Rejected"
    assert [a["decision"] for a in rejected.json()["approval_list"]] == ["reject"]
    listed = operator_api.get("/api/v1/change-requests", {"state": "Rejected"}).json()["items"]
    assert [c["id"] for c in listed] == [cr["id"]]
    assert operator_api.get("/api/v1/change-requests", {"state": "Draft"}).json()["items"] == []


NUL = "a\x00b"


@pytest.mark.parametrize(
    "who,method,path,body,field",
    [
        ("operator", "POST", "/api/v1/change-requests", {"title": NUL}, "title"),
        ("operator", "POST", "/api/v1/change-requests", {"description": NUL}, "description"),
        ("approver", "POST", "/api/v1/change-requests/{cr}/approve", {"comment": NUL, "content_hash": "0"}, "comment"),
        ("approver", "POST", "/api/v1/change-requests/{cr}/reject", {"comment": NUL}, "comment"),
        ("operator", "POST", "/api/v1/change-requests/{cr}/cancel", {"reason": NUL}, "reason"),
        ("operator", "POST", "/api/v1/tokens", {"name": NUL}, "name"),
        ("admin", "POST", "/api/v1/clusters", {"name": "west", "api_server": f"https://{NUL}.example"}, "api_server"),
        ("admin", "PATCH", "/api/v1/clusters/{cluster}", {"labels": {"env": NUL}}, "labels"),
        ("admin", "PATCH", "/api/v1/clusters/{cluster}", {"labels": {NUL: "prod"}}, "labels"),
    ],
)
def test_a_null_character_in_a_request_body_is_422_naming_the_field_and_writes_nothing(
    api_as, operator, approver, admin_user, configmap, who, method, path, body, field
):
    # PostgreSQL refuses NUL in text: each of these was a 500 there (and stored as sent on SQLite)
    client = api_as({"operator": operator, "approver": approver, "admin": admin_user}[who])
    cr = api_as(operator).post("/api/v1/change-requests", {"resource_id": configmap.pk}).json()
    api_as(operator).post(f"/api/v1/change-requests/{cr['id']}/submit")
    cluster = ClusterFactory(name="east", labels={"env": "dev"})

    def written():
        return (
            list(AuditEvent.objects.exclude(action="api.token.use").values_list("action")),  # use: every call
            list(ChangeRequest.objects.values_list("id", "state", "title", "description")),
            list(Approval.objects.values_list("id")),
            list(ApiToken.objects.values_list("id", "name")),
            list(Cluster.objects.values_list("name", "api_server", "labels")),
        )

    before = written()
    payload = {"resource_id": configmap.pk, **body} if path == "/api/v1/change-requests" else body
    response = client.request(method, path.format(cr=cr["id"], cluster=cluster.pk), payload)
    assert response.status_code == 422, response.content
    assert response.json() == {
        "error": "invalid_request",
        "message": f"{field}: Null characters are not allowed.",
        "fields": {field: ["Null characters are not allowed."]},
    }
    assert written() == before


def test_every_request_body_schema_refuses_text_the_database_cannot_store():
    """One place: every body an endpoint reads is an api.common.In, whose check covers every string."""
    import importlib
    import pkgutil

    from ninja import Router

    import api.endpoints
    from api.common import In

    bodies = {}
    for info in pkgutil.iter_modules(api.endpoints.__path__):
        module = importlib.import_module(f"api.endpoints.{info.name}")
        for router in (value for value in vars(module).values() if isinstance(value, Router)):
            for path, view in router.path_operations.items():
                for operation in view.operations:
                    for model in operation.models:
                        if model.__ninja_param_source__ == "body":
                            for field in model.model_fields.values():
                                bodies[f"{info.name} {operation.methods} {path!r}"] = field.annotation
    assert len(bodies) >= 7, bodies  # the ones this test was written against
    assert {where: schema for where, schema in bodies.items() if not issubclass(schema, In)} == {}


def test_missing_objects_are_404_json(viewer_api):
    for path in (
        "/api/v1/clusters/999",
        "/api/v1/resources/999",
        "/api/v1/change-requests/999",
        "/api/v1/nothing-here",
        # a newline in the path (schemathesis sent one as a change id): JSON too, not the site's HTML 404
        "/api/v1/change-requests/%0A/approve",
        "/api/v1/change-requests/1%0A2",
    ):
        response = viewer_api.get(path)
        assert response.status_code == 404 and response.json()["error"] == "not_found", path


def test_audit_list_filters_and_cursor(viewer_api):
    for i in range(5):
        record_event("test.api", summary=f"event {i}", cluster="east" if i % 2 else "")
    body = viewer_api.get("/api/v1/audit/events", {"action": "test.*", "limit": 2}).json()
    assert [e["summary"] for e in body["items"]] == ["event 4", "event 3"]
    rest = viewer_api.get(
        "/api/v1/audit/events", {"action": "test.*", "limit": 10, "cursor": body["next_cursor"]}
    ).json()
    assert [e["summary"] for e in rest["items"]] == ["event 2", "event 1", "event 0"] and rest["next_cursor"] is None
    assert [e["summary"] for e in viewer_api.get("/api/v1/audit/events", {"cluster": "east"}).json()["items"]] == [
        "event 3",
        "event 1",
    ]
    bad = viewer_api.get("/api/v1/audit/events", {"action": "a*b*"})
    assert bad.status_code == 400 and "action" in bad.json()["fields"]
    # any UTC offset ISO 8601 allows (PostgreSQL refuses one beyond 15:59: a fuzzed -19:31 was a 500)
    far_offset = viewer_api.get("/api/v1/audit/events", {"action": "test.*", "since": "2000-06-18T20:49:31-19:31"})
    assert far_offset.status_code == 200 and len(far_offset.json()["items"]) == 5
    year_zero = viewer_api.get("/api/v1/audit/events", {"since": "0001-01-01T00:00:00+01:00"})
    assert year_zero.status_code == 400 and "since" in year_zero.json()["fields"]


def test_audit_csv_is_streamed_and_audited(viewer_api, viewer):
    record_event("test.api", summary="=cmd|' /C calc'!A0")
    response = viewer_api.get("/api/v1/audit/events", {"action": "test.api"}, Accept="text/csv")
    assert response.streaming and response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))
    assert rows[0][:3] == ["ID", "Time (UTC)", "Actor"] and len(rows) == 2
    assert rows[1][8].startswith("'=")  # neutralised like the page's export
    assert AuditEvent.objects.filter(action="audit.export", actor_name=viewer.username).exists()


def test_drift_reports_as_json_and_csv(viewer_api):
    ClusterFactory(host=True, server_version="v1.29.0", version_minor=29)
    ClusterFactory(name="old", server_version="v1.26.0", version_minor=26)
    skew = viewer_api.get("/api/v1/drift/skew").json()
    assert skew["hosts"] == ["host"] and [r["name"] for r in skew["rows"]] == ["old"]
    assert skew["rows"][0]["severity"] in ("P0", "P1", "P2", "P3")
    compliance = viewer_api.get("/api/v1/drift/compliance").json()
    assert compliance["total"] == 2 and {r["name"] for r in compliance["rows"]} == {"host", "old"}
    assert viewer_api.get("/api/v1/drift/compatibility").json() == {"rows": [], "next_cursor": None}
    exported = viewer_api.get("/api/v1/drift/compliance", Accept="text/csv")
    text = b"".join(exported.streaming_content).decode("utf-8-sig")
    assert text.splitlines()[0].startswith("Cluster,Role,Version,Score") and len(text.splitlines()) == 3
    bad = viewer_api.get("/api/v1/drift/skew", {"severity": "P9"})
    assert bad.status_code == 422 and "severity" in bad.json()["fields"]


def test_schema_and_docs_are_served_without_a_cdn(client):
    schema = client.get("/api/v1/openapi.json").json()
    assert schema["openapi"].startswith("3.") and "/api/v1/change-requests/{change_id}/approve" in schema["paths"]
    docs = client.get("/api/v1/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in docs and not EXTERNAL_ASSET.search(docs)


def test_the_compatibility_matrix_is_paged_by_cell_without_skipping_or_repeating_one(viewer_api):
    from tests.federation.factories import web_deployment

    for name, minor in (("a", 29), ("b", 27), ("c", 25)):
        ClusterFactory(name=name, server_version=f"v1.{minor}.0", version_minor=minor)
    for name in ("web", "api", "jobs"):
        web_deployment(name=name, placement={"clusters": ["a", "b", "c"]})
    whole = viewer_api.get("/api/v1/drift/compatibility", {"limit": 100}).json()
    assert len(whole["rows"]) == 9 and whole["next_cursor"] is None
    pages, cursor = [], None
    while True:
        body = viewer_api.get(
            "/api/v1/drift/compatibility", {"limit": 4, **({"cursor": cursor} if cursor else {})}
        ).json()
        pages.append(body["rows"])
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert [len(p) for p in pages] == [4, 4, 1]
    assert [row for p in pages for row in p] == whole["rows"], "a cell skipped, repeated or out of order"
    # resources removed before the cursor (offset paging would skip cells) or added after it do not
    # shift the next page
    first = viewer_api.get("/api/v1/drift/compatibility", {"limit": 4}).json()
    FederatedResource.objects.get(name="web").delete()  # its 3 cells were all on the first page
    web_deployment(name="zeta", placement={"clusters": ["a"]})
    rest = viewer_api.get("/api/v1/drift/compatibility", {"limit": 100, "cursor": first["next_cursor"]}).json()
    assert rest["rows"][:5] == whole["rows"][4:] and rest["rows"][5]["resource"].endswith("zeta")


def test_compatibility_pages_do_not_depend_on_the_databases_collation(viewer_api, monkeypatch):
    """The clusters come from the database by name, in its collation's order (en_US puts "ab" before
    "a-c", code points the other way); the cursor compares names in Python. Here the database's
    order is made the reverse of Python's: the pages must still hold every cell once."""
    from drift import selectors
    from tests.federation.factories import web_deployment

    names = ["ab", "a-c", "a1", "eu-west-1", "euwest"]
    for name in names:
        ClusterFactory(name=name, server_version="v1.29.0", version_minor=29)
    for name in ("web", "api"):
        web_deployment(name=name, placement={"clusters": names})
    by_name = selectors.fleet_rows
    monkeypatch.setattr(selectors, "fleet_rows", lambda **kw: list(reversed(by_name(**kw))))
    seen, cursor = [], None
    while True:
        body = viewer_api.get("/api/v1/drift/compatibility", {"limit": 3, **({"cursor": cursor} if cursor else {})})
        seen += [(row["resource"], row["cluster"]) for row in body.json()["rows"]]
        if (cursor := body.json()["next_cursor"]) is None:
            break
    assert len(seen) == len(set(seen)) == 10, "a cell skipped or repeated"


@pytest.mark.parametrize(
    "params,status,field",
    [
        ({"cursor": "not-a-cursor"}, 400, "cursor"),
        ({"cursor": "WzFd"}, 400, "cursor"),  # base64 of [1]: not the (resource, cluster) key
        ({"cursor": "W1siYSIsICJiIl1d"}, 400, "cursor"),  # [["a", "b"]]
        ({"limit": 0}, 422, "limit"),
        ({"limit": 5001}, 422, "limit"),
    ],
)
def test_a_bad_compatibility_page_request_is_refused_with_a_reason(viewer_api, params, status, field):
    response = viewer_api.get("/api/v1/drift/compatibility", params)
    assert response.status_code == status and field in response.json()["fields"]
