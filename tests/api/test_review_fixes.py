"""Review fixes: Idempotency-Key and secrets / read-only tokens / abandoned keys; the metrics allow-list
behind proxies; PUT of a resource whose kind another API group shares; api_server userinfo; unknown
input fields."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from api.models import ApiToken, IdempotencyRecord
from federation.approvals.models import ChangeRequest
from federation.models import FederatedResource
from tests.api.test_endpoints import CONFIGMAP_YAML

pytestmark = pytest.mark.django_db


@pytest.fixture
def configmap(api_as, operator):
    api_as(operator).request("POST", "/api/v1/resources", data=CONFIGMAP_YAML, content_type="application/yaml")
    return FederatedResource.objects.get()


# 1. Idempotency-Key


def test_a_token_creation_reply_is_never_stored_nor_replayed(api_as, operator):
    api = api_as(operator)
    key = {"Idempotency-Key": "new-token"}
    first = api.post("/api/v1/tokens", {"name": "ci"}, **key)
    assert first.status_code == 201
    secret = first.json()["token"]
    assert secret.encode() not in b"".join(bytes(r.body) for r in IdempotencyRecord.objects.all())
    again = api.post("/api/v1/tokens", {"name": "ci"}, **key)
    assert again.status_code == 409 and secret not in again.content.decode()
    assert "create another token" in again.json()["message"]
    assert ApiToken.objects.filter(name="ci").count() == 1


def test_a_read_only_token_never_gets_the_replay_of_a_write(api_as, operator, configmap):
    key = {"Idempotency-Key": "same"}
    first = api_as(operator).post("/api/v1/change-requests", {"resource_id": configmap.pk}, **key)
    assert first.status_code == 201
    replay = api_as(operator, read_only=True).post("/api/v1/change-requests", {"resource_id": configmap.pk}, **key)
    assert replay.status_code == 403 and "Idempotent-Replayed" not in replay
    assert ChangeRequest.objects.count() == 1


def test_a_key_is_not_shared_between_two_tokens_of_one_user(api_as, operator, configmap):
    key = {"Idempotency-Key": "shared"}
    assert api_as(operator).post("/api/v1/change-requests", {"resource_id": configmap.pk}, **key).status_code == 201
    other = api_as(operator).post("/api/v1/change-requests", {"resource_id": configmap.pk}, **key)
    assert other.status_code == 422 and "Idempotent-Replayed" not in other


def test_an_abandoned_running_key_is_taken_over_by_a_retry(api_as, operator, configmap):
    api = api_as(operator)
    key = {"Idempotency-Key": "died"}
    first = api.post("/api/v1/change-requests", {"resource_id": configmap.pk}, **key)
    record = IdempotencyRecord.objects.get(key="died")
    # as if the first request had died mid-way: still "running"
    IdempotencyRecord.objects.filter(pk=record.pk).update(status=0, body=b"")
    busy = api.post("/api/v1/change-requests", {"resource_id": configmap.pk}, **key)
    assert busy.status_code == 409 and "still running" in busy.json()["message"]
    IdempotencyRecord.objects.filter(pk=record.pk).update(created_at=timezone.now() - timedelta(minutes=6))
    retry = api.post("/api/v1/change-requests", {"resource_id": configmap.pk}, **key)
    assert retry.status_code == 201 and retry.json()["id"] != first.json()["id"]
    replay = api.post("/api/v1/change-requests", {"resource_id": configmap.pk}, **key)
    assert replay.json() == retry.json() and replay["Idempotent-Replayed"] == "true"


# 2. the metrics allow-list behind trusted proxies


@override_settings(
    FEDPORTAL_METRICS_TOKEN="", FEDPORTAL_METRICS_ALLOWED_NETWORKS=["10.0.0.0/8"], FEDPORTAL_TRUSTED_PROXIES=1
)
def test_the_metrics_allow_list_judges_the_client_behind_a_trusted_proxy(client):
    # the proxy (10.1.1.1, inside the allow-list) forwards an outside client: refused
    outside = client.get("/metrics", REMOTE_ADDR="10.1.1.1", HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert outside.status_code == 403
    inside = client.get("/metrics", REMOTE_ADDR="192.168.1.1", HTTP_X_FORWARDED_FOR="203.0.113.9, 10.2.2.2")
    assert inside.status_code == 200


# 3. two federated types sharing a kind in different API groups

WIDGET_YAML = """\
apiVersion: {group}/v1
kind: Widget
metadata: {{name: w, namespace: default}}
spec: {{size: {size}}}
"""


@pytest.fixture
def widgets(api_as, operator):
    from federation.models import FederatedType

    api = api_as(operator)
    ids = {}
    for group in ("a.example.com", "b.example.com"):
        FederatedType.objects.create(group=group, version="v1", kind="Widget", plural="widgets")
        reply = api.request(
            "POST", "/api/v1/resources", data=WIDGET_YAML.format(group=group, size=1), content_type="application/yaml"
        )
        assert reply.status_code == 201, reply.content
        ids[group] = FederatedResource.objects.get(type__group=group).pk
    return ids


def test_the_reply_names_the_resource_of_the_manifest_api_group(api_as, operator, widgets):
    for group, size in (("b.example.com", 2), ("a.example.com", 2)):
        text = WIDGET_YAML.format(group=group, size=size)
        reply = api_as(operator).request("POST", "/api/v1/resources", data=text, content_type="application/yaml")
        assert reply.status_code == 200, reply.content
        assert reply.json()["results"][0]["id"] == widgets[group]


def test_put_refuses_a_manifest_of_the_same_kind_in_another_api_group(api_as, operator, widgets):
    a, b = widgets["a.example.com"], widgets["b.example.com"]
    before = FederatedResource.objects.get(pk=b).current_revision_id
    text = WIDGET_YAML.format(group="b.example.com", size=3)
    reply = api_as(operator).request("PUT", f"/api/v1/resources/{a}", data=text, content_type="application/yaml")
    assert reply.status_code == 400 and "is not (only)" in reply.json()["message"]
    assert FederatedResource.objects.get(pk=b).current_revision_id == before
    same = WIDGET_YAML.format(group="a.example.com", size=3)
    ok = api_as(operator).request("PUT", f"/api/v1/resources/{a}", data=same, content_type="application/yaml")
    assert ok.status_code == 200 and ok.json()["results"][0]["id"] == a


# 4. api_server with userinfo

USERINFO_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: east
  cluster: {server: "https://admin:hunter2@east.example:6443", insecure-skip-tls-verify: true}
users:
- name: east
  user: {token: abc}
contexts:
- name: east
  context: {cluster: east, user: east}
current-context: east
"""


