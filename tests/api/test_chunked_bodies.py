"""A body sent with ``Transfer-Encoding: chunked`` and no Content-Length (``curl -T -``, a Go client
streaming it) reaches the API whole under gunicorn, as production serves it: Django read it as
empty, and the call was refused with "The request has no body". It is read only once a view reads
it (after authentication), one byte past the upload limit at most (the API's 413); a malformed
chunk is a 400; a server that does not decode chunks answers 411 saying what to send."""

import http.client
import io
import json
import socket
from urllib.parse import urlsplit
from wsgiref.util import setup_testing_defaults

import pytest
from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from api.models import ApiToken
from fedportal.chunked_bodies import LENGTH_REQUIRED, ChunkedBodyHandler
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


class ServerStream:
    """A decoded request stream as gunicorn hands it over: read and readline only (not seekable),
    counting what was taken."""

    def __init__(self, data: bytes):
        self.data, self.taken = io.BytesIO(data), 0

    def read(self, size=-1):
        chunk = self.data.read(size)
        self.taken += len(chunk)
        return chunk

    def readline(self, size=-1):
        line = self.data.readline(size)
        self.taken += len(line)
        return line


def chunked_environ(path: str, stream, **extra) -> dict:
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "CONTENT_TYPE": "application/json",
        "HTTP_TRANSFER_ENCODING": "chunked",
        "wsgi.input": stream,
        "wsgi.input_terminated": True,
        **extra,
    }
    setup_testing_defaults(environ)
    return environ


def serve(environ: dict) -> tuple[str, bytes]:
    """The handler gunicorn runs, called in this process; as Django's test client does, the
    request's signals do not close the test's database connection."""
    started = {}
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        body = b"".join(ChunkedBodyHandler()(environ, lambda status, headers: started.update(status=status)))
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    return started["status"], body


@pytest.mark.django_db
def test_an_unauthenticated_chunked_body_is_not_read():
    """The body is read when a view reads it, after authentication: a client without a token does
    not get 2.5 MB read on its behalf (a reviewer's finding: the first cut read it before Django)."""
    stream = ServerStream(b'{"name": "x"}' + b" " * 100_000)
    status, _ = serve(chunked_environ("/api/v1/tokens", stream))
    assert status.startswith("401")
    assert stream.taken == 0


@pytest.mark.django_db
def test_a_chunked_body_is_read_one_byte_past_the_limit_and_no_further(operator, token_for):
    stream = ServerStream(b'{"name": "' + b"a" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 100_000) + b'"}')
    environ = chunked_environ("/api/v1/tokens", stream, HTTP_AUTHORIZATION=f"Bearer {token_for(operator)}")
    status, body = serve(environ)
    assert status.startswith("413") and json.loads(body)["error"] == "too_large"
    assert stream.taken == settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1
    assert ApiToken.objects.filter(user=operator).count() == 1  # the caller's own


@pytest.mark.worker
def test_a_malformed_chunk_is_a_400_saying_so_not_a_500(web_server, operator, token_for):
    address = urlsplit(web_server)
    request = (
        "POST /api/v1/tokens HTTP/1.1\r\n"
        f"Host: {address.hostname}\r\n"
        f"Authorization: Bearer {token_for(operator)}\r\n"
        "Content-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n"
        "Connection: close\r\n\r\n"
        "zz\r\n{}\r\n0\r\n\r\n"
    )
    with socket.create_connection((address.hostname, address.port), timeout=30) as conn:
        conn.sendall(request.encode())
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), reply[:500]
    assert json.loads(body)["message"] == "The chunked request body is malformed: InvalidChunkSize."
    assert ApiToken.objects.filter(user=operator).count() == 1  # the caller's own


def test_a_server_that_does_not_decode_chunks_gets_a_411_saying_what_to_send():
    stream = ServerStream(b"5\r\nhello\r\n0\r\n\r\n")
    status, body = serve(chunked_environ("/api/v1/tokens", stream, **{"wsgi.input_terminated": False}))
    assert status.startswith("411") and body == LENGTH_REQUIRED
    assert "Content-Length" in body.decode()
    assert stream.taken == 0
