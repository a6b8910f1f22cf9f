"""Writing and verifying the audit log. Services call ``record_event`` explicitly.

Each event's hash is an HMAC-SHA256, keyed with ``FEDPORTAL_AUDIT_KEY`` (which never lives in the
database), over every column but the id and the hash itself, the previous event's hash included.
Someone who can write to the database but does not hold the key can neither edit an event nor
recompute the chain after removing one. Removing the newest events (and fixing up the head row) is
caught by the head row's own keyed signature (``head_mac``: its chain id, length, head hash and
legacy length, so none of them can be fixed up without the key) and by signed checkpoints appended
outside the database (``write_checkpoint``): each records the chain's id, length and head hash at a
moment, and ``verify_chain`` checks every one of them against the event at that position, so a
checkpoint signed after a tampering does not hide what the earlier ones recorded. Events written
before the key existed keep their plain SHA-256 hashes (``AuditChainHead.legacy_length``,
migration 0003) and are verified the old way.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import TextChoices
from django.utils import timezone

from fedportal import bulk, request_context
from fedportal.masking import mask_secrets
from fedportal.models import AuditChainHead, AuditEvent

logger = logging.getLogger(__name__)

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
    return lowered not in _NOT_SECRET and any(marker in lowered for marker in _SECRET_MARKERS)


# keys that hold a marker's word but no secret: which credential a cluster uses now (its rotation is
# what the event records)
_NOT_SECRET = frozenset({"credential_version"})


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), cls=DjangoJSONEncoder)


def compute_hash(event: AuditEvent) -> str:
    return _hash_values(vars(event))


# What an event's hash covers (besides created_at, hashed as ISO 8601), by attname: every column
# but the id and the hash itself (tests/fedportal/test_audit_chain.py holds this to the model).
HASHED_FIELDS = (
    "prev_hash",
    "actor_id",
    "actor_name",
    "action",
    "object_type",
    "object_id",
    "object_repr",
    "cluster",
    "summary",
    "before",
    "after",
    "request_id",
    "source_ip",
)


def _payload(values: Mapping) -> bytes:
    payload = {name: values[name] for name in HASHED_FIELDS}
    payload["created_at"] = values["created_at"].isoformat()
    return _canonical(payload).encode()


def _key() -> bytes:
    return settings.FEDPORTAL_AUDIT_KEY.encode()


def _hash_values(values: Mapping, key: bytes | None = None) -> str:
    """The keyed hash of an event given as its field values by attname (an instance's ``vars``, or a row)."""
    return hmac.digest(key or _key(), _payload(values), "sha256").hex()


def legacy_hash(values: Mapping) -> str:
    """The unkeyed SHA-256 events had before the chain was keyed (verifying them only)."""
    return hashlib.sha256(_payload(values)).hexdigest()


# Values a JSON round trip gives back as they are (exact types: a str subclass or a float may not).
_JSON_SCALARS = frozenset({str, int, bool, type(None)})


def normalise(value):
    """JSON round-trip so the hash is computed over exactly what the database stores; credentials
    redacted, and the values of any Secret manifest in it masked (fedportal.masking)."""
    if value is None:
        return None
    if _is_flat(value):
        # what most events carry ({"status": ..., "version": ...}): the round trip would give back
        # the same keys, sorted, and the same values (a choice's member as its value); nothing in it
        # for mask_secrets, which masks nested Secret data and diff rows (a "path") only
        return {key: _plain(item) for key, item in sorted(redact(value).items())}
    return json.loads(_canonical(mask_secrets(redact(value))), parse_float=_float_as_stored)


def _float_as_stored(text: str):
    """A JSON number as the database gives it back: PostgreSQL's jsonb keeps numbers as decimals and
    prints them without an exponent, so Python's ``1e+16`` comes back as the integer
    10000000000000000 (every float Python writes with a positive exponent is a whole number), and
    ``-0.0`` as ``0.0``. The
    hash is computed over that, as verification reads it; SQLite keeps the text, which reads the same."""
    if "e+" in text or "E+" in text:
        return int(Decimal(text))
    value = float(text)
    return 0.0 if value == 0 else value  # a decimal has no negative zero: -0.0 comes back 0.0


def _is_flat(value) -> bool:
    """A dict of str keys and JSON scalars (a text choice's member counts: it is stored as its value)
    that is neither a Secret manifest nor a diff row."""
    return (
        type(value) is dict
        and "path" not in value
        and value.get("kind") != "Secret"
        and all(type(key) is str for key in value)
        and all(type(item) in _JSON_SCALARS or isinstance(item, TextChoices) for item in value.values())
    )


def _plain(item):
    """A text choice's member as the str the database gives back; any other scalar as it is."""
    return item.value if isinstance(item, TextChoices) else item


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
    rows = prepare_events(
        [
            dict(
                action=action,
                actor=actor,
                obj=obj,
                object_type=object_type,
                object_id=object_id,
                object_repr=object_repr,
                cluster=cluster,
                summary=summary,
                before=before,
                after=after,
            )
        ]
    )
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
    now = timezone.now()  # one timestamp for the batch: stored once, not converted per row
    return [_event_row(context, now, **spec) for spec in events]


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
        key = _key()
        for row in rows:
            row["prev_hash"] = prev_hash
            row["hash"] = prev_hash = _hash_values(row, key)
        events = []
        if read_ids:
            events = AuditEvent.objects.bulk_create([AuditEvent(**row) for row in rows])
        else:
            bulk.insert_values(AuditEvent, rows)
        chain_id = head.chain_id or secrets.token_hex(16)
        length = head.length + len(rows)
        # a head altered outside FedPortal stays unsigned: appending must not bless it
        mac = head_mac(chain_id, length, prev_hash, head.legacy_length, key) if head_signed(head, key) else ""
        AuditChainHead.objects.filter(pk=1).update(last_hash=prev_hash, length=length, chain_id=chain_id, mac=mac)
    return events


def head_mac(chain_id: str, length: int, last_hash: str, legacy_length: int, key: bytes | None = None) -> str:
    """The keyed signature of the chain head row's values."""
    message = f"fedportal-audit-head\x00{chain_id}\x00{length}\x00{last_hash}\x00{legacy_length}".encode()
    return hmac.digest(key or _key(), message, "sha256").hex()


def head_signed(head: AuditChainHead, key: bytes | None = None) -> bool:
    """Whether the head row is as FedPortal wrote it (a fresh head, before the first event, has no
    signature yet)."""
    if not head.length and not head.chain_id and head.last_hash == GENESIS_HASH and not head.legacy_length:
        return True
    expected = head_mac(head.chain_id, head.length, head.last_hash, head.legacy_length, key)
    return hmac.compare_digest(expected, head.mac or "")


def _event_row(
    context,
    now,
    *,
    action: str,
    actor=None,
    obj=None,
    object_type: str = "",
    object_id: str | int = "",
    object_repr: str = "",
    cluster: str = "",
    summary: str = "",
    before=None,
    after=None,
) -> dict:
    if actor is None and context.user is not None and getattr(context.user, "is_authenticated", False):
        actor = context.user
    if obj is not None:
        object_type = object_type or obj._meta.label_lower
        object_id = object_id or obj.pk
        object_repr = object_repr or str(obj)
    return dict(
        created_at=now,
        actor_id=getattr(actor, "pk", None),
        actor_name=(actor.get_username() if actor is not None else "system")[:150],
        action=action,
        object_type=object_type[:64],
        object_id=str(object_id)[:64],
        object_repr=str(object_repr)[:255],
        cluster=cluster[:63],
        summary=summary,
        before=normalise(before),
        after=normalise(after),
        request_id=context.request_id,
        source_ip=context.source_ip,
    )


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    checked: int
    broken_id: int | None = None
    reason: str = ""
    legacy: int = 0  # of ``checked``, how many predate the key (plain SHA-256)
    checkpoint: Checkpoint | None = None  # the newest checkpoint, checked against the chain


@dataclass(frozen=True)
class Checkpoint:
    chain_id: str
    length: int
    head: str
    at: str

    def message(self) -> bytes:
        return f"fedportal-audit-checkpoint\x00{self.chain_id}\x00{self.length}\x00{self.head}\x00{self.at}".encode()


class CheckpointError(Exception):
    """A checkpoint file that is not what FedPortal wrote (edited, truncated mid-line, foreign)."""


_CHAIN_ID = re.compile(r"[0-9a-f]{32}")


def checkpoint_path(chain_id: str):
    """The checkpoint file of ``chain_id``; CheckpointError for an id FedPortal never makes (the head
    row's, edited into a path such as ``../x``)."""
    if not _CHAIN_ID.fullmatch(chain_id or ""):
        raise CheckpointError(f"the chain id {chain_id[:40]!r} is not one FedPortal makes (the head row was altered)")
    return settings.FEDPORTAL_AUDIT_CHECKPOINTS / f"{chain_id}.jsonl"


def other_chains(chain_id: str) -> list[str]:
    """Chains besides ``chain_id`` whose checkpoints are kept: a chain FedPortal started while their
    events were wiped, unless an operator moved their files away (a new database on purpose)."""
    directory = settings.FEDPORTAL_AUDIT_CHECKPOINTS
    return (
        sorted(path.stem for path in directory.glob("*.jsonl") if path.stem != chain_id) if directory.is_dir() else []
    )


def write_checkpoint() -> Checkpoint | None:
    """Append a signed checkpoint of the chain as it is now (None when the chain has no events yet).

    One JSON line per checkpoint, appended to ``FEDPORTAL_AUDIT_CHECKPOINTS/<chain id>.jsonl``;
    the signature is an HMAC with the audit key, so the file can be kept anywhere (write-once
    storage, another host) and checked later."""
    head = AuditChainHead.objects.filter(pk=1).first()
    if head is None or not head.chain_id or not head.length:
        return None
    if not _CHAIN_ID.fullmatch(head.chain_id) or not head_signed(head):
        # a head altered outside FedPortal: a checkpoint must not vouch for it (verify_audit says why)
        logger.warning("audit checkpoint not written: the chain head row was altered outside FedPortal")
        return None
    point = Checkpoint(head.chain_id, head.length, head.last_hash, timezone.now().isoformat())
    line = (
        json.dumps(
            {
                "chain": point.chain_id,
                "length": point.length,
                "head": point.head,
                "at": point.at,
                "mac": hmac.digest(_key(), point.message(), "sha256").hex(),
            },
            sort_keys=True,
        )
        + "\n"
    )
    directory = settings.FEDPORTAL_AUDIT_CHECKPOINTS
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(checkpoint_path(point.chain_id), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return point


def latest_checkpoint(chain_id: str) -> Checkpoint | None:
    """The longest checkpoint recorded for ``chain_id``; CheckpointError if any line is not genuine."""
    return max(checkpoints(chain_id), key=lambda point: point.length, default=None)


def checkpoints(chain_id: str) -> list[Checkpoint]:
    """Every checkpoint recorded for ``chain_id``, oldest first; CheckpointError if any line is not genuine."""
    path = checkpoint_path(chain_id)
    if not path.exists():
        return []
    found = []
    key = _key()
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            try:
                data = json.loads(line.decode("utf-8"))
                point = Checkpoint(str(data["chain"]), int(data["length"]), str(data["head"]), str(data["at"]))
                genuine = hmac.compare_digest(hmac.digest(key, point.message(), "sha256").hex(), str(data["mac"]))
            except (ValueError, KeyError, TypeError):
                genuine = False
            if not genuine or point.chain_id != chain_id:
                raise CheckpointError(f"line {number} of {path} is not a genuine checkpoint of chain {chain_id}")
            found.append(point)
    return found


def verify_chain(*, batch_size: int = 5000) -> VerifyResult:
    """Walk the chain in id order; report the first event whose link or content does not match.

    An edited row fails its own keyed hash; a removed row makes the next event's prev_hash point
    at nothing; removing the oldest rows leaves the first one not starting at the genesis hash.
    Every stored event is walked, those appended while it runs too. The head row, read first, must
    carry its signature (``head_signed``), and the event at its length must have its hash:
    removing the newest rows leaves it counting more than are left, and a head fixed up to match
    has no valid signature. A head reset to a new chain's (no events, no chain id) while events
    are stored is a reset. Every checkpoint outside the database says which hash the event at its
    position had (a checkpoint signed after a removal does not vouch for the earlier ones).
    """
    head = AuditChainHead.objects.filter(pk=1).first()
    key = _key()
    legacy_length = head.legacy_length if head is not None else 0
    try:
        points = checkpoints(head.chain_id) if head is not None and head.chain_id else []
    except CheckpointError as exc:
        return VerifyResult(False, 0, None, f"the checkpoint file was altered ({exc})")
    recorded: dict[int, Checkpoint] = {}
    for point in points:
        earlier = recorded.setdefault(point.length, point)
        if earlier.head != point.head:
            return VerifyResult(
                False,
                0,
                None,
                f"the checkpoints of {earlier.at} and {point.at} record different hashes for event number "
                f"{point.length} (the chain was rewritten between them)",
            )
    newest_point = max(points, key=lambda point: point.length, default=None)
    expected_prev = GENESIS_HASH
    previous_id = None
    at_head_length = None  # the hash of the event at the head's length
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
        values = vars(event)
        expected = legacy_hash(values) if checked < legacy_length else _hash_values(values, key)
        if not hmac.compare_digest(expected, event.hash):
            return VerifyResult(False, checked, event.pk, "its content does not match its hash (the row was altered)")
        expected_prev = event.hash
        previous_id = event.pk
        checked += 1
        if head is not None and checked == head.length:
            at_head_length = event.hash
        point = recorded.get(checked)
        if point is not None and event.hash != point.head:
            return VerifyResult(
                False,
                checked,
                event.pk,
                f"the checkpoint of {point.at} recorded a different hash for event number {checked} "
                "(the chain was rewritten from there on)",
            )
    legacy = min(checked, legacy_length)
    newest = f"after event {previous_id}" if previous_id is not None else "(every event)"
    if head is None or (not head.chain_id and not head.length):
        return _verify_without_head(head, checked)
    if newest_point is not None and checked < newest_point.length:
        return VerifyResult(
            False,
            checked,
            None,
            f"the checkpoint of {newest_point.at} recorded {newest_point.length} events ending in "
            f"{newest_point.head[:12]}…, found {checked}: the newest events {newest} were removed",
        )
    if not head_signed(head, key):
        return VerifyResult(
            False,
            checked,
            None,
            "the chain head row was altered outside FedPortal (its signature does not match its chain id, "
            "length, head hash or legacy length)",
        )
    if wiped := other_chains(head.chain_id):
        return VerifyResult(
            False,
            checked,
            None,
            f"{settings.FEDPORTAL_AUDIT_CHECKPOINTS} holds checkpoints of chain {', '.join(wiped)}, but the database "
            f"holds chain {head.chain_id}: the events of the earlier chain were removed and a new chain started "
            "(a new database on purpose? move those files elsewhere)",
        )
    if checked < head.length or (head.length and at_head_length != head.last_hash):
        return VerifyResult(
            False,
            checked,
            None,
            f"the chain head expects {head.length} events ending in {head.last_hash[:12]}…, "
            f"found {checked}: the newest events {newest} were removed",
        )
    return VerifyResult(True, checked, legacy=legacy, checkpoint=newest_point)


def _verify_without_head(head: AuditChainHead | None, checked: int) -> VerifyResult:
    """The head row is missing, or is a new chain's (no chain id, no events counted). Right only
    while no event is stored, and no checkpoint says there were some; a first event appended while
    the walk ran has signed a head by now."""
    if checked:
        now = AuditChainHead.objects.filter(pk=1).first()
        if now is not None and now.chain_id and now.length >= checked and head_signed(now):
            return VerifyResult(True, checked)
        what = "is missing (deleted from the database)" if head is None else "was reset (it counts no events)"
        return VerifyResult(False, checked, None, f"the chain head row {what}, but {checked} events are stored")
    known = sorted(path.stem for path in settings.FEDPORTAL_AUDIT_CHECKPOINTS.glob("*.jsonl"))
    if known:
        return VerifyResult(
            False,
            0,
            None,
            f"the chain head row and every event are missing, but {settings.FEDPORTAL_AUDIT_CHECKPOINTS} holds "
            f"checkpoints of chain {', '.join(known)} (a new database? move those files elsewhere)",
        )
    return VerifyResult(True, 0)