@pytest.mark.parametrize("url", ["https://user:pw@west.example:6443", "https://user:p?w@west.example:6443"])
def test_an_api_server_with_userinfo_is_refused_by_the_api(api_as, admin_user, url):
    from clusters.models import Cluster

    response = api_as(admin_user).post(
        "/api/v1/clusters", {"name": "west", "api_server": url, "token": "t", "verify": False}
    )
    assert response.status_code == 400, response.content
    assert "user name or password" in " ".join(response.json()["fields"]["api_server"])
    assert not Cluster.objects.exists()


def test_an_api_server_with_userinfo_is_refused_by_the_kubeconfig_import(admin_user):
    from django.core.exceptions import ValidationError

    from clusters.models import Cluster
    from clusters.services.kubeconfig import import_kubeconfig

    with pytest.raises(ValidationError, match="user name or password"):
        import_kubeconfig(USERINFO_KUBECONFIG, actor=admin_user, verify=False)
    assert not Cluster.objects.exists()


@pytest.mark.parametrize(
    "url",
    [
        "https://user@east.example",
        "https://u:p@east.example:6443/x",
        # urlsplit's authority ends at "?" or "#": these passwords went unseen
        "https://admin:s3cr?et@east.example:6443",
        "https://admin:s3cr#et@east.example:6443",
    ],
)
def test_the_cluster_model_refuses_userinfo_in_the_api_server(url):
    from django.core.exceptions import ValidationError

    from clusters.models import Cluster

    cluster = Cluster(name="east", api_server=url)
    with pytest.raises(ValidationError) as caught:
        cluster.full_clean(exclude=["credentials_encrypted"], validate_unique=False, validate_constraints=False)
    assert "user name or password" in str(caught.value.message_dict["api_server"])
    Cluster(name="east", api_server="https://east.example:6443").full_clean(
        exclude=["credentials_encrypted"], validate_unique=False, validate_constraints=False
    )


