"""gunicorn serving fedportal.wsgi on the test database, as production runs the web app."""

import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from tests import conftest as shared
from tests.fleet_fixtures import free_port


def status_of(url: str, cookie: str = "") -> int:
    """The status a GET of ``url`` answers (0: no answer)."""
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


@contextmanager
def gunicorn(workers: int = 1):
    """Yields the server's base URL once /healthz answers; stopped on exit."""
    port = free_port()
    log = Path(settings.VAR_DIR) / f"gunicorn-{settings.TEST_RUN_ID}-{port}.log"
    with open(log, "w") as out:
        server = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gunicorn"),
                "fedportal.wsgi:application",
                "--workers",
                str(workers),
                "--bind",
                f"127.0.0.1:{port}",
                "--log-level",
                "warning",
            ],
            cwd=shared.ROOT,
            env=shared.child_process_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while status_of(url + "/healthz") != 200:
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=20)
        log.unlink(missing_ok=True)
