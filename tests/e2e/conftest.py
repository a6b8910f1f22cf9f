"""Browser journeys: Playwright (from PyPI) driving Debian's chromium against pytest-django's
live server, with a real Celery worker where the journey enqueues work."""

import os
import shutil

import pytest

# Playwright's sync API runs an event loop in this thread; the ORM calls made by fixtures and
# assertions here are still plain synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

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


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def browser():
    if not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (make system-deps).")
    from playwright.sync_api import sync_playwright

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
