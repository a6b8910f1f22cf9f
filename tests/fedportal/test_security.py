import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.conf import settings
from django.urls import reverse

from fedportal.models import AuditEvent

ROOT = Path(__file__).resolve().parents[2]
LOGIN_URL = reverse("login")
PASSWORD = "pass-for-tests-1"


def events(action):
    return list(AuditEvent.objects.filter(action=action).order_by("id"))


# --- logins, failed logins, logouts, lockouts are audited ---------------------------------------


@pytest.mark.django_db
def test_login_through_the_form_is_audited_with_address_and_request_id(client, viewer):
    response = client.post(LOGIN_URL, {"username": viewer.username, "password": PASSWORD}, REMOTE_ADDR="203.0.113.7")
    assert response.status_code == 302
    [event] = events("auth.login")
    assert event.actor_id == viewer.pk and event.actor_name == viewer.username
    assert event.source_ip == "203.0.113.7"
    assert event.request_id == response["X-Request-ID"] and len(event.request_id) == 32


@pytest.mark.django_db
def test_a_client_supplied_request_id_is_kept(client, viewer):
    client.post(LOGIN_URL, {"username": viewer.username, "password": PASSWORD}, HTTP_X_REQUEST_ID="trace-abc-123")
    assert events("auth.login")[0].request_id == "trace-abc-123"


@pytest.mark.django_db
def test_failed_login_is_audited_without_the_password(client, viewer):
    response = client.post(
        LOGIN_URL, {"username": viewer.username, "password": "wrong-guess-99"}, REMOTE_ADDR="198.51.100.4"
    )
    assert response.status_code == 200 and "form" in response.context
    [event] = events("auth.login_failed")
    assert event.actor_id is None and event.actor_name == "system"
    assert event.object_repr == viewer.username
    assert event.source_ip == "198.51.100.4" and event.request_id == response["X-Request-ID"]
    assert not AuditEvent.objects.filter(summary__contains="wrong-guess-99").exists()
    assert "wrong-guess-99" not in str(event.before) + str(event.after)


@pytest.mark.django_db
def test_logout_is_audited(client, viewer):
    client.force_login(viewer)
    response = client.post(reverse("logout"), REMOTE_ADDR="192.0.2.9")
    assert response.status_code == 302
    [event] = events("auth.logout")
    assert event.actor_name == viewer.username
    assert event.source_ip == "192.0.2.9" and event.request_id == response["X-Request-ID"]


@pytest.mark.django_db
def test_repeated_failures_lock_the_account_out_and_the_lockout_is_audited(client, viewer):
    limit = settings.AXES_FAILURE_LIMIT
    for attempt in range(limit - 1):
        response = client.post(LOGIN_URL, {"username": viewer.username, "password": f"guess-{attempt}"})
        assert response.status_code == 200, f"attempt {attempt + 1} is an ordinary failure"
    response = client.post(LOGIN_URL, {"username": viewer.username, "password": "guess-last"})
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    # Locked out: even the right password is refused, and nobody is logged in.
    response = client.post(LOGIN_URL, {"username": viewer.username, "password": PASSWORD})
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session
    assert client.get(reverse("home")).status_code == 302

    lockouts = events("auth.locked_out")
    assert len(lockouts) == 1  # the lockout itself; refused attempts during it are not audited one by one
    assert lockouts[0].object_repr == viewer.username
    assert lockouts[0].source_ip == "127.0.0.1" and lockouts[0].request_id
    assert lockouts[0].after == {"username": viewer.username, "ip_address": "127.0.0.1", "failure_limit": limit}
    assert len(events("auth.login_failed")) == limit
    assert not events("auth.login")


@pytest.mark.django_db
def test_lockout_is_per_username_and_per_address(client, viewer, operator):
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        client.post(LOGIN_URL, {"username": viewer.username, "password": f"guess-{attempt}"}, REMOTE_ADDR="203.0.113.1")
    # the address is locked out, whoever logs in from it
    response = client.post(LOGIN_URL, {"username": operator.username, "password": PASSWORD}, REMOTE_ADDR="203.0.113.1")
    assert response.status_code == 429
    # so is the user name, from any address
    response = client.post(LOGIN_URL, {"username": viewer.username, "password": PASSWORD}, REMOTE_ADDR="203.0.113.2")
    assert response.status_code == 429
    # another user from another address is not affected
    response = client.post(LOGIN_URL, {"username": operator.username, "password": PASSWORD}, REMOTE_ADDR="203.0.113.2")
    assert response.status_code == 302


# --- healthz and login-required pages -------------------------------------------------------------


@pytest.mark.django_db
def test_healthz_answers_anonymously(client):
    response = client.get(reverse("healthz"))
    assert response.status_code == 200 and response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_home_requires_login(client):
    response = client.get(reverse("home"))
    assert response.status_code == 302
    assert response["Location"] == f"{LOGIN_URL}?next=/"


