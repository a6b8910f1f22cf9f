"""A dropped PostgreSQL connection costs at most the request it broke: the next one reconnects
(CONN_HEALTH_CHECKS with persistent connections, CONN_MAX_AGE)."""

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.urls import reverse

from tests import conftest as shared
from tests.fleet_fixtures import free_port

pytestmark = [pytest.mark.faults, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _get(url: str, cookie: str) -> int:
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


@pytest.fixture
def web_server(transactional_db):
    """gunicorn (one sync worker: one persistent database connection) on the test database."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (pg_terminate_backend); this run uses " + connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        started = cursor.fetchone()[0]
    port = free_port()
    log = Path(settings.VAR_DIR) / f"gunicorn-{settings.TEST_RUN_ID}.log"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "fedportal.settings_test",
        "FEDPORTAL_TEST_RUN_ID": settings.TEST_RUN_ID,
        "DATABASE_URL": shared.test_database_url(),
    }
    with open(log, "w") as out:
        server = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gunicorn"),
                "fedportal.wsgi:application",
                "--workers",
                "1",
                "--bind",
                f"127.0.0.1:{port}",
                "--log-level",
                "warning",
            ],
            cwd=shared.ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while _get(url + "/healthz", "") != 200:
        assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.2)
    yield url, started
    server.terminate()
    server.wait(timeout=20)
    log.unlink(missing_ok=True)


def test_next_request_works_after_the_database_connection_is_dropped(web_server, client, viewer):
    import psycopg

    assert settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] and settings.DATABASES["default"]["CONN_MAX_AGE"]
    client.force_login(viewer)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    url, started = web_server
    url += reverse("clusters:cluster_list")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        mine = cursor.fetchone()[0]
    assert _get(url, cookie) == 200  # gunicorn's worker now holds a persistent connection

    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(
        **{k: v for k, v in params.items() if k in ("dbname", "user", "password", "host", "port")}, autocommit=True
    ) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid NOT IN (%s, pg_backend_pid()) AND backend_start >= %s",
            (mine, started),
        ).fetchone()[0]
    assert killed >= 1, "the web server's connection was terminated"
    assert _get(url, cookie) == 200, "the next request reconnects"
    assert _get(url, cookie) == 200
