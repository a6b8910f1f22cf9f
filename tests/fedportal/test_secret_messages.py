"""Free text about a Secret never carries its values: a library's error about an override (the
edit form, the API), and an API server's refusal that quotes what it refused (a status, a target,
the audit log, a drift repair). Found by a review after issue 16's masking walk: the walk reads
every page, but these texts are only written when something fails."""

import base64
import json

import pytest
from django.urls import reverse

from api.tokens import create_token
from clusters import kube
from clusters.models import Cluster
from federation import propagation, services
from federation.choices import DriftPolicy
from federation.models import PropagatedVersion, PropagationTarget
from federation.propagation import drift as drift_module
from federation.propagation import network
from fedportal.masking import scrub_message
from fedportal.models import AuditEvent
from tests.federation.factories import as_approved, drain, federate_namespace, register_fleet

VALUE = "sentinel-message-R6yT2e"
ENCODED = base64.b64encode(VALUE.encode()).decode()
MEMBERS = ["m127", "m128"]

pytestmark = pytest.mark.django_db


def federated_secret(operator, **extra):
    return as_approved(
        services.create_resource(
            services.find_type("Secret"),
            namespace="shop",
            name="db",
            actor=operator,
            template={"type": "Opaque", "data": {"password": ENCODED}},
            placement={"clusters": MEMBERS},
            **extra,
        )
    )


@pytest.fixture
def offline_secret(operator):
    for name in MEMBERS:
        Cluster.objects.create(name=name, api_server=f"https://{name}.example:6443")
    return federated_secret(operator)


def test_scrub_message_removes_values_as_python_and_json_quote_them():
    value = "it's a \\ secret"
    source = {"kind": "Secret", "data": {"k": value}}
    for text in (f"found {value}", f"found {value!r}", f"found {json.dumps(value)}", f"found {{'k': {value!r}}}"):
        assert "secret" not in scrub_message(text, source).replace("<secret hmac:", "")


def test_an_override_error_on_the_edit_form_does_not_show_the_stored_value(client, operator, offline_secret):
    client.force_login(operator)
    url = reverse("federation:resource_edit", args=[offline_secret.pk])
    template = client.get(url).context["form"].initial["template_yaml"]
    assert ENCODED not in template  # the form shows a token in its place
    data = {
        "template_yaml": template,
        "placement_mode": "clusters",
        "clusters": MEMBERS,
        "retention": offline_secret.retention,
        "drift_policy": offline_secret.drift_policy,
        "message": "x",
        "ov-TOTAL_FORMS": "1",
        "ov-INITIAL_FORMS": "0",
        "ov-MIN_NUM_FORMS": "0",
        "ov-MAX_NUM_FORMS": "200",
        "ov-0-cluster": "m128",
        "ov-0-op": "add",
        "ov-0-path": "/data/nested/key",
        "ov-0-value": "eA==",
        "rsp-TOTAL_FORMS": "0",
        "rsp-INITIAL_FORMS": "0",
        "rsp-MIN_NUM_FORMS": "0",
        "rsp-MAX_NUM_FORMS": "200",
    }
    response = client.post(url, data)
    page = response.content.decode()
    assert response.status_code == 400 and "member &#x27;nested&#x27; not found" in page
    assert ENCODED not in page and VALUE not in page


