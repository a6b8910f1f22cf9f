"""Cursor (keyset) pagination: a page is ``limit`` rows after the cursor, in a fixed order on a
unique key, so pages never skip or repeat rows while others write, and a page costs the same
whatever its depth. The cursor is opaque to clients: base64 of the list it belongs to and the last
row's key, so a cursor of one list given to another (both keyed on ids) is refused, not read as a
position in a list it never came from."""

import base64
import binascii
import json

from api.errors import ApiError
from fedportal.text import text_error

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


def encode_cursor(value, *, scope: str) -> str:
    """The cursor after ``value`` in the list named ``scope`` (e.g. "clusters")."""
    return base64.urlsafe_b64encode(json.dumps([scope, value]).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, kind: type, *, scope: str):
    """The key a cursor of the list ``scope`` holds; ApiError 400 for any other text."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        found_scope, value = json.loads(base64.urlsafe_b64decode(padded.encode()).decode())
    except (ValueError, binascii.Error, IndexError, KeyError, TypeError, UnicodeDecodeError):
        found_scope, value = None, None
    if found_scope != scope or not _is_key(value, kind):
        raise _invalid_cursor()
    return value


def decode_key_cursor(cursor: str, kinds: tuple[type, ...], *, scope: str) -> tuple:
    """The values of a cursor over a composite key (``encode_cursor`` of a list), each of its kind."""
    values = decode_cursor(cursor, list, scope=scope)
    if len(values) != len(kinds) or not all(_is_key(v, kind) for v, kind in zip(values, kinds, strict=True)):
        raise _invalid_cursor()
    return tuple(values)


def _is_key(value, kind: type) -> bool:
    # a str key must be text the database can compare (a NUL or a lone surrogate is a 500 there)
    return (
        isinstance(value, kind) and not isinstance(value, bool) and not (isinstance(value, str) and text_error(value))
    )


def _invalid_cursor() -> ApiError:
    return ApiError(
        400,
        "invalid_cursor",
        "The cursor is not one this list returned; start again without it.",
        {"cursor": ["Not a valid cursor."]},
    )


def page(queryset, *, scope: str, key: str, cursor: str | None, limit: int, descending: bool = False, kind: type = int):
    """(rows, next_cursor) of the queryset ordered on ``key`` (a unique field); rows are what the
    queryset gives (model instances, or dicts of a ``values()`` queryset that selects ``key``).
    ``scope`` names the list (its cursors are refused by every other list)."""
    if cursor:
        value = decode_cursor(cursor, kind, scope=scope)
        queryset = queryset.filter(**{f"{key}__{'lt' if descending else 'gt'}": value})
    rows = list(queryset.order_by(f"-{key}" if descending else key)[: limit + 1])
    if len(rows) > limit:
        last = rows[limit - 1]
        next_cursor = encode_cursor(last[key] if isinstance(last, dict) else getattr(last, key), scope=scope)
    else:
        next_cursor = None
    return rows[:limit], next_cursor
