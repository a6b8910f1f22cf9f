"""Issue 23 item 1: a 4xx answer to an htmx form is swapped in place — with DEBUG off (the test
suite's default) and with DEBUG on (what `make demo` runs). With DEBUG on, django-htmx's debug
handler used to replace the whole document with the error answer (an unstyled page, no nav).

Run the whole browser suite with the demo's DEBUG on: `.venv/bin/pytest -o django_debug_mode=true tests/e2e`
(pytest-django's own switch; `make test-e2e-debug` does the same)."""

import pytest

from tests.clusters.factories import ClusterFactory

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(params=[False, True], ids=["debug-off", "debug-on"])
def debug(request, settings):
    settings.DEBUG = request.param
    return request.param


def assert_page_kept(page):
    """The page around the form is still there: the nav bar and the stylesheet-styled heading."""
    assert page.locator("header.topbar nav").count() == 1
    assert page.locator("link[rel=stylesheet]").count() == 1


def test_unreadable_kubeconfig_error_swaps_in_place(page, live_server, login, admin_user, debug):
    login(page, admin_user)
    page.goto(f"{live_server.url}/clusters/import/")
    page.fill("#id_kubeconfig_text", "foo: [")
    with page.expect_response(lambda r: r.url.endswith("/clusters/import/") and r.request.method == "POST") as info:
        page.click("text=Read contexts")
    assert info.value.status == 400
    page.wait_for_selector("#import-body .form-errors")
    assert_page_kept(page)
    assert page.locator("h1").inner_text() == "Import clusters from a kubeconfig"
    # a refused kubeconfig is never echoed back (it may hold tokens): the form comes back empty
    assert page.locator("#id_kubeconfig_text").input_value() == ""


def test_registering_a_registered_url_swaps_in_place(page, live_server, login, admin_user, debug):
    existing = ClusterFactory(name="taken", api_server="https://taken.example.test:6443")
    login(page, admin_user)
    page.goto(f"{live_server.url}/clusters/new/")
    page.fill("#id_name", "another")
    page.fill("#id_api_server", existing.api_server)
    page.fill("#id_token", "a-token")
    page.check("#id_insecure_skip_tls_verify")
    with page.expect_response(lambda r: r.url.endswith("/clusters/new/") and r.request.method == "POST") as info:
        page.click("#cluster-form button.primary")
    assert info.value.status == 400
    page.wait_for_selector("#cluster-form .errorlist")
    assert_page_kept(page)
    assert "already" in page.locator("#cluster-form").inner_text()
    assert page.locator("#id_name").input_value() == "another"
