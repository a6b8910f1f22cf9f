"""Secret values never leave the server (issue 16, finding 2).

A federated Secret with a sentinel value, an override adding a second, a later revision with a
third and a drifted live value with a fourth; propagated to a real fleet (simulator), previewed,
requested as a change. Then every URL of the site (walked from the URL conf) is fetched as viewer,
operator and approver, as a full page and as htmx, every CSV export and every command's output is
read, and none of the sentinels may appear, in plain or in base64 form. The REST API is walked the same
way from its OpenAPI schema, with a viewer's token.
"""

import base64
import dataclasses
import io
import json
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from api.api import api as rest_api
from api.tokens import create_token
from drift import compat
from drift.choices import CompatProblemCode, CompatStatus
from federation import propagation, services
from federation.approvals import services as approvals
from federation.approvals.models import ChangeRequest
from federation.models import FederatedResource, PropagatedVersion
from fedportal.masking import (
    MaskedValueError,
    mask_secrets,
    mask_token,
    restore_masked,
    secret_values,
)
from fedportal.models import AuditEvent
from tests.federation.factories import drain, federate_namespace, register_fleet
from tests.fedportal.test_role_matrix import ALL_PATTERNS
from tests.role_matrix import URL_KWARGS

SENTINEL_TEMPLATE = "sentinel-template-Q7XkP2"
SENTINEL_OVERRIDE = "sentinel-override-M3vR8w"
SENTINEL_REVISION = "sentinel-revision-Z5tL1c"
SENTINEL_LIVE = "sentinel-live-edit-H9qN4y"
SENTINELS = (SENTINEL_TEMPLATE, SENTINEL_OVERRIDE, SENTINEL_REVISION, SENTINEL_LIVE)
MEMBERS = ["m127", "m128"]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def forms_of(sentinel: str) -> list[str]:
    """The sentinel in plain text and base64 (standard and url-safe, with and without padding,
    and as it appears inside a longer base64 text at each of the three alignments)."""
    forms = {sentinel, b64(sentinel), b64(sentinel).rstrip("="), base64.urlsafe_b64encode(sentinel.encode()).decode()}
    for prefix in ("", "x", "xx"):
        encoded = b64(prefix + sentinel)
        forms.add(encoded[4 * ((len(prefix) + 2) // 3) + 4 : -4])  # a middle slice: alignment-independent
    return sorted(form for form in forms if len(form) >= 8)


FORBIDDEN = [form for sentinel in SENTINELS for form in forms_of(sentinel)]


def leaks(text: str) -> list[str]:
    return [form for form in FORBIDDEN if form in text]


def body(response) -> str:
    raw = b"".join(response.streaming_content) if response.streaming else response.content
    return raw.decode("utf-8", "replace")


# --- the masking function itself -----------------------------------------------------------------


def test_a_secret_manifest_is_masked_wherever_it_sits():
    manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "db",
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": f'{{"data":{{"p":"{b64(SENTINEL_TEMPLATE)}"}}}}'
            },
        },
        "data": {"p": b64(SENTINEL_TEMPLATE)},
        "stringData": {"q": SENTINEL_OVERRIDE},
        "type": "Opaque",
    }
    masked = mask_secrets({"events": [{"after": manifest}]})
    assert not leaks(str(masked))
    secret = masked["events"][0]["after"]
    assert secret["data"] == {"p": mask_token(b64(SENTINEL_TEMPLATE))} and secret["type"] == "Opaque"
    assert secret["metadata"]["name"] == "db"
    # other kinds are left alone
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"p": "visible"}}
    assert mask_secrets(config_map) == config_map


def test_diff_rows_and_override_operations_of_a_secret_are_masked():
    rows = [
        {"path": "/data/p", "before": "b2xk", "after": b64(SENTINEL_LIVE), "change": "changed"},
        {"path": "/metadata/labels/app", "before": "a", "after": "b", "change": "changed"},
    ]
    masked = mask_secrets(rows, secret=True)
    assert not leaks(str(masked)) and masked[1] == rows[1]
    overrides = [
        {
            "clusterName": "m128",
            "clusterOverrides": [
                {"op": "add", "path": "/data", "value": {"extra": b64(SENTINEL_OVERRIDE)}},
                {"op": "replace", "path": "/metadata/labels/tier", "value": "web"},
            ],
        }
    ]
    masked = mask_secrets({"template": {"data": {"p": b64(SENTINEL_TEMPLATE)}}, "overrides": overrides}, secret=True)
    assert not leaks(str(masked))
    assert masked["overrides"][0]["clusterOverrides"][1]["value"] == "web"


