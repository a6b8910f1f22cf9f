"""Kubernetes `Status` error objects, as the apiserver sends them."""

from __future__ import annotations

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
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
        """The Status as the apiserver encodes it: metav1.Status's field order (kind, apiVersion,
        metadata, status, message, reason, details, code), empty optional fields left out."""
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        details = shaped_details(self.details)
        if details:
            body["details"] = details
        body["code"] = self.code
        return body


_DETAIL_ORDER = ("name", "group", "kind", "uid", "causes", "retryAfterSeconds")
_CAUSE_ORDER = ("reason", "message", "field")


def shaped_details(details: dict | None) -> dict:
    """StatusDetails in its Go field order, every field omitempty (so no "group": "" for the core
    group), each cause as a StatusCause (reason, message, field)."""
    out = {}
    for key in _DETAIL_ORDER:
        value = (details or {}).get(key)
        if not value:
            continue
        if key == "causes":
            value = [{k: c[k] for k in _CAUSE_ORDER if c.get(k)} for c in value]
        out[key] = value
    return out


def resource_ref(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, f'{resource_ref(plural, group)} "{name}" not found', details={"name": name, "group": group, "kind": plural}
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'{resource_ref(plural, group)} "{name}" already exists',
        reason="AlreadyExists",
        details={"name": name, "group": group, "kind": plural},
    )


def conflict(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {resource_ref(plural, group)} "{name}": '
        "the object has been modified; please apply your changes to the latest "
        "version and try again",
        details={"name": name, "group": group, "kind": plural},
    )


def uid_mismatch_no_object(plural: str, group: str, name: str, uid: str) -> ApiError:
    """A patch (server-side apply too) naming a metadata.uid where no object exists: kube-apiserver's
    patcher refuses it before admission (apiserver pkg/endpoints/handlers/patch.go, applyPatch:
    objToUpdateHasUID && !currentObjectHasUID -> errors.NewConflict), so never creates it."""
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {resource_ref(plural, group)} "{name}": uid mismatch: the provided '
        f"object specified uid {uid}, and no existing object was found",
        details={"name": name, "group": group, "kind": plural},
    )


def invalid(kind: str, group: str, name: str, causes: list[dict]) -> ApiError:
    ref = f"{kind}.{group}" if group else kind
    parts = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    message = f'{ref} "{name}" is invalid: ' + (f"[{parts}]" if len(causes) > 1 else parts)
    return ApiError(422, message, details={"name": name, "group": group, "kind": kind, "causes": causes})


def success(plural: str, group: str, name: str, uid: str | None) -> dict:
    details = shaped_details({"name": name, "group": group, "kind": plural, "uid": uid})
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
