"""Secret values never leave the server in clear: the one masking function, and its inverse for the
edit form.

``mask_secrets(value, secret=...)`` is applied wherever a manifest, a revision, an override, a diff
or a problem message is shown or written out: pages and htmx partials, CSV exports, JSON/YAML
output of the management commands, the audit log's before/after. It returns a copy in which

* every value under ``data`` or ``stringData`` of a Secret is replaced by a mask token;
* every diff row or override operation (a mapping with a ``path``) whose path runs through
  ``data``/``stringData`` has its ``value``/``before``/``after`` masked;
* the ``kubectl.kubernetes.io/last-applied-configuration`` annotation of a Secret (a copy of the
  whole object, values included) is masked;
* any string is scrubbed of the values listed in ``known`` (``secret_values`` collects them, in
  plain and base64 form), for free text such as an API server's error message.

A mapping with ``kind: Secret`` is recognised on its own; pass ``secret=True`` for structures that
belong to a Secret but do not say so (a revision's template, its overrides, a drift list).

A mask token is ``<secret hmac:…>`` with 12 hex digits of an HMAC of the value keyed with a key
derived from SECRET_KEY: a diff still shows that a value changed (the token changes), but nobody
can test a guess against it (an unkeyed hash of a weak password could be looked up).

``restore_masked(new, old)`` undoes masking where an operator left a token as it was: the edit form
shows tokens, a token sent back unchanged keeps the stored value, anything typed in replaces it.
"""

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping

from django.conf import settings

SECRET_KIND = "Secret"
SECRET_FIELDS = ("data", "stringData")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
TOKEN_RE = re.compile(r"<secret hmac:[0-9a-f]{12}>")
# a diff row or override operation on a Secret's values: under data/stringData, or the annotation
# kubectl keeps a copy of the whole object in (a JSON pointer escapes its "/" as "~1")
_PATH_RE = re.compile(
    r"(^|/)(data|stringData)(/|$)|/metadata/annotations/kubectl\.kubernetes\.io~1last-applied-configuration$"
)
_MIN_KNOWN = 4  # shorter strings are not scrubbed out of free text (they would match everywhere)


class MaskedValueError(ValueError):
    """A mask token was sent back where no stored value matches it."""

    def __init__(self, path: str):
        self.path = path
        super().__init__(f"{path}: the value is hidden and does not match a stored one; type the value.")


def _key() -> bytes:
    return hashlib.sha256(b"fedportal.masking:" + settings.SECRET_KEY.encode()).digest()


def mask_token(value) -> str:
    """The token shown instead of ``value``."""
    raw = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return f"<secret hmac:{hmac.new(_key(), raw.encode(), hashlib.sha256).hexdigest()[:12]}>"


def is_secret_kind(kind: str | None) -> bool:
    return kind == SECRET_KIND


def _is_secret_manifest(value: Mapping) -> bool:
    return value.get("kind") == SECRET_KIND and value.get("apiVersion") in (None, "v1")