def test_free_text_is_scrubbed_of_known_values_in_plain_and_base64():
    known = secret_values({"data": {"p": b64(SENTINEL_TEMPLATE)}}, secret=True)
    message = f"Invalid value: {SENTINEL_TEMPLATE!r} (was {b64(SENTINEL_TEMPLATE)})"
    assert not leaks(mask_secrets(message, known=known))
    assert mask_secrets(message, known=known).startswith("Invalid value: '<secret hmac:")


def test_tokens_are_keyed_not_a_plain_hash(settings):
    import hashlib

    token = mask_token("hunter2")
    assert hashlib.sha256(b"hunter2").hexdigest()[:12] not in token
    settings.SECRET_KEY = "another-key-" * 5
    assert mask_token("hunter2") != token


def test_restore_masked_keeps_untouched_values_and_takes_typed_ones():
    old = {"data": {"a": "b2xk", "b": "Ynl0ZXM="}}
    shown = mask_secrets(old, secret=True)
    sent = {"data": {"a": shown["data"]["a"], "b": "bmV3", "c": "YWRkZWQ="}}
    assert restore_masked(sent, old) == {"data": {"a": "b2xk", "b": "bmV3", "c": "YWRkZWQ="}}
    with pytest.raises(MaskedValueError, match="/data/c"):
        restore_masked({"data": {"c": shown["data"]["a"]}}, old)  # a token moved to another key


# --- the whole site ----------------------------------------------------------------------------------


@pytest.fixture
def secret_world(fleet, operator, approver, admin_user):
    """A federated Secret in every state a page can show it in; returns the objects URLs need."""
    clusters = register_fleet(fleet, MEMBERS)
    drain(propagation.propagate_revision(federate_namespace("shop", MEMBERS)))
    secret_type = services.find_type("Secret")
    resource = services.create_resource(
        secret_type,
        namespace="shop",
        name="db",
        actor=operator,
        template={"type": "Opaque", "data": {"password": b64(SENTINEL_TEMPLATE)}},
        placement={"clusters": MEMBERS},
        overrides=[
            {
                "clusterName": "m128",
                "clusterOverrides": [{"op": "add", "path": "/data/extra", "value": b64(SENTINEL_OVERRIDE)}],
            }
        ],
    )
    drain(propagation.propagate_revision(resource))
    assert fleet.get_object("m128", "v1", "Secret", "shop", "db")["data"]["extra"] == b64(SENTINEL_OVERRIDE)
    # drift: someone edits the live Secret
    fleet.external_edit("m127", "v1", "Secret", "shop", "db", {"data": {"password": b64(SENTINEL_LIVE)}})
    propagation.detect_drift(resource=resource)
    # a second revision with a new value, requested as a change (diffs and preflight taken)
    revision = services.update_resource(
        resource,
        template={"type": "Opaque", "data": {"password": b64(SENTINEL_REVISION)}},
        placement={"clusters": MEMBERS},
        overrides=resource.current_revision.overrides,
        scheduling=None,
        retention=resource.retention,
        drift_policy=resource.drift_policy,
        actor=operator,
        message="rotate",
    )
    cr = approvals.create_change_request(resource, actor=operator, revision=revision)
    cr = approvals.submit(cr, actor=operator)
    assert cr.diffs and not leaks(str(cr.diffs))
    resource = FederatedResource.objects.get(pk=resource.pk)
    return {"resource": resource, "cr": cr, "clusters": clusters}


def kwargs_for(name: str, params: set[str], world) -> list[dict]:
    resource, cr, clusters = world["resource"], world["cr"], world["clusters"]
    cluster = clusters["m128"]
    if name == "audit:event_detail":
        return [{"pk": pk} for pk in AuditEvent.objects.values_list("pk", flat=True)]
    if name == "drift:compat_cell":
        return [{"pk": resource.pk, "cluster": member} for member in MEMBERS]
    if name in ("federation:revision_detail", "federation:revision_rollback"):
        return [{"pk": resource.pk, "number": n} for n in (1, 2)]
    if name == "federation:formset_row":
        return [{"kind": "overrides"}]
    values = {
        "federation": {"pk": resource.pk, "cluster_pk": cluster.pk},
        "approvals": {"pk": cr.pk, "resource_pk": resource.pk, "cluster_pk": cluster.pk},
        "clusters": {"pk": cluster.pk},
        "drift": {"a": "m127", "b": "m128", "name": "m128"},
    }.get(name.split(":")[0], {})
    if params <= set(values):
        return [{key: values[key] for key in params}]
    return [URL_KWARGS[name]()]