def test_an_override_error_in_the_api_does_not_echo_the_data(client, operator, offline_secret):
    manifest = {
        "apiVersion": "types.kubefed.io/v1beta1",
        "kind": "FederatedSecret",
        "metadata": {"namespace": "shop", "name": "db"},
        "spec": {
            "template": {"type": "Opaque", "data": {"password": ENCODED}},
            "placement": {"clusters": [{"name": "m128"}]},
            "overrides": [
                {
                    "clusterName": "m128",
                    "clusterOverrides": [{"op": "add", "path": "/data/nested/key", "value": "eA=="}],
                }
            ],
        },
    }
    response = client.put(
        f"/api/v1/resources/{offline_secret.pk}",
        json.dumps({"manifest": manifest}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {create_token(operator, actor=operator).secret}"},
    )
    assert response.status_code == 400 and "not found" in response.content.decode()
    assert ENCODED not in response.content.decode()


def quoting_refusal(conn, ftype, manifest, **kwargs):
    """What an API server's 422 looks like when it quotes the refused value (FedPortal's own call
    replaced: the simulator never quotes a Secret's data)."""
    value = (manifest.get("data") or {}).get("password", "")
    raise kube.KubePermanentError(
        f'Secret "db" is invalid: data[password]: Invalid value: "{value}"', kind=kube.KIND_INVALID, status=422
    )


def stored_texts(resource) -> str:
    return json.dumps(
        [
            list(AuditEvent.objects.values_list("summary", "before", "after")),
            list(PropagatedVersion.objects.filter(resource=resource).values_list("message", flat=True)),
            list(PropagationTarget.objects.filter(run__resource=resource).values_list("message", flat=True)),
        ]
    )


def test_an_api_servers_refusal_quoting_a_value_is_stored_without_it(client, fleet, operator, viewer, monkeypatch):
    register_fleet(fleet, MEMBERS)
    drain(propagation.propagate_revision(federate_namespace("shop", MEMBERS)))
    resource = federated_secret(operator)
    monkeypatch.setattr(network, "apply_as_fedportal", quoting_refusal)
    drain(propagation.propagate_revision(resource))
    stored = stored_texts(resource)
    assert "Invalid value" in stored and ENCODED not in stored
    client.force_login(viewer)
    assert ENCODED not in client.get(reverse("audit:event_list")).content.decode()


def test_a_drift_repair_refusal_quoting_a_value_is_stored_without_it(fleet, operator, monkeypatch):
    register_fleet(fleet, MEMBERS)
    drain(propagation.propagate_revision(federate_namespace("shop", MEMBERS)))
    resource = federated_secret(operator, drift_policy=DriftPolicy.ENFORCE)
    drain(propagation.propagate_revision(resource))
    fleet.external_edit("m127", "v1", "Secret", "shop", "db", {"data": {"password": "b3RoZXI="}})
    monkeypatch.setattr(drift_module, "apply_as_fedportal", quoting_refusal)
    propagation.detect_drift(resource=resource)
    stored = stored_texts(resource)
    assert "Could not repair drift" in stored and ENCODED not in stored


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
LIVE_VALUE = base64.b64encode(b"sentinel-live-edit-W8kD3s").decode()


def last_applied(value):
    return json.dumps({"apiVersion": "v1", "kind": "Secret", "data": {"password": value}})


def test_drift_of_a_secrets_last_applied_annotation_is_masked(client, fleet, operator, viewer):
    """kubectl keeps a copy of the whole object, values included, in this annotation: a drift row
    on it (or on the annotations as a whole) shows them unless masked like data."""
    register_fleet(fleet, MEMBERS)
    drain(propagation.propagate_revision(federate_namespace("shop", MEMBERS)))
    resource = services.create_resource(
        services.find_type("Secret"),
        namespace="shop",
        name="db",
        actor=operator,
        template={
            "type": "Opaque",
            "metadata": {"annotations": {LAST_APPLIED: last_applied(ENCODED)}},
            "data": {"password": ENCODED},
        },
        placement={"clusters": MEMBERS},
    )
    drain(propagation.propagate_revision(resource))
    fleet.external_edit(
        "m127",
        "v1",
        "Secret",
        "shop",
        "db",
        {"data": {"password": LIVE_VALUE}, "metadata": {"annotations": {LAST_APPLIED: last_applied(LIVE_VALUE)}}},
    )
    propagation.detect_drift(resource=resource)
    drift = PropagatedVersion.objects.get(resource=resource, cluster__name="m127").drift
    assert any("last-applied" in row["path"] for row in drift)
    client.force_login(viewer)
    page = client.get(reverse("federation:resource_detail", args=[resource.pk])).content.decode()
    text = json.dumps([drift, list(AuditEvent.objects.values_list("before", "after"))]) + page
    assert ENCODED not in text and LIVE_VALUE not in text


def test_a_diff_row_on_the_annotations_as_a_whole_is_masked():
    from fedportal.masking import mask_secrets

    row = {"path": "/metadata/annotations", "before": {LAST_APPLIED: last_applied(ENCODED)}, "after": None}
    assert ENCODED not in json.dumps(mask_secrets([row], secret=True))


def test_the_admin_shows_messages_written_before_scrubbing_without_the_values(client, operator, offline_secret):
    """Rows written by an earlier FedPortal may hold a refusal quoting a value: the admin masks them."""
    from django.contrib.auth.models import User

    from federation.approvals import services as approvals
    from federation.approvals.models import ChangeRequest

    refusal = f'Secret "db" is invalid: data[password]: Invalid value: "{ENCODED}"'
    version = PropagatedVersion.objects.create(
        resource=offline_secret, cluster=Cluster.objects.get(name="m128"), status="CreationFailed", message=refusal
    )
    cr = approvals.create_change_request(offline_secret, actor=operator)
    ChangeRequest.objects.filter(pk=cr.pk).update(
        outcome=[{"cluster": "m128", "message": refusal}], apply_error=f"m128: {refusal}"
    )
    client.force_login(User.objects.create_superuser("root", password="root-pass-123456"))
    pages = [
        client.get(f"/admin/federation/propagatedversion/{version.pk}/change/"),
        client.get(f"/admin/approvals/changerequest/{cr.pk}/change/"),
    ]
    assert [page.status_code for page in pages] == [200, 200]
    for page in pages:
        text = page.content.decode()
        assert "Invalid value" in text and ENCODED not in text
