from django.contrib.auth.middleware import LoginRequiredMiddleware

from fedportal import request_context


class RequestContextMiddleware:
    """Gives every request an id (echoed as X-Request-ID) and records who and where for audit."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request_id = request.headers.get("X-Request-ID", "")[:64] or request_context.new_request_id()
        request.request_id = request_id
        token = request_context.activate(
            request_context.RequestContext(
                request_id=request_id,
                source_ip=request.META.get("REMOTE_ADDR") or None,
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