QUERY_VARIANTS = {
    "federation:revision_detail": ["", "?against=1"],
    "federation:resource_preview": ["", "?revision=1", "?revision=2"],
    "approvals:change_create": ["", "?kind=edit&revision=2"],
}


@pytest.mark.django_db
def test_no_url_command_or_export_shows_a_secret_value(client, secret_world, viewer, operator, approver):
    checked = set()
    for who in (viewer, operator, approver):
        client.force_login(who)
        for _route, name, pattern in ALL_PATTERNS:
            params = set(pattern.pattern.regex.groupindex)
            for kwargs in kwargs_for(name, params, secret_world):
                base = reverse(name, kwargs=kwargs)
                for query in QUERY_VARIANTS.get(name, [""]):
                    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
                        response = client.get(base + query, **headers)
                        assert response.status_code < 500, (name, response.status_code)
                        found = leaks(body(response) + str(response.headers))
                        assert not found, f"{who.username} GET {base + query} {headers}: {found}"
                        checked.add(name)
    # the pages that show the Secret's content were really fetched with content
    assert {
        "drift:compat_cell",
        "federation:resource_preview",
        "federation:revision_detail",
        "federation:drift_list",
        "approvals:change_detail",
        "federation:resource_edit",
        "audit:event_detail",
        "audit:event_export",
        "drift:compat_export",
    } <= checked
    client.force_login(operator)
    edit = body(client.get(reverse("federation:resource_edit", args=[secret_world["resource"].pk])))
    assert "password: &lt;secret hmac:" in edit or "password: '&lt;secret hmac:" in edit

    outputs = []
    for args in (
        ("fedctl", "get", "-o", "json"),
        ("fedctl", "get", "-o", "yaml"),
        ("fedctl", "status", "shop/db", "--kind", "Secret", "-o", "json"),
        ("fedctl", "status", "shop/db", "--kind", "Secret", "-o", "yaml"),
        ("changes", "list", "-o", "json"),
        ("drift_report", "-o", "json"),
        ("drift_report", "-o", "csv"),
        ("export_audit", "-o", "-"),
        ("verify_audit",),
    ):
        out, err = io.StringIO(), io.StringIO()
        try:
            call_command(*args, stdout=out, stderr=err)
        except SystemExit:
            pass
        outputs.append(out.getvalue() + err.getvalue())
        assert not leaks(outputs[-1]), args
    assert any("shop" in text for text in outputs)
    # and the audit log itself (before/after, summaries) holds none
    stored = "".join(str(row) for row in AuditEvent.objects.values_list("summary", "object_repr", "before", "after"))
    assert not leaks(stored)
    assert re.search(r"<secret hmac:[0-9a-f]{12}>", stored)


