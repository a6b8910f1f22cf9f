"""Every /api/v1/ view: HEAD is GET without a body, a body over Django's upload limit is the API's
JSON 413 (not the site's HTML 400) and changes nothing, and a cursor only pages the list it came from."""

import json

import pytest

from api.models import IdempotencyRecord
from federation.approvals.models import ChangeRequest
from fedportal.audit import record_event
from tests.clusters.factories import ClusterFactory

pytestmark = pytest.mark.django_db


def test_head_answers_as_get_without_a_body(api_as, viewer):
    api = api_as(viewer)
    ClusterFactory(name="east")
    got = api.get("/api/v1/clusters")
    head = api.client.head("/api/v1/clusters", headers={"Authorization": f"Bearer {api.token}"})
    assert head.status_code == 200
    assert head.content == b""
    assert head["Content-Type"] == got["Content-Type"] == "application/json; charset=utf-8"
    assert int(head["Content-Length"]) == len(got.content) > 0


def test_head_without_a_token_is_the_same_401_as_get(api_as):
    head = api_as(None).client.head("/api/v1/clusters")
    assert head.status_code == 401 and head.content == b""
    assert head["WWW-Authenticate"] == 'Bearer realm="fedportal"'


def test_head_of_a_write_only_path_is_405(api_as, operator):
    api = api_as(operator)
    head = api.client.head("/api/v1/change-requests/1/approve", headers={"Authorization": f"Bearer {api.token}"})
    assert head.status_code == 405


@pytest.mark.parametrize("debug", [False, True])  # with DEBUG on, django-ninja answered a 500 with the traceback
@pytest.mark.parametrize("idempotency_key", ["", "big-1"])
def test_a_body_over_the_upload_limit_is_a_json_413_that_changes_nothing(
    api_as, operator, settings, idempotency_key, debug
):
    # both through the fixture: mixed with @override_settings, its undo restored the decorator's limit for good
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    settings.DEBUG = debug
    api = api_as(operator)
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    response = api.post("/api/v1/change-requests", {"resource_id": 1, "note": "x" * 20_000}, **headers)
    assert response.status_code == 413, response.content
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "error": "too_large",
        "message": "The request body is larger than 9 KiB.",
        "fields": {},
    }
    assert not ChangeRequest.objects.exists()
    assert not IdempotencyRecord.objects.exists()


def _first_cursor(api, path: str) -> str:
    body = api.get(path, {"limit": 1}).json()
    assert body["next_cursor"], body
    return body["next_cursor"]


def test_a_cursor_of_one_list_is_refused_by_another_keyed_alike(api_as, viewer):
    """The audit log and the change requests are both keyed on ids, newest first: a cursor of one
    read as a position in the other would page a list it never came from."""
    api = api_as(viewer)
    for n in range(3):
        record_event("test.event", summary=f"event {n}")
    cursor = _first_cursor(api, "/api/v1/audit/events")
    assert api.get("/api/v1/audit/events", {"limit": 1, "cursor": cursor}).status_code == 200
    for path in ("/api/v1/change-requests", "/api/v1/resources"):
        response = api.get(path, {"cursor": cursor})
        assert response.status_code == 400, (path, response.content)
        assert response.json()["error"] == "invalid_cursor"
        assert json.loads(response.content)["fields"] == {"cursor": ["Not a valid cursor."]}


def test_head_asking_for_csv_runs_no_export_and_audits_none(api_as, viewer):
    from fedportal.models import AuditEvent

    api = api_as(viewer)
    record_event("test.event", summary="one")
    head = api.client.head(
        "/api/v1/audit/events", headers={"Authorization": f"Bearer {api.token}", "Accept": "text/csv"}
    )
    assert head.status_code == 200 and head.content == b""
    assert head["Content-Type"] == "application/json; charset=utf-8"
    assert not AuditEvent.objects.filter(action="audit.export").exists()
    got = api.client.get("/api/v1/audit/events", headers={"Authorization": f"Bearer {api.token}", "Accept": "text/csv"})
    assert got.streaming and AuditEvent.objects.filter(action="audit.export").count() == 1


@pytest.mark.parametrize(
    "path,fields",
    [
        ("/api/v1/change-requests", {"title": "from a form"}),
        ("/api/v1/resources", {"manifest": "kind: ConfigMap"}),
    ],
)
def test_a_form_body_from_a_browser_session_is_a_json_415_that_changes_nothing(operator, path, fields):
    """A logged-in browser session (cookie and CSRF header) posting multipart: Django's CSRF check
    parsed the form first and then refused to give the raw body to the view (RawPostDataException):
    a 500, found by a reviewer. Token clients never had the CSRF check."""
    from django.test import Client

    from federation.models import FederatedResource

    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    secret = "a" * 32
    client.cookies["csrftoken"] = secret
    before = (ChangeRequest.objects.count(), FederatedResource.objects.count())

    response = client.post(path, fields, headers={"X-CSRFToken": secret})

    assert response.status_code == 415, response.content[:300]
    assert response.json()["error"] == "unsupported_media_type"
    assert (ChangeRequest.objects.count(), FederatedResource.objects.count()) == before
