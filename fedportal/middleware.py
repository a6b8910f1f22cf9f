import re

from django.contrib.auth.middleware import LoginRequiredMiddleware

from fedportal import request_context
from fedportal.client_ip import client_ip

# A client-sent X-Request-ID is kept only if it is a short token (no spaces, quotes or markup that
# could end up in logs, CSV exports or pages); anything else gets a fresh id.
REQUEST_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,64}")


class RequestContextMiddleware:
    """Gives every request an id (echoed as X-Request-ID) and records who and where for audit."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        sent = request.headers.get("X-Request-ID", "")
        request_id = sent if REQUEST_ID_RE.fullmatch(sent) else request_context.new_request_id()
        request.request_id = request_id
        token = request_context.activate(
            request_context.RequestContext(
                request_id=request_id,
                source_ip=client_ip(request),
                user=getattr(request, "user", None),
            )
        )
        try:
            response = self.get_response(request)
        finally:
            request_context.reset(token)
        response["X-Request-ID"] = request_id
        return response


class LoginRequiredEverywhereMiddleware(LoginRequiredMiddleware):
    """Django's LoginRequiredMiddleware; views opt out with @login_not_required (login, healthz)."""