@pytest.mark.django_db
def test_an_operator_edits_a_secret_without_seeing_its_values(client, secret_world, operator):
    resource = secret_world["resource"]
    client.force_login(operator)
    page = client.get(reverse("federation:resource_edit", args=[resource.pk]))
    form = page.context["form"]
    template_text = form.initial["template_yaml"]
    overrides = page.context["overrides"]
    assert not leaks(template_text) and "<secret hmac:" in template_text
    [override_row] = [row.initial for row in overrides.forms if row.initial]
    assert override_row["value"].strip("'\"") == mask_token(b64(SENTINEL_OVERRIDE))

    def post(template_yaml, override_value):
        data = {
            "template_yaml": template_yaml,
            "placement_mode": "clusters",
            "clusters": MEMBERS,
            "retention": resource.retention,
            "drift_policy": resource.drift_policy,
            "message": "edit",
            "ov-TOTAL_FORMS": "1",
            "ov-INITIAL_FORMS": "1",
            "ov-MIN_NUM_FORMS": "0",
            "ov-MAX_NUM_FORMS": "200",
            "ov-0-cluster": "m128",
            "ov-0-op": "add",
            "ov-0-path": "/data/extra",
            "ov-0-value": override_value,
            "rsp-TOTAL_FORMS": "0",
            "rsp-INITIAL_FORMS": "0",
            "rsp-MIN_NUM_FORMS": "0",
            "rsp-MAX_NUM_FORMS": "200",
        }
        return client.post(reverse("federation:resource_edit", args=[resource.pk]), data)

    # everything left masked, a label added: the stored values are kept
    kept = template_text.replace("type: Opaque", "type: Opaque\nmetadata:\n  labels: {tier: db}")
    response = post(kept, override_row["value"])
    assert response.status_code == 302
    resource.refresh_from_db()
    current = resource.current_revision
    assert current.template["data"] == {"password": b64(SENTINEL_REVISION)}
    assert current.template["metadata"] == {"labels": {"tier": "db"}}
    assert current.overrides[0]["clusterOverrides"][0]["value"] == b64(SENTINEL_OVERRIDE)
    # a value typed in replaces the stored one; the other stays
    typed = kept.replace(mask_token(b64(SENTINEL_REVISION)), "bmV3LXZhbHVl")
    assert post(typed, override_row["value"]).status_code == 302
    resource.refresh_from_db()
    assert resource.current_revision.template["data"] == {"password": "bmV3LXZhbHVl"}
    assert resource.current_revision.overrides[0]["clusterOverrides"][0]["value"] == b64(SENTINEL_OVERRIDE)
    # a token that matches no stored value (here: copied to a new key) is a form error, nothing saved
    number = resource.current_revision.number
    copied = typed.replace(
        "password: bmV3LXZhbHVl", f"password: bmV3LXZhbHVl\n  copy: '{override_row['value'].strip(chr(39))}'"
    )
    response = post(copied, override_row["value"])
    assert response.status_code == 400 and "/data/copy: the value is hidden" in body(response)
    resource.refresh_from_db()
    assert resource.current_revision.number == number


@pytest.mark.django_db
def test_a_preflight_message_quoting_a_secret_value_is_masked(operator):
    from federation.approvals.preflight import (
        PreflightProblem,
        register_preflight,
        unregister_preflight,
    )

    def quoting_check(change_request):
        value = change_request.proposed_revision.template["data"]["password"]
        return [PreflightProblem("", "warning", f"data.password: invalid value {value!r}")]

    resource = services.create_resource(
        services.find_type("Secret"),
        namespace="shop",
        name="quoted",
        actor=operator,
        template={"data": {"password": b64(SENTINEL_TEMPLATE)}},
        placement={},
    )
    register_preflight(quoting_check)
    try:
        cr = approvals.refresh_change_request(approvals.create_change_request(resource, actor=operator))
    finally:
        unregister_preflight(quoting_check)
    messages = [p["message"] for p in cr.preflight if p["message"].startswith("data.password")]
    assert messages == [f"data.password: invalid value '{mask_token(b64(SENTINEL_TEMPLATE))}'"]


@pytest.mark.django_db
def test_an_api_server_message_quoting_a_value_is_masked_on_the_page_and_in_fedctl(client, secret_world, viewer):
    from federation.models import PropagatedVersion

    resource = secret_world["resource"]
    quoted = f'Secret "db" is invalid: data[password]: Invalid value: "{SENTINEL_TEMPLATE}"'
    PropagatedVersion.objects.filter(resource=resource).update(message=quoted)
    client.force_login(viewer)
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        page = body(client.get(reverse("federation:resource_detail", args=[resource.pk]), **headers))
        assert not leaks(page) and "Invalid value: &quot;&lt;secret hmac:" in page
    for output in ("json", "yaml"):
        out = io.StringIO()
        call_command("fedctl", "status", "shop/db", "--kind", "Secret", "-o", output, stdout=out)
        assert not leaks(out.getvalue()) and "<secret hmac:" in out.getvalue()


# --- the REST API ------------------------------------------------------------------------------------

API_PREFIX = "/api/v1"
VISIBLE = "visible-config-value-K4wJ"  # a ConfigMap's value: shown as it is, wherever a Secret's is masked
TOKEN = re.compile(r"<secret hmac:[0-9a-f]{12}>")


