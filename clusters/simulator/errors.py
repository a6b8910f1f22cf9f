"""Kubernetes `Status` error objects, as the apiserver sends them."""
from __future__ import annotations

REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
    503: "ServiceUnavailable", 504: "Timeout",
}


class ApiError(Exception):
    """Raised by handlers; rendered as a Status object with this code/reason/message."""

    def __init__(self, code: int, message: str, *, reason: str | None = None, details: dict | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> dict:
        body = {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def resource_ref(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(404, f'{resource_ref(plural, group)} "{name}" not found',
                    details={"name": name, "group": group, "kind": plural})


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(409, f'{resource_ref(plural, group)} "{name}" already exists',
                    reason="AlreadyExists", details={"name": name, "group": group, "kind": plural})


def conflict(plural: str, group: str, name: str) -> ApiError:
    return ApiError(409, f'Operation cannot be fulfilled on {resource_ref(plural, group)} "{name}": '
                         "the object has been modified; please apply your changes to the latest "
                         "version and try again",
                    details={"name": name, "group": group, "kind": plural})


def invalid(kind: str, group: str, name: str, causes: list[dict]) -> ApiError:
    ref = f"{kind}.{group}" if group else kind
    parts = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    message = f'{ref} "{name}" is invalid: ' + (f"[{parts}]" if len(causes) > 1 else parts)
    return ApiError(422, message, details={"name": name, "group": group, "kind": kind, "causes": causes})


def success(plural: str, group: str, name: str, uid: str | None) -> dict:
    details = {"name": name, "group": group, "kind": plural}
    if uid:
        details["uid"] = uid
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": details}
