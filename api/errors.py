"""Every API error is JSON ``{"error": code, "message": text, "fields": {field: [messages]}}``."""

import json

from django.conf import settings
from django.core.exceptions import (
    BadRequest,
    ObjectDoesNotExist,
    PermissionDenied,
    RequestDataTooBig,
    ValidationError,
)
from django.http import Http404, HttpResponse, RawPostDataException
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError

from federation.approvals.services import TransitionError
from federation.services import FederationError, SpecError


class ApiError(Exception):
    """Raised by endpoints: ``ApiError(409, "conflict", "…", fields={...})``."""

    def __init__(self, status: int, error: str, message: str, fields: dict | None = None):
        super().__init__(message)
        self.status, self.error, self.message, self.fields = status, error, message, fields or {}


def error_body(error: str, message: str, fields: dict | None = None) -> dict:
    return {"error": error, "message": message, "fields": fields or {}}


def too_large() -> HttpResponse:
    """The 413 of a body over Django's upload limit (DATA_UPLOAD_MAX_MEMORY_SIZE)."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    body = error_body("too_large", f"The request body is larger than {limit // 1024} KiB.")
    return HttpResponse(json.dumps(body), status=413, content_type="application/json")


def unreadable(exc: BadRequest) -> HttpResponse:
    """The 400 of a body the server could not read (fedportal.chunked_bodies: a malformed chunk)."""
    body = error_body("invalid", str(exc) or "The request body could not be read.")
    return HttpResponse(json.dumps(body), status=400, content_type="application/json")


def form_body() -> HttpResponse:
    """The 415 of a form or multipart body that a browser session's CSRF check parsed before the
    view could read it as JSON (Django then refuses to give the raw body: a 500 before this)."""
    body = error_body(
        "unsupported_media_type",
        "Send the body as application/json (a manifest as application/yaml); form and multipart bodies are not read.",
    )
    return HttpResponse(json.dumps(body), status=415, content_type="application/json")


def _validation_fields(exc: ValidationError) -> tuple[str, dict]:
    if hasattr(exc, "error_dict"):
        fields = {
            ("non_field_errors" if key == "__all__" else key): [str(m) for m in ValidationError(msgs).messages]
            for key, msgs in exc.error_dict.items()
        }
        return "; ".join(f"{k}: {' '.join(v)}" for k, v in fields.items()), fields
    return " ".join(exc.messages), {}


def _ninja_fields(exc: NinjaValidationError) -> dict:
    fields: dict[str, list[str]] = {}
    for item in exc.errors:
        loc = [str(part) for part in item.get("loc", ()) if part not in ("body", "query", "path", "payload", "filters")]
        message = item.get("msg", "invalid")
        if not loc and item.get("type") == "missing" and "body" in item.get("loc", ()):
            # "non_field_errors: Field required" for a POST without a body
            message = "The request has no body: send a JSON object ({} for the defaults)."
        fields.setdefault(".".join(loc) or "non_field_errors", []).append(message)
    return fields


def install(api) -> None:
    """Register the handlers on a NinjaAPI."""

    def reply(request, status, error, message, fields=None):
        return api.create_response(request, error_body(error, message, fields), status=status)

    @api.exception_handler(ApiError)
    def api_error(request, exc):
        return reply(request, exc.status, exc.error, exc.message, exc.fields)

    @api.exception_handler(AuthenticationError)
    def unauthenticated(request, exc):
        response = reply(
            request,
            401,
            "unauthenticated",
            "Send a valid, unexpired, unrevoked API token as 'Authorization: Bearer <token>'.",
        )
        response["WWW-Authenticate"] = 'Bearer realm="fedportal"'
        return response

    @api.exception_handler(RequestDataTooBig)
    def too_big(request, exc):
        # django-ninja catches it while reading the body (without this handler: a 500 with the
        # traceback under DEBUG); the request guard's own except serves bodies read before ninja's
        return too_large()

    @api.exception_handler(BadRequest)
    def bad_request(request, exc):
        return unreadable(exc)

    @api.exception_handler(RawPostDataException)
    def form_posted(request, exc):
        return form_body()

    @api.exception_handler(PermissionDenied)
    def forbidden(request, exc):
        return reply(request, 403, "forbidden", str(exc) or "You may not do this.")

    @api.exception_handler(Http404)
    def not_found(request, exc):
        return reply(request, 404, "not_found", str(exc) or "Not found.")

    @api.exception_handler(ObjectDoesNotExist)
    def missing(request, exc):
        return reply(request, 404, "not_found", str(exc) or "Not found.")

    @api.exception_handler(NinjaValidationError)
    def invalid_request(request, exc):
        fields = _ninja_fields(exc)
        return reply(
            request, 422, "invalid_request", "; ".join(f"{k}: {' '.join(v)}" for k, v in fields.items()), fields
        )

    @api.exception_handler(ValidationError)
    def invalid(request, exc):
        message, fields = _validation_fields(exc)
        return reply(request, 400, "invalid", message, fields)

    @api.exception_handler(SpecError)
    def bad_spec(request, exc):
        fields = {("non_field_errors" if k == "__all__" else k): v for k, v in exc.errors.items()}
        return reply(request, 400, "invalid", str(exc), fields)

    @api.exception_handler(FederationError)
    def federation_error(request, exc):
        return reply(request, 400, "invalid", str(exc))

    @api.exception_handler(TransitionError)
    def transition(request, exc):
        return reply(request, 409, "conflict", str(exc))

    @api.exception_handler(HttpError)
    def http_error(request, exc):
        # django-ninja's own 400 is a body it cannot parse (form-encoded, say): the code every other
        # refused input has, and what to send
        if exc.status_code == 400:
            return reply(request, 400, "invalid", f"{exc}: send a JSON object (Content-Type: application/json).")
        return reply(request, exc.status_code, "error", str(exc))
