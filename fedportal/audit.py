"""Writing and verifying the audit log. Services call ``record_event`` explicitly."""

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone

from fedportal import bulk, request_context
from fedportal.masking import mask_secrets
from fedportal.models import AuditChainHead, AuditEvent

GENESIS_HASH = "0" * 64
REDACTED = "[redacted]"
_SECRET_MARKERS = ("token", "password", "secret", "private_key", "client_key", "credential", "certificate_data")


def redact(value):
    """A copy of ``value`` with every secret-looking key's value replaced by ``[redacted]``."""
    if isinstance(value, dict):
        return {
            key: (REDACTED if _is_secret_key(key) and item not in (None, "", {}) else redact(item))
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(item) for item in value]
    return value


@functools.lru_cache(maxsize=4096)  # the same few keys come back in every event
def _is_secret_key(key) -> bool:
    lowered = str(key).lower()
    return any(marker in lowered for marker in _SECRET_MARKERS)


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), cls=DjangoJSONEncoder)


def compute_hash(event: AuditEvent) -> str:
    return _hash_values(vars(event))


# What an event's hash covers (besides created_at, hashed as ISO 8601), by attname.
_HASHED_FIELDS = ("prev_hash", "actor_id", "actor_name", "action", "object_type", "object_id", "object_repr",
                  "cluster", "summary", "before", "after", "request_id", "source_ip")


def _hash_values(values: Mapping) -> str:
    """The hash of an event given as its field values by attname (an instance's ``vars``, or a row)."""
    payload = {name: values[name] for name in _HASHED_FIELDS}
    payload["created_at"] = values["created_at"].isoformat()
    return hashlib.sha256(_canonical(payload).encode()).hexdigest()


def _normalise(value):
    """JSON round-trip so the hash is computed over exactly what the database stores; credentials
    redacted, and the values of any Secret manifest in it masked (fedportal.masking)."""
    return None if value is None else json.loads(_canonical(mask_secrets(redact(value))))


def record_event(
    action: str,
    *,
    actor=None,
    obj=None,
    object_type: str = "",
    object_id: str | int = "",
    object_repr: str = "",
    cluster: str = "",
    summary: str = "",
    before=None,
    after=None,
) -> AuditEvent:
    """Append one event to the chain. ``actor`` defaults to the request's user, else 'system'."""
    rows = prepare_events([dict(action=action, actor=actor, obj=obj, object_type=object_type, object_id=object_id,
                                object_repr=object_repr, cluster=cluster, summary=summary, before=before,
                                after=after)])
    return _append(rows, read_ids=True)[0]


def record_events(events: list[dict]) -> None:
    """Append several events (each a dict of ``record_event``'s keyword arguments) in one go: one lock
    of the chain head, one INSERT, the hashes chained in list order. What a batch task uses."""
    append_events(prepare_events(events))


def prepare_events(events: list[dict]) -> list[dict]:
    """The events for ``record_events``' arguments as rows (AuditEvent attname -> value), not yet
    chained. A task that holds a database lock while it writes builds its events before taking it,
    then calls ``append_events``."""
    context = request_context.current()
    return [_event_row(context, **spec) for spec in events]


def append_events(rows: list[dict]) -> None:
    """Chain prepared events onto the log (hashes in list order) and save them with one statement
    (fedportal.bulk.insert_values: no model instance per event; their ids are not read back)."""
    _append(rows, read_ids=False)


def _append(rows: list[dict], *, read_ids: bool) -> list[AuditEvent]:
    """Chain ``rows`` onto the log; with ``read_ids``, saved as instances, which are returned."""
    if not rows:
        return []
    # no savepoint of its own: inside a caller's transaction a failure here rolls that back whole
    with transaction.atomic(savepoint=False):
        head, _ = AuditChainHead.objects.select_for_update().get_or_create(pk=1)
        prev_hash = head.last_hash
        for row in rows:
            row["prev_hash"] = prev_hash
            row["hash"] = prev_hash = _hash_values(row)
        events = []
        if read_ids:
            events = AuditEvent.objects.bulk_create([AuditEvent(**row) for row in rows])
        else:
            bulk.insert_values(AuditEvent, rows)
        AuditChainHead.objects.filter(pk=1).update(last_hash=prev_hash, length=head.length + len(rows))
    return events


def _event_row(context, *, action: str, actor=None, obj=None, object_type: str = "",
               object_id: str | int = "", object_repr: str = "", cluster: str = "", summary: str = "",
               before=None, after=None) -> dict:
    if actor is None and context.user is not None and getattr(context.user, "is_authenticated", False):
        actor = context.user
    if obj is not None:
        object_type = object_type or obj._meta.label_lower
        object_id = object_id or obj.pk
        object_repr = object_repr or str(obj)
    return dict(
        created_at=timezone.now(),
        actor_id=getattr(actor, "pk", None),
        actor_name=(actor.get_username() if actor is not None else "system")[:150],
        action=action,
        object_type=object_type[:64],
        object_id=str(object_id)[:64],
        object_repr=str(object_repr)[:255],
        cluster=cluster[:63],
        summary=summary,
        before=_normalise(before),
        after=_normalise(after),
        request_id=context.request_id,
        source_ip=context.source_ip,
    )


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    checked: int
    broken_id: int | None = None
    reason: str = ""


def verify_chain(*, batch_size: int = 5000) -> VerifyResult:
    """Walk the chain in id order; report the first event whose link or content does not match.

    An edited row fails its own content hash; a removed row makes the next event's prev_hash
    point at nothing; removing the newest rows (or all of them) leaves the chain head, which
    ``record_event`` keeps in step, disagreeing with what is left.
    """
    expected_prev = GENESIS_HASH
    previous_id = None
    checked = 0
    for event in AuditEvent.objects.order_by("id").iterator(chunk_size=batch_size):
        if event.prev_hash != expected_prev:
            after = f"event {previous_id}" if previous_id is not None else "the start of the chain"
            return VerifyResult(
                False,
                checked,
                event.pk,
                f"its prev_hash does not match the hash of {after} before it "
                "(an event in between was removed, or the one before it was altered)",
            )
        if compute_hash(event) != event.hash:
            return VerifyResult(False, checked, event.pk, "its content does not match its hash (the row was altered)")
        expected_prev = event.hash
        previous_id = event.pk
        checked += 1
    head = AuditChainHead.objects.filter(pk=1).first()
    if head is not None and (head.last_hash != expected_prev or head.length != checked):
        newest = f"after event {previous_id}" if previous_id is not None else "(every event)"
        return VerifyResult(
            False,
            checked,
            None,
            f"the chain head expects {head.length} events ending in {head.last_hash[:12]}…, "
            f"found {checked}: the newest events {newest} were removed",
        )
    return VerifyResult(True, checked)
