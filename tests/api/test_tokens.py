"""API tokens: hashed, shown once, expiry, revocation, read-only scope, audit events; the command
and the profile page."""

import hashlib
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from api.models import ApiToken
from api.tokens import parse_duration
from fedportal.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_create_token_command_prints_the_token_alone_on_its_last_line_and_stores_only_its_hash(operator):
    out = StringIO()
    call_command("create_token", operator.username, "--expires", "30d", "--name", "ci", stdout=out)
    secret = out.getvalue().rstrip("\n").splitlines()[-1]
    assert secret.startswith("fpt_") and " " not in secret and len(secret) > 40
    token = ApiToken.objects.get()
    assert token.name == "ci" and token.user == operator and not token.read_only
    assert token.token_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(list(ApiToken.objects.values()))
    assert timedelta(days=29, hours=23) < token.expires_at - timezone.now() <= timedelta(days=30)
    event = AuditEvent.objects.get(action="api.token.create")
    assert event.actor_name == "system" and "ci" in event.summary and secret not in str(event.after)


def test_create_token_command_refuses_unknown_user_and_bad_duration(operator):
    with pytest.raises(CommandError, match="No user named 'ghost'"):
        call_command("create_token", "ghost", stdout=StringIO())
    with pytest.raises(CommandError, match="duration like 30d"):
        call_command("create_token", operator.username, "--expires", "soon", stdout=StringIO())
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize(
    "text,expected",
    [
        ("30d", timedelta(days=30)),
        ("12h", timedelta(hours=12)),
        ("2w", timedelta(weeks=2)),
        ("90m", timedelta(minutes=90)),
        ("1s", timedelta(seconds=1)),
    ],
)
def test_parse_duration(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "0d", "30", "d", "-1d", "1y", "1.5h", "999999d"])
def test_parse_duration_refuses(text):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        parse_duration(text)


def test_bearer_token_authenticates_and_records_last_use(api_as, viewer):
    client = api_as(viewer)
    response = client.get("/api/v1/clusters")
    assert response.status_code == 200, response.content
    assert response.json() == {"items": [], "next_cursor": None}
    assert ApiToken.objects.get().last_used_at is not None


@pytest.mark.parametrize("header", ["", "Bearer", "Bearer fpt_nope", "Basic dXNlcjpwYXNz", "Bearer not-a-token"])
def test_missing_or_unknown_token_is_401_json(client, header):
    response = client.get("/api/v1/clusters", headers={"Authorization": header} if header else {})
    assert response.status_code == 401
    assert response.json()["error"] == "unauthenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", ["fpt_sent-without-a-scheme", "Token fpt_sent-with-another-scheme"])
def test_a_token_sent_with_another_scheme_is_401_and_never_logged(client, settings, caplog, header):
    settings.DEBUG = True  # django-ninja's own bearer check logs such a header whole when DEBUG is on
    with caplog.at_level("DEBUG"):
        response = client.get("/api/v1/clusters", headers={"Authorization": header})
    assert response.status_code == 401
    assert "fpt_sent" not in caplog.text


def test_expired_token_is_401(api_as, viewer):
    client = api_as(viewer, expires_in=timedelta(hours=1))
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert client.get("/api/v1/clusters").status_code == 401


def test_inactive_users_token_is_401(api_as, viewer):
    client = api_as(viewer)
    viewer.is_active = False
    viewer.save()
    assert client.get("/api/v1/clusters").status_code == 401


def test_read_only_token_reads_but_every_write_is_403_and_audited(api_as, admin_user):
    client = api_as(admin_user, read_only=True)
    assert client.get("/api/v1/clusters").status_code == 200
    response = client.post("/api/v1/change-requests", {"resource_id": 1})
    assert response.status_code == 403 and response.json()["message"] == "This API token is read-only."
    event = AuditEvent.objects.filter(action="api.token.use").get()
    assert event.actor_name == admin_user.username and "POST /api/v1/change-requests" in event.summary


