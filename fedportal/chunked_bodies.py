"""Request bodies sent with ``Transfer-Encoding: chunked`` (no Content-Length: ``curl -T -``, Go's
http client streaming a body, pipelines piping a manifest). Django's WSGIRequest reads at most
CONTENT_LENGTH bytes and takes a missing one as 0, so such a body read as empty and an API call
got "The request has no body".

A server that decodes the chunks itself (gunicorn, which says so with ``wsgi.input_terminated``,
PEP 3333's extension) hands over a stream that ends with the body. The request reads from that
stream as it is, and only when a view reads the body, after authentication:
Django then reads one byte past DATA_UPLOAD_MAX_MEMORY_SIZE and refuses a longer body
(RequestDataTooBig: the API's JSON 413, a page's 400). A malformed chunk is a 400, not a 500. A
server that does not decode chunks (the development server) gets a 411 that says what to send
instead, rather than an empty body. A multipart form sent chunked reads as empty, as before (its
parser needs a length; browsers always send one).

Django's WSGIHandler is subclassed for its ``request_class``, which is how Django itself chooses
the request a handler builds (it calls the class "not a public API"; tests/api/test_chunked_bodies.py
runs gunicorn to hold it to that)."""

import django
from django.core.exceptions import BadRequest
from django.core.handlers.wsgi import WSGIHandler, WSGIRequest

LENGTH_REQUIRED = b"A chunked request body is not supported by this server; send it with a Content-Length.\n"


def is_chunked_without_length(environ) -> bool:
    return "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower() and not environ.get("CONTENT_LENGTH")


class DecodedBody:
    """The server's decoded stream; what its parser raises on a malformed chunk is a BadRequest
    (a client that goes away is still the OSError Django expects)."""

    def __init__(self, stream):
        self.stream = stream

    def read(self, *args):
        return self._call(self.stream.read, *args)

    def readline(self, *args):
        return self._call(self.stream.readline, *args)

    def close(self):
        pass  # the server's stream, not this request's to close

    @staticmethod
    def _call(method, *args):
        try:
            return method(*args)
        except OSError:
            raise
        except Exception as exc:  # gunicorn's InvalidChunkSize and the like (not OSErrors)
            raise BadRequest(f"The chunked request body is malformed: {type(exc).__name__}.") from exc


class ChunkedBodyRequest(WSGIRequest):
    def __init__(self, environ):
        super().__init__(environ)
        if is_chunked_without_length(environ) and environ.get("wsgi.input_terminated"):
            self._stream = DecodedBody(environ["wsgi.input"])  # it ends with the body


class ChunkedBodyHandler(WSGIHandler):
    request_class = ChunkedBodyRequest

    def __call__(self, environ, start_response):
        if is_chunked_without_length(environ) and not environ.get("wsgi.input_terminated"):
            start_response(
                "411 Length Required",
                [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(LENGTH_REQUIRED)))],
            )
            return [LENGTH_REQUIRED]
        return super().__call__(environ, start_response)


def get_application() -> ChunkedBodyHandler:
    """What ``django.core.wsgi.get_wsgi_application`` returns, with chunked bodies read."""
    django.setup(set_prefix=False)
    return ChunkedBodyHandler()
