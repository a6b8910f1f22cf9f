"""Failed logins: what is stored, throttling per address and per user name, the client address
behind trusted proxies (issue 16, finding 10), and the request id a client may send (finding 15)."""

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import RequestFactory, override_settings
from django.urls import reverse

from fedportal.client_ip import client_ip
from fedportal.models import AuditEvent
from fedportal.security_events import UNKNOWN_PREFIX, login_identity

LOGIN_URL = reverse("login")
PASSWORD = "pass-for-tests-1"
TYPED = "Hunter2-pasted-password-by-mistake"


def events(action):
    return list(AuditEvent.objects.filter(action=action).order_by("id"))


@pytest.mark.django_db
def test_an_unknown_user_name_is_stored_as_a_keyed_hash_never_as_typed(client):
    for _ in range(2):
        response = client.post(LOGIN_URL, {"username": TYPED, "password": "x"}, REMOTE_ADDR="198.51.100.4")
        assert response.status_code == 200
    first, second = events("auth.login_failed")
    assert first.object_repr.startswith(UNKNOWN_PREFIX) and len(first.object_repr) == len(UNKNOWN_PREFIX) + 16
    assert first.object_repr == second.object_repr == login_identity(TYPED)  # repeated attempts can be matched
    assert login_identity(TYPED + "x") != first.object_repr
    stored = "".join(str(value) for event in AuditEvent.objects.all() for value in vars(event).values())
    stored += "".join(f"{a.username}{a.get_data}{a.post_data}" for a in AccessAttempt.objects.all())
    assert TYPED not in stored and TYPED[:8] not in stored
    assert AccessAttempt.objects.get().username == login_identity(TYPED)


@pytest.mark.django_db
def test_an_existing_user_name_is_stored_as_it_is(client, viewer):
    client.post(LOGIN_URL, {"username": viewer.username, "password": "wrong"})
    assert events("auth.login_failed")[0].object_repr == viewer.username
    assert AccessAttempt.objects.get().username == viewer.username


@pytest.mark.django_db
def test_spraying_many_user_names_from_one_address_is_locked_out(client, viewer):
    limit = settings.AXES_FAILURE_LIMIT
    for attempt in range(limit):
        response = client.post(LOGIN_URL, {"username": f"guess-{attempt}", "password": "x"}, REMOTE_ADDR="192.0.2.50")
    assert response.status_code == 429
    response = client.post(LOGIN_URL, {"username": viewer.username, "password": PASSWORD}, REMOTE_ADDR="192.0.2.50")
    assert response.status_code == 429
    assert (
        client.post(
            LOGIN_URL, {"username": viewer.username, "password": PASSWORD}, REMOTE_ADDR="192.0.2.51"
        ).status_code
        == 302
    )


@pytest.mark.django_db
def test_attempts_while_locked_out_do_not_grow_the_log(client):
    limit = settings.AXES_FAILURE_LIMIT
    for attempt in range(limit + 25):
        client.post(LOGIN_URL, {"username": f"spray-{attempt}", "password": "x"}, REMOTE_ADDR="192.0.2.60")
    assert len(events("auth.login_failed")) == limit
    assert len(events("auth.locked_out")) == 1
    assert sum(a.failures_since_start for a in AccessAttempt.objects.all()) == limit


@override_settings(FEDPORTAL_TRUSTED_PROXIES=1)
@pytest.mark.django_db
def test_behind_a_trusted_proxy_the_forwarded_address_is_the_client(client):
    limit = settings.AXES_FAILURE_LIMIT
    # every request comes from the proxy (10.0.0.1); the clients differ
    for attempt in range(limit):
        response = client.post(
            LOGIN_URL,
            {"username": f"u{attempt}", "password": "x"},
            REMOTE_ADDR="10.0.0.1",
            HTTP_X_FORWARDED_FOR="203.0.113.9",
        )
    assert response.status_code == 429
    assert {event.source_ip for event in events("auth.login_failed")} == {"203.0.113.9"}
    # another client behind the same proxy is not locked out; a forged left-hand entry changes nothing
    response = client.post(
        LOGIN_URL,
        {"username": "someone", "password": "x"},
        REMOTE_ADDR="10.0.0.1",
        HTTP_X_FORWARDED_FOR="203.0.113.9, 203.0.113.10",
    )
    assert response.status_code == 200
    assert events("auth.login_failed")[-1].source_ip == "203.0.113.10"


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, "203.0.113.9", "192.0.2.1"),  # no trusted proxy: the header is ignored
        (1, "203.0.113.9", "203.0.113.9"),
        (1, "6.6.6.6, 203.0.113.9", "203.0.113.9"),  # the client's own entry is not believed
        (2, "6.6.6.6, 203.0.113.9, 10.0.0.2", "203.0.113.9"),
        (2, "203.0.113.9", "192.0.2.1"),  # fewer entries than proxies
        (1, "not-an-address", "192.0.2.1"),
        (1, "", "192.0.2.1"),
        (1, "2001:db8::1", "2001:db8::1"),
    ],
)
def test_client_ip(proxies, forwarded, expected):
    request = RequestFactory().get("/", REMOTE_ADDR="192.0.2.1", HTTP_X_FORWARDED_FOR=forwarded)
    with override_settings(FEDPORTAL_TRUSTED_PROXIES=proxies):
        assert client_ip(request) == expected


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("trace-abc-123", True),
        ("0af7651916cd43dd8448eb211c80319c", True),
        ("a" * 64, True),
        ("a" * 65, False),
        ("<script>alert(1)</script>", False),
        ('=HYPERLINK("http://x")', False),
        ("id with spaces", False),
        ("line\u2028break", False),
    ],
)
def test_a_client_sent_request_id_is_kept_only_if_it_is_a_short_token(client, viewer, sent, kept):
    client.force_login(viewer)
    response = client.get(reverse("home"), HTTP_X_REQUEST_ID=sent)
    assert (response["X-Request-ID"] == sent) is kept
    if not kept:
        assert len(response["X-Request-ID"]) == 32 and response["X-Request-ID"].isalnum()
