"""Request bodies sent with ``Transfer-Encoding: chunked`` (no Content-Length: ``curl -T -``, Go's
http client streaming a body, pipelines piping a manifest). Django's WSGIRequest reads at most
CONTENT_LENGTH bytes and takes a missing one as 0, so such a body read as empty and an API call
got "The request has no body". A server that decodes the chunks itself (gunicorn, which says so
with ``wsgi.input_terminated``, PEP 3333's extension) hands over a stream that ends with the body:
it is read here, up to Django's upload limit, and given its length. A server that does not (the
development server) gets a 411 that says what to send instead, rather than an empty body."""

import io

from django.conf import settings

LENGTH_REQUIRED = b"A chunked request body is not supported by this server; send it with a Content-Length.\n"


def is_chunked_without_length(environ) -> bool:
    return "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower() and not environ.get("CONTENT_LENGTH")


def read_chunked_bodies(app):
    """Wrap a WSGI application so a chunked body reaches Django with its length."""

    def application(environ, start_response):
        if is_chunked_without_length(environ):
            if not environ.get("wsgi.input_terminated"):
                start_response(
                    "411 Length Required",
                    [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(LENGTH_REQUIRED)))],
                )
                return [LENGTH_REQUIRED]
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            # one byte past the limit is enough for Django to refuse it (RequestDataTooBig: the API's
            # JSON 413, a page's 400) without this process holding the rest of a huge body
            body = environ["wsgi.input"].read() if limit is None else environ["wsgi.input"].read(limit + 1)
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return app(environ, start_response)

    return application
