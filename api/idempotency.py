"""``Idempotency-Key`` on writes: the first reply to (user, key) is stored and replayed for a retry
with the same key, so a retried CI step does not open a second change request.

The same key with a different request (method, path, query or body) is refused with 422; while the
first request is still running a retry gets 409. Replies of 5xx are not kept (a retry runs again).
Keys are kept for KEEP_FOR (24 hours, as most APIs that offer them), per user."""

import hashlib
import json
from datetime import timedelta
from functools import wraps

from django.db import IntegrityError, transaction
from django.http import HttpResponse
from django.utils import timezone

from api.auth import SAFE_METHODS, token_from_request
from api.errors import error_body
from api.models import IdempotencyRecord

HEADER = "Idempotency-Key"
KEEP_FOR = timedelta(hours=24)
MAX_KEY = 255


def _json(status: int, error: str, message: str) -> HttpResponse:
    return HttpResponse(json.dumps(error_body(error, message)), status=status, content_type="application/json")


def _caller(request):
    token = token_from_request(request)
    if token is not None:
        return token.user
    user = getattr(request, "user", None)
    return user if user is not None and user.is_authenticated else None


def _fingerprint(request) -> str:
    digest = hashlib.sha256()
    for part in (request.method, request.path, request.META.get("QUERY_STRING", "")):
        digest.update(part.encode() + b"\0")
    digest.update(request.body)
    return digest.hexdigest()


def idempotent(view):
    """Wrap an API view (every write of /api/v1/ goes through it)."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        key = request.headers.get(HEADER, "")
        if request.method in SAFE_METHODS or not key:
            return view(request, *args, **kwargs)
        if len(key) > MAX_KEY or not key.isprintable():
            return _json(400, "invalid", f"{HEADER} must be at most {MAX_KEY} printable characters.")
        user = _caller(request)
        if user is None:
            return view(request, *args, **kwargs)  # answers 401
        fingerprint = _fingerprint(request)
        now = timezone.now()
        try:
            with transaction.atomic():
                IdempotencyRecord.objects.filter(user=user, created_at__lt=now - KEEP_FOR).delete()
                record = IdempotencyRecord.objects.create(user=user, key=key, fingerprint=fingerprint, created_at=now)
        except IntegrityError:
            record = IdempotencyRecord.objects.filter(user=user, key=key).first()
            if record is None:
                return _json(409, "conflict", f"A request with this {HEADER} was just being recorded; retry.")
            if record.fingerprint != fingerprint:
                return _json(
                    422,
                    "idempotency_key_reused",
                    f"This {HEADER} was used for a different request; use a new key for a new request.",
                )
            if record.status == 0:
                return _json(409, "conflict", f"The first request with this {HEADER} is still running; retry later.")
            response = HttpResponse(bytes(record.body), status=record.status, content_type=record.content_type)
            response["Idempotent-Replayed"] = "true"
            return response
        try:
            response = view(request, *args, **kwargs)
        except BaseException:
            IdempotencyRecord.objects.filter(pk=record.pk).delete()
            raise
        if response.streaming or response.status_code >= 500:
            IdempotencyRecord.objects.filter(pk=record.pk).delete()
        else:
            IdempotencyRecord.objects.filter(pk=record.pk).update(
                status=response.status_code, content_type=response.get("Content-Type", ""), body=response.content
            )
        return response

    return wrapped
