"""A dropped PostgreSQL connection costs at most the request it broke: the next one reconnects
(CONN_HEALTH_CHECKS with persistent connections, CONN_MAX_AGE)."""

import pytest
from django.conf import settings
from django.db import connection
from django.urls import reverse

from tests.web_server import gunicorn, status_of

pytestmark = [pytest.mark.faults, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def web_server(transactional_db):
    """gunicorn (one sync worker: one persistent database connection) on the test database."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (pg_terminate_backend); this run uses " + connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        started = cursor.fetchone()[0]
    with gunicorn() as url:
        yield url, started


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
    assert status_of(url, cookie) == 200  # gunicorn's worker now holds a persistent connection

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
    assert status_of(url, cookie) == 200, "the next request reconnects"
    assert status_of(url, cookie) == 200