def _mask_leaves(value):
    if isinstance(value, Mapping):
        return {key: _mask_leaves(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mask_leaves(item) for item in value]
    if value is None:
        return None
    return value if isinstance(value, str) and TOKEN_RE.fullmatch(value) else mask_token(value)


def _scrub(text: str, known: tuple[str, ...]) -> str:
    present = [secret for secret in known if secret in text]
    if not present:
        return text
    pattern = re.compile("|".join(re.escape(secret) for secret in present))  # longest first, one pass
    return pattern.sub(lambda match: mask_token(match.group(0)), text)


def mask_secrets(value, *, secret: bool = False, known: Iterable[str] = ()):
    """A copy of ``value`` with Secret values masked (see the module docstring)."""
    known = tuple(sorted({k for k in known if isinstance(k, str) and len(k) >= _MIN_KNOWN}, key=len, reverse=True))
    return _mask(value, secret, known)


def _mask(value, secret: bool, known: tuple[str, ...]):
    if isinstance(value, Mapping):
        secret = secret or _is_secret_manifest(value)
        in_secret_path = secret and isinstance(value.get("path"), str) and bool(_PATH_RE.search(value["path"]))
        result = {}
        for key, item in value.items():
            if secret and (
                key in SECRET_FIELDS or key == LAST_APPLIED or (in_secret_path and key in ("value", "before", "after"))
            ):
                # the annotation wherever it sits: in a manifest's annotations, or a diff row's value
                # at /metadata/annotations
                result[key] = _mask_leaves(item)
            else:
                result[key] = _mask(item, secret, known)
        return result
    if isinstance(value, (list, tuple)):
        return [_mask(item, secret, known) for item in value]
    if isinstance(value, str) and known:
        return _scrub(value, known)
    return value


def secret_values(value, *, secret: bool = False) -> set[str]:
    """Every string under data/stringData (and override values into them) found in ``value``, with
    the base64 encoding of each plain value and the decoding of each base64 one: what
    ``mask_secrets(known=...)`` scrubs out of free text."""
    found: set[str] = set()

    def leaves(item):
        if isinstance(item, Mapping):
            for child in item.values():
                leaves(child)
        elif isinstance(item, (list, tuple)):
            for child in item:
                leaves(child)
        elif isinstance(item, str):
            found.add(item)
            found.add(base64.b64encode(item.encode()).decode())
            try:
                found.add(base64.b64decode(item, validate=True).decode())
            except (binascii.Error, UnicodeDecodeError, ValueError):
                pass

    def walk(item, secret):
        if isinstance(item, Mapping):
            secret = secret or _is_secret_manifest(item)
            in_path = secret and isinstance(item.get("path"), str) and bool(_PATH_RE.search(item["path"]))
            for key, child in item.items():
                if secret and (key in SECRET_FIELDS or (in_path and key in ("value", "before", "after"))):
                    leaves(child)
                else:
                    walk(child, secret)
        elif isinstance(item, (list, tuple)):
            for child in item:
                walk(child, secret)

    walk(value, secret)
    return {item for item in found if len(item) >= _MIN_KNOWN and not TOKEN_RE.fullmatch(item)}


def scrub_message(message: str, *sources) -> str:
    """``message`` (free text: an API server's refusal, a library's error) without the Secret values
    found in ``sources`` (a Secret's manifests, templates, overrides), in plain and base64 form and as
    Python's repr and JSON escape them inside a quoted string. For text about a Secret only."""
    known = set().union(*(secret_values(source, secret=True) for source in sources if source))
    escaped = {repr(value)[1:-1] for value in known} | {json.dumps(value)[1:-1] for value in known}
    return mask_secrets(message, known=known | escaped)


# a URL's "user:password@" (to the last @ before the path; a password may hold "?" or "#")
_URL_USERINFO_RE = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/\s]*@")


def without_url_userinfo(value):
    """A copy of ``value`` (text, or JSON-like data) with the user name and password taken out of
    every URL in it. For what was recorded before such URLs were refused (the audit log keeps its
    events as written: its chain is tamper-evident)."""
    if isinstance(value, str):
        return _URL_USERINFO_RE.sub(r"\1", value) if "@" in value else value
    if isinstance(value, Mapping):
        return {key: without_url_userinfo(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_url_userinfo(item) for item in value]
    return value


def restore_masked(new, old, *, path: str = ""):
    """``new`` with every mask token that matches the value at the same place in ``old`` replaced
    by that value. A token with no matching stored value raises MaskedValueError (naming where)."""
    if isinstance(new, str) and TOKEN_RE.fullmatch(new):
        if old is not None and not isinstance(old, (Mapping, list)) and mask_token(old) == new:
            return old
        raise MaskedValueError(path or "/")
    if isinstance(new, Mapping):
        old_map = old if isinstance(old, Mapping) else {}
        return {key: restore_masked(item, old_map.get(key), path=f"{path}/{key}") for key, item in new.items()}
    if isinstance(new, list):
        old_list = old if isinstance(old, list) else []
        return [
            restore_masked(item, old_list[i] if i < len(old_list) else None, path=f"{path}/{i}")
            for i, item in enumerate(new)
        ]
    return new