def api_get_endpoints() -> list[tuple[str, list[str]]]:
    """(path, its path parameters) of every GET operation in the API's OpenAPI schema."""
    schema = rest_api.get_openapi_schema(path_prefix=API_PREFIX)
    return [
        (path, [p["name"] for p in operations["get"].get("parameters", []) if p["in"] == "path"])
        for path, operations in schema["paths"].items()
        if "get" in operations
    ]


def quoting_check(real):
    """compat.check_manifest, plus a problem that quotes the manifest's first data value in its
    message and in its suggested override (as a schema check of a value could)."""

    def check(manifest, version, **kwargs):
        result = real(manifest, version, **kwargs)
        key, value = next(iter((manifest.get("data") or {"-": None}).items()))
        if value is None:
            return result
        quoted = compat.CompatProblem(
            CompatProblemCode.INVALID,
            f"/data/{key}",
            f"data.{key}: invalid value {value!r}",
            fix={"op": "replace", "path": f"/data/{key}", "value": value},
        )
        return dataclasses.replace(result, status=CompatStatus.INCOMPATIBLE, problems=(*result.problems, quoted))

    return check


@pytest.fixture
def api_world(secret_world, operator, monkeypatch):
    """secret_world, plus what only the API could still show in clear: an API server's error quoting a
    value (on each cluster, in the change request's outcome and apply error), a drift row stored
    before drift was masked on write, a compatibility problem quoting a value; and a ConfigMap with
    the same of its own, which must stay visible."""
    resource, cr = secret_world["resource"], secret_world["cr"]
    PropagatedVersion.objects.filter(resource=resource).update(
        message=f'Secret "db" is invalid: data[password]: Invalid value: "{SENTINEL_TEMPLATE}"',
        drift=[
            {
                "path": "/data/password",
                "before": b64(SENTINEL_TEMPLATE),
                "after": b64(SENTINEL_LIVE),
                "change": "changed",
            }
        ],
    )
    ChangeRequest.objects.filter(pk=cr.pk).update(
        outcome=[
            {
                "cluster": "m128",
                "resource": str(resource),
                "action": "update",
                "state": "failed",
                "reason": "Invalid",
                "message": f"Invalid value: {b64(SENTINEL_REVISION)}",
                "changed": False,
            }
        ],
        apply_error=f"m128: Invalid value: {SENTINEL_REVISION}",
    )
    config_map = services.create_resource(
        services.find_type("ConfigMap"),
        namespace="shop",
        name="settings",
        actor=operator,
        template={"data": {"colour": VISIBLE}},
        placement={"clusters": MEMBERS},
        overrides=[
            {"clusterName": "m128", "clusterOverrides": [{"op": "add", "path": "/data/size", "value": VISIBLE}]}
        ],
    )
    drain(propagation.propagate_revision(config_map))
    PropagatedVersion.objects.filter(resource=config_map).update(
        message=f'Invalid value: "{VISIBLE}"',
        drift=[{"path": "/data/colour", "before": VISIBLE, "after": "red", "change": "changed"}],
    )
    monkeypatch.setattr(compat, "check_manifest", quoting_check(compat.check_manifest))
    return {**secret_world, "config_map": config_map}


def api_get(client, token: str, path: str, **headers):
    response = client.get(path, headers={"Authorization": f"Bearer {token}", **headers})
    return response, body(response)


