"""Who is calling the API: a bearer token (``Authorization: Bearer fpt_…``) or the browser's session.

Either way ``request.user`` is the user and the audit log's request context names them. A read-only
token is refused (403) on every write; every write made with a token is audited."""

from django.core.exceptions import PermissionDenied
from ninja.security import HttpBearer, SessionAuth

from api import tokens
from fedportal import request_context
from fedportal.roles import require_role

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def act_as(request, user) -> None:
    """Make ``user`` the request's user, for the views and for the audit log's request context."""
    request.user = user
    current = request_context.current()
    request_context.activate(
        request_context.RequestContext(
            request_id=current.request_id or getattr(request, "request_id", ""),
            source_ip=current.source_ip or request.META.get("REMOTE_ADDR") or None,
            user=user,
        )
    )


def token_from_request(request):
    """The ApiToken of this request's bearer header (looked up once per request), or None."""
    if not hasattr(request, "api_token"):
        header = request.headers.get("Authorization", "")
        scheme, _, raw = header.partition(" ")
        request.api_token = tokens.authenticate(raw.strip()) if scheme.lower() == "bearer" else None
    return request.api_token


class RoleCheck:
    """The role an operation needs, checked as soon as the caller is known: before django-ninja reads
    and validates the body, so a caller without the role learns nothing of what the body should be
    (a 403, never the 422 that describes the fields). The views check their roles again."""

    role: str | None = None

    def checked(self, user):
        if user is not None and self.role is not None:
            require_role(user, self.role)
        return user


class TokenAuth(RoleCheck, HttpBearer):
    openapi_description = "An API token: `manage.py create_token USER` or the profile page."

    def __call__(self, request):
        # django-ninja's HttpBearer logs a header of another scheme whole when DEBUG is on: a token
        # sent as "Token fpt_…" or bare would reach the log; ``token_from_request`` reads the header
        if not request.headers.get(self.header):
            return None
        return self.authenticate(request, "")

    def authenticate(self, request, token):
        api_token = token_from_request(request)
        if api_token is None:
            return None
        if request.method not in SAFE_METHODS:
            tokens.record_write(api_token, method=request.method, path=request.path)
            if api_token.read_only:
                raise PermissionDenied("This API token is read-only.")
        act_as(request, api_token.user)
        return self.checked(api_token.user)


class BrowserSession(RoleCheck, SessionAuth):
    """The logged-in browser (the docs page's "Try it out"); CSRF-checked on writes."""

    openapi_description = "The browser's session cookie (CSRF token required on writes)."

    def __call__(self, request):
        # a request that sends a bearer is judged by it alone (a bad token is 401, never a CSRF 403),
        # and without a logged-in session there is nothing to check a CSRF token for
        if "Authorization" in request.headers or not request.user.is_authenticated:
            return None
        return super().__call__(request)

    def authenticate(self, request, key):
        user = super().authenticate(request, key)
        if user is not None:
            act_as(request, user)
        return self.checked(user)


AUTH = [TokenAuth(), BrowserSession()]


def needs(role: str) -> list:
    """The API's authentication for an operation that needs ``role`` (``auth=needs(Role.ADMIN)``)."""
    made = [TokenAuth(), BrowserSession()]
    for auth in made:
        auth.role = role
    return made