def test_a_write_with_a_token_is_audited_with_the_user(api_as, operator):
    client = api_as(operator)
    client.post("/api/v1/change-requests", {"resource_id": 999})
    event = AuditEvent.objects.get(action="api.token.use")
    assert event.actor_id == operator.pk and event.after["method"] == "POST"


def test_profile_page_creates_a_token_shown_once_then_revokes_it(client, operator):
    client.force_login(operator)
    page = client.post("/profile/", {"name": "ci", "expires": "7d"})
    assert page.status_code == 200
    secret = page.context["new_secret"]
    assert secret.startswith("fpt_") and secret in page.content.decode()
    again = client.get("/profile/")
    assert secret not in again.content.decode() and "ci" in again.content.decode()
    token = ApiToken.objects.get(user=operator)
    api = client.__class__()
    assert api.get("/api/v1/clusters", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
    assert client.post(f"/profile/tokens/{token.pk}/revoke").status_code == 302
    assert api.get("/api/v1/clusters", headers={"Authorization": f"Bearer {secret}"}).status_code == 401
    assert list(
        AuditEvent.objects.filter(action__startswith="api.token.").order_by("id").values_list("action", flat=True)
    ) == ["api.token.create", "api.token.revoke"]


def test_profile_page_refuses_a_bad_lifetime_with_a_form_error(client, operator):
    client.force_login(operator)
    page = client.post("/profile/", {"name": "ci", "expires": "forever"})
    assert page.status_code == 400 and "duration like 30d" in page.content.decode()
    assert not ApiToken.objects.exists()


def test_the_profile_page_refuses_a_token_to_a_user_with_no_role_as_the_api_does(client, nobody):
    client.force_login(nobody)
    page = client.get("/profile/")
    assert page.status_code == 200 and 'id="token-no-role"' in page.content.decode()
    refused = client.post("/profile/", {"name": "ci", "expires": "7d"})
    assert refused.status_code == 403 and "no role" in refused.content.decode()
    assert not ApiToken.objects.exists()


def test_nobody_can_revoke_another_users_token(client, operator, viewer, token_for):
    token_for(operator)
    client.force_login(viewer)
    assert client.post(f"/profile/tokens/{ApiToken.objects.get().pk}/revoke").status_code == 404
    assert ApiToken.objects.get().revoked_at is None


def test_tokens_endpoint_creates_lists_and_revokes_own_tokens(api_as, approver):
    client = api_as(approver)
    created = client.post("/api/v1/tokens", {"name": "pipeline", "expires": "1d", "read_only": True})
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["token"].startswith("fpt_") and body["read_only"] is True
    listed = client.get("/api/v1/tokens").json()
    assert {t["name"] for t in listed} == {"token", "pipeline"} and all("token" not in t for t in listed)
    assert client.delete(f"/api/v1/tokens/{body['id']}").json()["revoked_at"] is not None
    assert api_as(None).get("/api/v1/clusters", Authorization=f"Bearer {body['token']}").status_code == 401


def test_a_token_cannot_create_a_token_that_outlives_it(api_as, operator):
    """A leaked 5-minute token must not buy permanent access."""
    short = api_as(operator, expires_in=timedelta(minutes=5))
    for body in ({"name": "forever"}, {"name": "longer", "expires": "1d"}):
        refused = short.post("/api/v1/tokens", body)
        assert refused.status_code == 400, refused.content
        assert "must expire by then" in " ".join(refused.json()["fields"]["expires"])
    assert set(ApiToken.objects.values_list("name", flat=True)) == {"token"}
    assert short.post("/api/v1/tokens", {"name": "shorter", "expires": "2m"}).status_code == 201
    # a token without expiry, or a browser session, may ask for any lifetime
    assert api_as(operator).post("/api/v1/tokens", {"name": "forever"}).status_code == 201
