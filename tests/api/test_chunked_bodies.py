"""A body sent with ``Transfer-Encoding: chunked`` and no Content-Length (``curl -T -``, a Go client
streaming it) reaches the API whole under gunicorn, as production serves it: Django read it as
empty, and the call was refused with "The request has no body". Over the upload limit it is the
API's 413; on a server that does not decode chunks, a 411 that says what to send."""

import http.client
import io
import json
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from api.models import ApiToken
from fedportal.chunked_bodies import LENGTH_REQUIRED, read_chunked_bodies
from tests.web_server import gunicorn


def post_chunked(base_url: str, path: str, pieces: list[bytes], token: str) -> tuple[int, dict]:
    """POST ``pieces`` as chunks (http.client sends an iterable body chunked, with no Content-Length)."""
    address = urlsplit(base_url)
    conn = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
    try:
        conn.request(
            "POST",
            path,
            body=iter(pieces),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


@pytest.fixture
def web_server(transactional_db):
    with gunicorn() as url:
        yield url


@pytest.mark.worker
def test_a_chunked_json_body_reaches_the_api_whole_under_gunicorn(web_server, operator, token_for):
    status, body = post_chunked(
        web_server, "/api/v1/tokens", [b'{"name": ', b'"from-a-', b'pipe", "read_only": true}'], token_for(operator)
    )
    assert status == 201, body
    assert ApiToken.objects.filter(user=operator, name="from-a-pipe", read_only=True).exists()


@pytest.mark.worker
def test_a_chunked_body_over_the_upload_limit_is_the_apis_413_and_creates_nothing(web_server, operator, token_for):
    token = token_for(operator)
    padding = b"a" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1024)
    status, body = post_chunked(web_server, "/api/v1/tokens", [b'{"name": "big", "pad": "', padding, b'"}'], token)
    assert status == 413, body
    assert body["error"] == "too_large"
    assert not ApiToken.objects.filter(name="big").exists()


def test_a_server_that_does_not_decode_chunks_gets_a_411_saying_what_to_send():
    reached = []
    app = read_chunked_bodies(lambda environ, start_response: reached.append(environ) or [b""])
    started = {}
    body = b"".join(
        app(
            {"HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input": io.BytesIO(b"5\r\nhello\r\n0\r\n\r\n")},
            lambda status, headers: started.update(status=status, headers=dict(headers)),
        )
    )
    assert started["status"].startswith("411") and body == LENGTH_REQUIRED
    assert "Content-Length" in body.decode()
    assert not reached, "the application is not called with a body it cannot read"


def test_a_body_with_a_content_length_is_passed_on_untouched():
    reached = []
    app = read_chunked_bodies(lambda environ, start_response: reached.append(environ) or [b""])
    stream = io.BytesIO(b"{}")
    environ = {"CONTENT_LENGTH": "2", "wsgi.input": stream, "wsgi.input_terminated": True}
    b"".join(app(environ, lambda status, headers: None))
    assert reached[0]["wsgi.input"] is stream and reached[0]["CONTENT_LENGTH"] == "2"