@pytest.mark.django_db
def test_no_api_response_shows_a_secret_value(client, api_world, viewer, operator):
    resource, config_map, cr = api_world["resource"], api_world["config_map"], api_world["cr"]
    values = {
        "resource_id": [resource.pk, config_map.pk],
        "change_id": [cr.pk],
        "cluster_id": [cluster.pk for cluster in api_world["clusters"].values()],
    }
    queries = {"/resources/{resource_id}/preview": ["", "?revision=1", "?revision=2"]}
    token = create_token(viewer, actor=viewer).secret
    checked = set()
    for template, params in api_get_endpoints():
        missing = set(params) - set(values)
        assert not missing, f"{template}: give the walk values for {missing}"
        paths = [template]
        for param in params:
            paths = [path.replace(f"{{{param}}}", str(value)) for path in paths for value in values[param]]
        for path in paths:
            for query in queries.get(template.removeprefix(API_PREFIX), [""]):
                for headers in ({}, {"Accept": "text/csv"}):
                    response, text = api_get(client, token, path + query, **headers)
                    assert response.status_code == 200 or (query and response.status_code == 404), (
                        path + query,
                        response.status_code,
                        text[:300],
                    )
                    found = leaks(text + str(response.headers))
                    assert not found, f"GET {path + query} {headers}: {found}"
                    checked.add(template.removeprefix(API_PREFIX))
    assert {
        "/resources",
        "/resources/{resource_id}",
        "/resources/{resource_id}/preview",
        "/change-requests",
        "/change-requests/{change_id}",
        "/drift/compatibility",
        "/audit/events",
    } <= checked

    # the Secret's values were there, masked: each in its place
    detail = json.loads(api_get(client, token, f"{API_PREFIX}/resources/{resource.pk}")[1])
    assert detail["template"] == {"type": "Opaque", "data": {"password": mask_token(b64(SENTINEL_REVISION))}}
    assert detail["overrides"][0]["clusterOverrides"] == [
        {"op": "add", "path": "/data/extra", "value": mask_token(b64(SENTINEL_OVERRIDE))}
    ]
    for row in detail["clusters"]:
        assert (
            row["message"]
            == f'Secret "db" is invalid: data[password]: Invalid value: "{mask_token(SENTINEL_TEMPLATE)}"'
        )
        assert row["drift"] == [
            {
                "path": "/data/password",
                "before": mask_token(b64(SENTINEL_TEMPLATE)),
                "after": mask_token(b64(SENTINEL_LIVE)),
                "change": "changed",
            }
        ]
    change = json.loads(api_get(client, token, f"{API_PREFIX}/change-requests/{cr.pk}")[1])
    assert change["outcome"][0]["message"] == f"Invalid value: {mask_token(b64(SENTINEL_REVISION))}"
    assert change["apply_error"] == f"m128: Invalid value: {mask_token(SENTINEL_REVISION)}"
    assert any(TOKEN.search(row["diff"]) for row in change["diffs"])  # masked when taken, left so
    rows = json.loads(api_get(client, token, f"{API_PREFIX}/drift/compatibility")[1])["rows"]
    [secret_row] = [row for row in rows if row["resource"] == "shop/db" and row["cluster"] == "m127"]
    masked = mask_token(b64(SENTINEL_REVISION))
    assert secret_row["problems"] == f"data.password: invalid value '{masked}'"
    assert secret_row["fix"] == [{"op": "replace", "path": "/data/password", "value": masked}]

    # a ConfigMap's values are not masked
    detail = json.loads(api_get(client, token, f"{API_PREFIX}/resources/{config_map.pk}")[1])
    assert detail["template"] == {"data": {"colour": VISIBLE}}
    assert detail["overrides"][0]["clusterOverrides"] == [{"op": "add", "path": "/data/size", "value": VISIBLE}]
    assert {row["message"] for row in detail["clusters"]} == {f'Invalid value: "{VISIBLE}"'}
    assert detail["clusters"][0]["drift"][0]["before"] == VISIBLE
    [config_row] = [row for row in rows if row["resource"] == "shop/settings" and row["cluster"] == "m127"]
    assert config_row["problems"] == f"data.colour: invalid value '{VISIBLE}'"
    assert config_row["fix"] == [{"op": "replace", "path": "/data/colour", "value": VISIBLE}]

    # what a write answers with is masked too: an operator opens a change request for the Secret
    response = client.post(
        f"{API_PREFIX}/change-requests",
        json.dumps({"resource_id": resource.pk, "revision": 2, "title": "again"}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {create_token(operator, actor=operator).secret}"},
    )
    assert response.status_code == 201, body(response)
    assert not leaks(body(response))


@pytest.mark.django_db
def test_a_change_requests_outcome_and_apply_error_are_masked_on_its_page_and_in_the_command(
    client, api_world, secret_world, viewer
):
    """An API server's error quoting a Secret's value, as a change request's outcome row and apply
    error recorded it: the page and ``changes list`` show the error, not the value."""
    client.force_login(viewer)
    url = reverse("approvals:change_detail", args=[secret_world["cr"].pk])
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        page = body(client.get(url, **headers))
        assert not leaks(page)
        # the outcome row, masked (the page shows the apply error of upgrade requests only)
        assert "Invalid value: &lt;secret hmac:" in page
    out = io.StringIO()
    call_command("changes", "list", "-o", "json", stdout=out)
    assert not leaks(out.getvalue()) and "Invalid value: <secret hmac:" in out.getvalue()