def test_a_password_the_audit_log_recorded_is_not_shown(client, api_as, viewer, operator):
    """A cluster registered with a password in its URL before such URLs were refused: its events keep
    the URL as recorded (the chain is tamper-evident), and no page, API response or CSV export shows
    the password."""
    from fedportal.audit import record_event, verify_chain
    from fedportal.models import AuditEvent

    url = "https://admin:hunter2?pw@leaky.example.com:6443"
    event = record_event(
        "clusters.cluster.register",
        summary=f"Registered member cluster leaky ({url})",
        after={"name": "leaky", "api_server": url, "labels": {"note": "was https://x:hunter2?pw@old/"}},
    )
    client.force_login(viewer)
    pages = [client.get(f"/audit/{event.pk}/"), client.get("/audit/"), client.get("/audit/export.csv")]
    api = [
        api_as(viewer).get("/api/v1/audit/events"),
        api_as(viewer).get("/api/v1/audit/events", None, Accept="text/csv"),
    ]
    for response in pages + api:
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert response.status_code == 200, response.wsgi_request.get_full_path()
        assert b"hunter2" not in body, response.wsgi_request.get_full_path()
        assert b"leaky.example.com:6443" in body, response.wsgi_request.get_full_path()
    shown = api_as(viewer).get("/api/v1/audit/events").json()["items"]
    registered = next(item for item in shown if item["id"] == event.pk)
    assert registered["after"]["api_server"] == "https://leaky.example.com:6443"
    assert registered["after"]["labels"]["note"] == "was https://old/"
    assert "hunter2" in AuditEvent.objects.get(pk=event.pk).summary, "the stored event was rewritten"
    assert verify_chain().ok


# 5. unknown input fields


def test_an_unknown_field_is_a_422_naming_it_and_creates_nothing(api_as, operator):
    response = api_as(operator).post("/api/v1/tokens", {"name": "ci", "readonly": True})
    assert response.status_code == 422, response.content
    assert "readonly" in response.content.decode(), response.content
    assert not ApiToken.objects.filter(name="ci").exists()


# 6. mapping keys YAML reads as numbers (a reviewer's 500: sorted() met an int beside strings)

FEDERATED_CONFIGMAP_WITH_NUMBER_KEYS = """\
apiVersion: types.kubefed.io/v1beta1
kind: FederatedConfigMap
metadata: {name: settings, namespace: default}
spec:
  template:
    data: {colour: blue}
  placement: {clusters: []}
  rolloutStrategy: {1: x, waves: []}
"""


def test_a_number_key_in_a_rollout_strategy_is_a_400_naming_it(api_as, operator, configmap):
    before = FederatedResource.objects.get(pk=configmap.pk).current_revision_id
    reply = api_as(operator).request(
        "PUT",
        f"/api/v1/resources/{configmap.pk}",
        data=FEDERATED_CONFIGMAP_WITH_NUMBER_KEYS,
        content_type="application/yaml",
    )
    assert reply.status_code == 400, reply.content
    assert "unknown field '1'" in reply.json()["message"]
    assert FederatedResource.objects.get(pk=configmap.pk).current_revision_id == before


# 7. reconcile requests are FedPortal's to open


def test_a_reconcile_request_cannot_be_opened_through_the_api(api_as, operator, configmap):
    reply = api_as(operator).post("/api/v1/change-requests", {"resource_id": configmap.pk, "kind": "reconcile"})
    assert reply.status_code == 422, reply.content
    assert not ChangeRequest.objects.filter(kind="reconcile").exists()


# 8. a changed rollout strategy is a change

FEDERATED_CONFIGMAP_WITH_STRATEGY = """\
apiVersion: types.kubefed.io/v1beta1
kind: FederatedConfigMap
metadata: {{name: settings, namespace: default}}
spec:
  template:
    data: {{colour: blue}}
  placement: {{clusters: []}}
  rolloutStrategy: {{autoRollback: {auto}, waves: [{{name: all, clusterSelector: {{}}}}]}}
"""


def test_a_put_that_changes_only_the_rollout_strategy_is_configured(api_as, operator, configmap):
    api = api_as(operator)
    url = f"/api/v1/resources/{configmap.pk}"

    def put(auto):
        text = FEDERATED_CONFIGMAP_WITH_STRATEGY.format(auto=auto)
        reply = api.request("PUT", url, data=text, content_type="application/yaml")
        assert reply.status_code == 200, reply.content
        return reply.json()["results"][0]["action"]

    put("true")
    assert put("true") == "unchanged"
    assert put("false") == "configured", "only autoRollback changed: approvals given before are void"
