"""The Redis transport survives a broker that goes away while messages are unacknowledged
(fedportal/broker_redis.py), on a private redis-server so the suite's own broker is not touched."""

import shutil
import subprocess

import pytest
from kombu import Connection, Queue
from kombu.transport import redis as kombu_redis

from fedportal import broker_redis
from tests.fleet_fixtures import free_port
from tests.utils import wait_for

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed here")


@pytest.fixture
def private_redis():
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    wait_for(lambda: _answers(url), timeout=20, message="private redis-server up")
    yield url, server
    server.kill()
    server.wait()


def _answers(url: str) -> bool:
    try:
        with Connection(url, connect_timeout=1) as conn:
            conn.ensure_connection(max_retries=1)
        return True
    except Exception:
        return False


def _hold_an_unacked_message(conn: Connection):
    queue = Queue("held")
    channel = conn.default_channel
    queue(channel).declare()
    conn.Producer(channel).publish({"n": 1}, routing_key="held", serializer="json")
    message = queue(channel).get(no_ack=False)
    assert message is not None and message.payload == {"n": 1}


def _close_after_the_server_stops(url, server, transport):
    """The state of the worker's crash (CI; Redis restarted 0.3 s after its shutdown while tasks ran):
    Redis is down, a message is still unacknowledged, and the transport has already lost its
    ``client`` when Celery's consumer closes the broken connection."""
    conn = Connection(url, transport=transport)
    _hold_an_unacked_message(conn)
    server.kill()
    server.wait()
    conn.transport.client = None
    conn.close()


def test_closing_again_after_the_broker_went_away_is_a_connection_error_celery_recovers_from(private_redis):
    url, server = private_redis
    _close_after_the_server_stops(url, server, broker_redis.Transport)


def test_kombus_own_transport_still_fails_there_so_the_subclass_is_still_needed(private_redis):
    url, server = private_redis
    with pytest.raises(AttributeError):
        _close_after_the_server_stops(url, server, kombu_redis.Transport)


def test_the_app_uses_this_transport_for_redis_urls():
    from fedportal.celery import app

    for url in ("redis://127.0.0.1:6379/0", "rediss://127.0.0.1:6380/0"):
        assert isinstance(app.connection_for_read(url).transport, broker_redis.Transport)
