"""Browser fixtures, shared by every test folder (loaded from tests/conftest.py as a plugin):
Playwright (from PyPI) driving Debian's chromium against pytest-django's live server, with a real
Celery worker where the journey enqueues work. One Playwright instance per session."""

import os
import shutil

import pytest

CHROMIUM = os.environ.get("FEDPORTAL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "pass-for-tests-1"


@pytest.fixture(scope="session")
def browser():
    if not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (make system-deps).")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread for the rest of the session; the ORM
    # calls tests make meanwhile are still plain synchronous calls. Test processes only, never the app
    # (subprocesses that run Django checks drop it: see tests/fedportal/test_security.py).
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def login(live_server):
    """login(page, user): log in through the real login form."""

    def do_login(page, user, password: str = PASSWORD):
        page.goto(f"{live_server.url}/login/")
        page.fill("#id_username", user.get_username())
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        return page

    return do_login
