"""Role × URL × method: every URL in the project, as anonymous, no-role, viewer, operator, approver
and admin. The expectations live in ``tests/role_matrix.py`` (each app adds its rows there)."""

import pytest
from django.conf import settings
from django.shortcuts import resolve_url
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from fedportal.roles import Role
from tests.role_matrix import AUTHENTICATED, EXPECTED, METHODS, PUBLIC, URL_KWARGS, success_status

# api/ and metrics answer 401/403 JSON instead of the login redirect: tests/api/test_role_matrix.py
# walks every API operation, tests/api/test_metrics.py the metrics endpoint.
SKIPPED_PREFIXES = ("admin/", settings.STATIC_URL.lstrip("/"), "api/", "metrics")

# What each test user holds. Written out here, not derived from fedportal.roles, so that the
# policy is stated twice: a change to user_roles() that widens access makes this test fail.
HOLDS = {
    "viewer": {Role.VIEWER},
    "operator": {Role.VIEWER, Role.OPERATOR},
    "approver": {Role.VIEWER, Role.APPROVER},
    "admin": {Role.VIEWER, Role.OPERATOR, Role.APPROVER, Role.ADMIN},
}
WHO = ("anonymous", "nobody", *HOLDS)
REFUSED = {401, 403, 405}


def iter_patterns(patterns=None, prefix: str = "", namespace: str = ""):
    """(route, full name, pattern) for every URL pattern, skipping admin/ and static files."""
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(entry.pattern)
        if route.startswith(SKIPPED_PREFIXES):
            continue
        if isinstance(entry, URLResolver):
            child_ns = namespace
            if entry.namespace:
                child_ns = f"{namespace}:{entry.namespace}" if namespace else entry.namespace
            yield from iter_patterns(entry.url_patterns, route, child_ns)
        elif isinstance(entry, URLPattern):
            name = f"{namespace}:{entry.name}" if namespace and entry.name else entry.name
            yield route, name, entry


ALL_PATTERNS = list(iter_patterns())
PATTERN_NAMES = sorted({name for _, name, _ in ALL_PATTERNS if name})


def test_every_url_pattern_is_named():
    unnamed = [route for route, name, _ in ALL_PATTERNS if not name]
    assert not unnamed, f"URL patterns without a name cannot be in the role matrix: {unnamed}"


def test_every_url_has_an_entry_in_the_role_matrix():
    missing = [name for name in PATTERN_NAMES if name not in EXPECTED]
    assert not missing, f"URLs with no entry in tests/role_matrix.py EXPECTED (add who may GET/POST them): {missing}"


def test_role_matrix_names_only_existing_urls():
    stale = sorted(set(EXPECTED) - set(PATTERN_NAMES))
    assert not stale, f"tests/role_matrix.py names URLs that no longer exist: {stale}"
    stale_kwargs = sorted(set(URL_KWARGS) - set(PATTERN_NAMES))
    assert not stale_kwargs, f"tests/role_matrix.py URL_KWARGS names URLs that no longer exist: {stale_kwargs}"


def test_role_matrix_entries_are_well_formed():
    allowed_values = {PUBLIC, AUTHENTICATED, *Role.values}
    for name, methods in EXPECTED.items():
        assert methods, f"{name}: declare at least one method"
        for method, role in methods.items():
            assert method in METHODS, f"{name}: method {method!r} is not one of {METHODS}"
            assert role in allowed_values, f"{name} {method}: {role!r} is not a Role, PUBLIC or AUTHENTICATED"


def test_patterns_with_parameters_have_sample_kwargs():
    missing = [
        name for _, name, entry in ALL_PATTERNS if name and entry.pattern.regex.groupindex and name not in URL_KWARGS
    ]
    assert not missing, f"URLs with parameters need a sample in tests/role_matrix.py URL_KWARGS: {missing}"


def expected_outcome(name: str, method: str, who: str) -> str:
    """'allowed', 'login' (redirect to the login page), 'denied' (403) or 'refused' (403/405)."""
    methods = EXPECTED[name]
    role = methods.get(method)
    if role is None:
        if who == "anonymous":
            return "login_or_refused"
        return "refused"
    if role == PUBLIC:
        return "allowed"
    if who == "anonymous":
        return "login"
    if role == AUTHENTICATED:
        return "allowed"
    if who == "nobody":
        return "denied"
    return "allowed" if role in HOLDS[who] else "denied"


@pytest.fixture
def client_as(client, make_user):
    def login(who: str):
        if who == "anonymous":
            return client
        roles = () if who == "nobody" else (who,)
        client.force_login(make_user(f"matrix-{who}", *roles))
        return client

    return login


CASES = [
    pytest.param(name, method, who, id=f"{name}-{method}-{who}")
    for name in PATTERN_NAMES
    if name in EXPECTED
    for method in METHODS
    for who in WHO
]


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "method", "who"), CASES)
def test_role_matrix(client_as, name, method, who):
    kwargs = URL_KWARGS[name]() if name in URL_KWARGS else {}
    url = reverse(name, kwargs=kwargs)
    client = client_as(who)
    response = client.generic(method, url)
    status = response.status_code
    login_url = resolve_url(settings.LOGIN_URL)
    went_to_login = status == 302 and response["Location"].startswith(login_url)
    expected = expected_outcome(name, method, who)
    where = f"{who} {method} {url} ({name}) answered {status}"

    assert status < 500, where
    if expected == "login":
        assert went_to_login, f"{where}; expected a redirect to {login_url}"
    elif expected == "login_or_refused":
        assert went_to_login or status == 405, f"{where}; expected a redirect to {login_url} or 405"
    elif expected == "denied":
        assert status == 403, f"{where}; expected 403"
    elif expected == "refused":
        assert status in (403, 405), f"{where}; expected 403 or 405 (method not declared in the matrix)"
    else:
        assert status not in REFUSED and not (went_to_login and name != "logout"), f"{where}; expected access"
        wanted = success_status(name, method, who)
        assert status == wanted, f"{where}; expected {wanted}, what this URL answers a permitted user"
