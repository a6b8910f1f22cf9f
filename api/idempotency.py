"""``Idempotency-Key`` on writes: the first reply to (user, key) is stored and replayed for a retry
with the same key, so a retried CI step does not open a second change request.

The same key with a different request (method, path, query or body) is refused with 422; while the
first request is still running a retry gets 409, unless it has been "running" for longer than
ABANDONED_AFTER (the process died mid-way): then the retry takes the key over and runs. Replies of
5xx, 401 and 403 are not kept (a retry runs again). Keys are kept for KEEP_FOR (24 hours, as most APIs that
offer them), per user.

The fingerprint also names the credential (which token, and whether it is read-only, or the browser
session), so a read-only token never gets the replay of a write; read-only tokens are not recorded
at all (their writes answer 403). A reply that carries a secret (a view sets
``request.idempotency_no_replay`` to the reason) is never stored: its record keeps a 409 with that
reason instead, which a retry gets. A reply is not replayed to a user who has lost a role they held
when it was made (403): the view, run again, could refuse them, and the replay must not answer for it."""

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
from fedportal.roles import user_roles

HEADER = "Idempotency-Key"
KEEP_FOR = timedelta(hours=24)
ABANDONED_AFTER = timedelta(minutes=5)
NO_REPLAY = "idempotency_no_replay"
MAX_KEY = 255
# refusals of the caller, not of the request (a missing CSRF token, a role): the request never ran,
# and a retry that fixes the cause must run rather than get the refusal replayed
UNKEPT_REFUSALS = (401, 403)


def _json(status: int, error: str, message: str) -> HttpResponse:
    return HttpResponse(json.dumps(error_body(error, message)), status=status, content_type="application/json")


def _caller(request):
    """(user, credential) of the request: the credential names the token (and its read-only flag) or
    the browser session; (None, "") without either."""
    token = token_from_request(request)
    if token is not None:
        return token.user, f"token:{token.pk}:{'ro' if token.read_only else 'rw'}"
    user = getattr(request, "user", None)
    return (user, "session") if user is not None and user.is_authenticated else (None, "")


def _fingerprint(request, credential: str) -> str:
    digest = hashlib.sha256()
    # the content type too: the same bytes sent as YAML and as JSON are different requests
    for part in (credential, request.method, request.path, request.META.get("QUERY_STRING", ""), request.content_type):
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
        user, credential = _caller(request)
        if user is None:
            return view(request, *args, **kwargs)  # answers 401
        token = token_from_request(request)
        if token is not None and token.read_only:
            return view(request, *args, **kwargs)  # answers 403; nothing to record or replay
        fingerprint = _fingerprint(request, credential)
        now = timezone.now()
        try:
            with transaction.atomic():
                IdempotencyRecord.objects.filter(user=user, created_at__lt=now - KEEP_FOR).delete()
                record = IdempotencyRecord.objects.create(
                    user=user,
                    key=key,
                    fingerprint=fingerprint,
                    created_at=now,
                    roles=",".join(sorted(user_roles(user))),
                )
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
                # still running, or abandoned (the process died mid-way): then this retry takes it over
                taken = record.created_at < now - ABANDONED_AFTER and IdempotencyRecord.objects.filter(
                    pk=record.pk, status=0, created_at=record.created_at
                ).update(created_at=now, roles=",".join(sorted(user_roles(user))))  # the roles this run has
                if not taken:
                    return _json(
                        409, "conflict", f"The first request with this {HEADER} is still running; retry later."
                    )
            elif lost := set(filter(None, record.roles.split(","))) - user_roles(user):
                return _json(
                    403,
                    "forbidden",
                    f"You no longer hold the {', '.join(sorted(lost))} role(s) you held when the first request with "
                    f"this {HEADER} ran: its reply is not replayed.",
                )
            else:
                response = HttpResponse(bytes(record.body), status=record.status, content_type=record.content_type)
                response["Idempotent-Replayed"] = "true"
                return response
        try:
            response = view(request, *args, **kwargs)
        except BaseException:
            IdempotencyRecord.objects.filter(pk=record.pk).delete()
            raise
        if response.streaming or response.status_code >= 500 or response.status_code in UNKEPT_REFUSALS:
            IdempotencyRecord.objects.filter(pk=record.pk).delete()
        elif getattr(request, NO_REPLAY, None):
            # the reply carries a secret: keep the key (a retry must not create a second one) but not the reply
            refusal = _json(409, "conflict", getattr(request, NO_REPLAY))
            IdempotencyRecord.objects.filter(pk=record.pk).update(
                status=refusal.status_code, content_type=refusal["Content-Type"], body=refusal.content
            )
        else:
            IdempotencyRecord.objects.filter(pk=record.pk).update(
                status=response.status_code, content_type=response.get("Content-Type", ""), body=response.content
            )
        return response

    return wrapped
