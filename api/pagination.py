"""Cursor (keyset) pagination: a page is ``limit`` rows after the cursor, in a fixed order on a
unique key, so pages never skip or repeat rows while others write, and a page costs the same
whatever its depth. The cursor is opaque to clients (base64 of the last row's key)."""

import base64
import binascii
import json

from api.errors import ApiError
from fedportal.text import text_error

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


def encode_cursor(value) -> str:
    return base64.urlsafe_b64encode(json.dumps([value]).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, kind: type):
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()).decode())[0]
    except (ValueError, binascii.Error, IndexError, KeyError, TypeError, UnicodeDecodeError):
        value = None
    if not _is_key(value, kind):
        raise _invalid_cursor()
    return value


def decode_key_cursor(cursor: str, kinds: tuple[type, ...]) -> tuple:
    """The values of a cursor over a composite key (``encode_cursor`` of a list), each of its kind."""
    values = decode_cursor(cursor, list)
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
        "The cursor is not one this API returned; start again without it.",
        {"cursor": ["Not a valid cursor."]},
    )


def page(queryset, *, key: str, cursor: str | None, limit: int, descending: bool = False, kind: type = int):
    """(rows, next_cursor) of the queryset ordered on ``key`` (a unique field); rows are what the
    queryset gives (model instances, or dicts of a ``values()`` queryset that selects ``key``)."""
    if cursor:
        value = decode_cursor(cursor, kind)
        queryset = queryset.filter(**{f"{key}__{'lt' if descending else 'gt'}": value})
    rows = list(queryset.order_by(f"-{key}" if descending else key)[: limit + 1])
    if len(rows) > limit:
        last = rows[limit - 1]
        next_cursor = encode_cursor(last[key] if isinstance(last, dict) else getattr(last, key))
    else:
        next_cursor = None
    return rows[:limit], next_cursor
