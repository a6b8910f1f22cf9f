import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_login_shows_the_dashboard_with_local_assets(page, live_server, login, viewer):
    failed_requests = []
    page.on("requestfailed", lambda request: failed_requests.append(request.url))
    login(page, viewer)
    assert page.locator("h1").inner_text() == "Fleet dashboard"
    assert page.locator(".userbox .username").inner_text() == viewer.username
    assert page.evaluate("typeof htmx") == "object"
    assert not failed_requests


def test_wrong_password_is_refused_with_a_message(page, live_server, viewer):
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", viewer.username)
    page.fill("#id_password", "wrong-password")
    page.click("button[type=submit]")
    assert "/login/" in page.url
    assert "correct username and password" in page.locator(".form-errors").inner_text()
