"""Every page the role matrix knows renders for an admin without leaking template syntax (an
unclosed or multi-line ``{# #}`` comment, say, prints itself into the page)."""

import pytest
from django.urls import reverse

from fedportal.roles import Role
from tests.role_matrix import EXPECTED, URL_KWARGS

pytestmark = pytest.mark.django_db

GET_PAGES = sorted(name for name, methods in EXPECTED.items() if "GET" in methods and not name.startswith("admin:"))


@pytest.mark.parametrize("name", GET_PAGES)
def test_page_renders_without_template_syntax(client, make_user, name):
    client.force_login(make_user("page-admin", Role.ADMIN))
    response = client.get(reverse(name, kwargs=URL_KWARGS[name]() if name in URL_KWARGS else {}))
    assert response.status_code < 500
    if "text/html" in response.get("Content-Type", ""):
        html = response.content.decode()
        for token in ("{#", "#}", "{%", "%}"):  # (braces alone appear in JSON for charts)
            assert token not in html, f"{name} shows raw template syntax {token!r}"
