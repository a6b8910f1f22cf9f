"""README's screenshot: the dashboard of `make demo`, taken from a real demo run.

    .venv/bin/python -m tests.readme_screenshot [--out static/img/screenshot.png]

Migrates a fresh database in a temporary FEDPORTAL_VAR_DIR, starts `manage.py demo` there (the demo
fleet clusters/simulator/fleets/demo.yaml, its users, worker and beat) on free ports, waits until
every demo cluster has been probed, logs in as admin with Playwright + Debian's chromium (the flags
the browser tests use), waits for the dashboard's panels to load and saves a 1400x900 screenshot.
Everything it started is stopped at the end (the demo stops its own children on SIGTERM)."""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from tests.browser_fixtures import CHROMIUM, CHROMIUM_ARGS
from tests.fleet_fixtures import free_port

ROOT = Path(__file__).resolve().parent.parent
DEMO_FLEET = ROOT / "clusters/simulator/fleets/demo.yaml"


def wait(predicate, what: str, timeout: float = 180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(1)
    raise SystemExit(f"timed out waiting for {what}")


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError:
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "static/img/screenshot.png"))
    args = parser.parse_args()
    clusters = [c["name"] for c in yaml.safe_load(DEMO_FLEET.read_text())["clusters"]]
    with tempfile.TemporaryDirectory(prefix="fedportal-screenshot-") as var_dir:
        env = {**os.environ, "FEDPORTAL_VAR_DIR": var_dir, "PYTHONUNBUFFERED": "1"}
        env.pop("DATABASE_URL", None)
        env.pop("CELERY_BROKER_URL", None)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        port, fleet_port = free_port(), free_port()
        log = open(Path(var_dir) / "demo.out", "wb")
        demo = subprocess.Popen(
            [sys.executable, "manage.py", "demo", "--port", str(port), "--fleet-port", str(fleet_port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait(lambda: answers(f"{base}/healthz"), "the demo's web server")
            password = (Path(var_dir) / "demo" / "password").read_text().strip()
            shoot(base, password, clusters, args.out)
        finally:
            demo.send_signal(signal.SIGTERM)
            try:
                demo.wait(timeout=60)
            except subprocess.TimeoutExpired:
                demo.kill()
            log.close()
    print(f"wrote {args.out}")


def shoot(base: str, password: str, clusters: list[str], out: str):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{base}/login/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")

        def probed() -> bool:  # every demo cluster answered its first probe
            page.goto(f"{base}/clusters/")
            text = page.locator("#cluster-rows").inner_text()
            return all(name in text for name in clusters) and "never" not in text and "Unknown" not in text

        wait(probed, "the first probe of every demo cluster")
        page.goto(f"{base}/")
        placeholders = {
            "clusters": "Fleet states and versions",
            "federation": "Propagation status and drift",
            "approvals": "Approval inbox",
            "drift": "Skew findings and compliance",
        }
        for panel, placeholder in placeholders.items():  # each panel's fragment replaced its placeholder link
            expect(page.locator(f"#{panel}-panel")).not_to_contain_text(placeholder, timeout=30_000)
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(1_000)
        page.screenshot(path=out)
        browser.close()


if __name__ == "__main__":
    main()