@pytest.mark.django_db
def test_home_is_403_without_a_role_and_200_for_a_viewer(client, nobody, viewer):
    client.force_login(nobody)
    response = client.get(reverse("home"))
    assert response.status_code == 403 and "viewer role" in response.content.decode()
    client.force_login(viewer)
    assert client.get(reverse("home")).status_code == 200


# --- settings: the production profile and bad environment values ------------------------------


def manage(args, env_overrides, tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("FEDPORTAL_", "DATABASE_URL"))}
    env.pop("DEBUG", None)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set by the browser fixtures for the test process only
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "fedportal.settings",
            "FEDPORTAL_VAR_DIR": str(tmp_path / "var"),
            **env_overrides,
        }
    )
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def production_env(**extra):
    return {
        "FEDPORTAL_PROFILE": "production",
        "SECRET_KEY": secrets.token_urlsafe(64),
        "FEDPORTAL_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "FEDPORTAL_AUDIT_KEY": secrets.token_urlsafe(48),
        "ALLOWED_HOSTS": "example.com",
        **extra,
    }


def test_production_profile_passes_check_deploy_with_no_warnings(tmp_path):
    result = manage(["check", "--deploy", "--fail-level", "WARNING"], production_env(), tmp_path)
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"DEBUG": "maybe"}, "DEBUG='maybe' is not a boolean"),
        ({"FEDPORTAL_ENCRYPTION_KEY": "garbage"}, "FEDPORTAL_ENCRYPTION_KEY must be 32 url-safe base64-encoded bytes"),
        ({"FEDPORTAL_PROFILE": "x"}, "FEDPORTAL_PROFILE='x': use 'development' or 'production'"),
        ({"FEDPORTAL_PROFILE": "production", "SECRET_KEY": ""}, "SECRET_KEY must be set"),
        ({"AXES_FAILURE_LIMIT": "0"}, "AXES_FAILURE_LIMIT=0 must be at least 1"),
        ({"DATABASE_URL": "mongodb://db/fedportal"}, "DATABASE_URL is not a database URL"),
        ({"CELERY_BROKER_URL": "localhost:6379"}, "CELERY_BROKER_URL must start with one of"),
        ({"CELERY_BROKER_URL": "sqla+sqlite:///var/broker.db"}, "CELERY_BROKER_URL must start with one of"),
        ({"CACHE_URL": "memcached://x"}, "CACHE_URL='memcached://x': use redis://"),
        ({"FEDPORTAL_AUDIT_KEY": "short"}, "FEDPORTAL_AUDIT_KEY must be at least 32 characters"),
        (
            {"DATABASE_URL": "postgres://u@db/fedportal", "DATABASE_SERVER_SIDE_BINDING": "maybe"},
            "DATABASE_SERVER_SIDE_BINDING='maybe' is not a boolean",
        ),
    ],
)
def test_bad_environment_values_fail_with_a_clear_message(tmp_path, overrides, message):
    result = manage(["check"], overrides, tmp_path)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and message in result.stderr


@pytest.mark.parametrize("name", ["FEDPORTAL_ENCRYPTION_KEY", "FEDPORTAL_AUDIT_KEY"])
def test_production_profile_without_secrets_refuses_to_start(tmp_path, name):
    env = production_env()
    del env[name]
    result = manage(["check"], env, tmp_path)
    assert result.returncode != 0
    assert f"{name} must be set when FEDPORTAL_PROFILE=production" in result.stderr


def test_development_generates_the_audit_key_once_into_var(tmp_path):
    assert manage(["check"], {}, tmp_path).returncode == 0
    key_file = tmp_path / "var" / "audit_key"
    key = key_file.read_text()
    assert len(key) >= 32 and oct(key_file.stat().st_mode)[-3:] == "600"
    assert manage(["check"], {}, tmp_path).returncode == 0
    assert key_file.read_text() == key


@pytest.mark.django_db
def test_the_header_lists_the_users_roles(client, operator, nobody):
    client.force_login(operator)
    assert '<span class="roles">operator, viewer</span>' in client.get(reverse("audit:event_list")).content.decode()
    client.force_login(nobody)
    assert '<span class="roles">no role</span>' in client.get(reverse("home")).content.decode()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, {"sslmode": "require", "server_side_binding": True}),
        ({"DATABASE_SERVER_SIDE_BINDING": "0"}, {"sslmode": "require"}),
    ],
)
def test_postgresql_binds_parameters_on_the_server_unless_turned_off_keeping_the_urls_options(
    tmp_path, overrides, expected
):
    probe = "from django.conf import settings; print(sorted(settings.DATABASES['default']['OPTIONS'].items()))"
    env = {"DATABASE_URL": "postgres://u@db:5432/fedportal?sslmode=require", **overrides}
    result = manage(["shell", "-c", probe], env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == str(sorted(expected.items()))
