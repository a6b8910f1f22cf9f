"""Production settings (issue 16, finding 15): Content-Security-Policy with no inline script,
an HttpOnly CSRF cookie, a short configurable session, and the proxy SSL header only behind a
trusted proxy. (The request id and the CSV neutraliser have their tests beside their code's.)"""

import re

import pytest
from django.urls import reverse

from fedportal.roles import Role
from tests.fedportal.test_security import manage, production_env
from tests.role_matrix import EXPECTED, URL_KWARGS

GET_PAGES = sorted(name for name, methods in EXPECTED.items() if "GET" in methods and not name.startswith("admin:"))
INLINE_SCRIPT = re.compile(r"<script\b(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.IGNORECASE)
INLINE_HANDLER = re.compile(r"\s(on[a-z]+|hx-on[:-][a-z:-]+)\s*=", re.IGNORECASE)


def directives(header: str) -> dict[str, list[str]]:
    parsed = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            parsed[words[0]] = words[1:]
    return parsed


@pytest.mark.django_db
def test_every_response_carries_a_csp_without_inline_script(client, viewer):
    client.force_login(viewer)
    policy = directives(client.get(reverse("home"))["Content-Security-Policy"])
    assert policy["script-src"] == ["'self'"]
    assert policy["default-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    assert "Content-Security-Policy" in client.get(reverse("login")).headers


@pytest.mark.django_db
@pytest.mark.parametrize("htmx", [False, True])
@pytest.mark.parametrize("name", GET_PAGES)
def test_no_page_has_inline_script_or_inline_event_handlers(client, make_user, name, htmx):
    client.force_login(make_user("csp-admin", Role.ADMIN))
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client.get(reverse(name, kwargs=URL_KWARGS[name]() if name in URL_KWARGS else {}), **headers)
    assert response.status_code < 500
    if "text/html" in response.get("Content-Type", ""):
        html = response.content.decode()
        assert not INLINE_SCRIPT.findall(html), f"{name}: inline <script>"
        assert not INLINE_HANDLER.findall(html), f"{name}: inline event handler"


@pytest.mark.django_db
def test_the_csrf_cookie_is_http_only_and_htmx_gets_the_token_from_the_page(client, viewer):
    response = client.get(reverse("login"))
    assert response.cookies["csrftoken"]["httponly"] is True
    client.force_login(viewer)
    html = client.get(reverse("home")).content.decode()
    assert re.search(r"hx-headers='\{\"X-CSRFToken\": \"[A-Za-z0-9]{64}\"\}'", html)


def settings_value(names: str, env, tmp_path) -> list[str]:
    code = f"from django.conf import settings; print(*[repr(getattr(settings, n, None)) for n in {names.split()!r}], sep='|')"
    result = manage(["shell", "-c", code], env, tmp_path)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1].split("|")


def test_session_lifetime_is_short_by_default_and_configurable(tmp_path):
    assert settings_value("SESSION_COOKIE_AGE SESSION_EXPIRE_AT_BROWSER_CLOSE", {}, tmp_path) == ["28800", "True"]
    assert settings_value("SESSION_COOKIE_AGE", {"FEDPORTAL_SESSION_HOURS": "0.5"}, tmp_path) == ["1800"]
    result = manage(["check"], {"FEDPORTAL_SESSION_HOURS": "soon"}, tmp_path)
    assert result.returncode != 0 and "FEDPORTAL_SESSION_HOURS='soon' is not a number" in result.stderr


def test_the_proxy_ssl_header_is_believed_only_behind_a_trusted_proxy(tmp_path):
    assert settings_value("SECURE_PROXY_SSL_HEADER", production_env(), tmp_path) == ["None"]
    with_proxy = production_env(FEDPORTAL_TRUSTED_PROXIES="1")
    assert settings_value("SECURE_PROXY_SSL_HEADER FEDPORTAL_TRUSTED_PROXIES", with_proxy, tmp_path) == [
        "('HTTP_X_FORWARDED_PROTO', 'https')",
        "1",
    ]
    result = manage(["check", "--deploy", "--fail-level", "WARNING"], with_proxy, tmp_path)
    assert result.returncode == 0, result.stderr
