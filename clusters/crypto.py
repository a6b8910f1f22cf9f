"""Credentials at rest: MultiFernet over settings.FEDPORTAL_ENCRYPTION_KEYS (first key encrypts,
all keys decrypt, so keys can be rotated by prepending a new one)."""

import hashlib
import json
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class CredentialDecryptError(Exception):
    """The stored credentials cannot be decrypted with any configured key."""


def _fernet() -> MultiFernet:
    return MultiFernet([Fernet(key) for key in settings.FEDPORTAL_ENCRYPTION_KEYS])


def encrypt_json(value: dict) -> str:
    return _fernet().encrypt(json.dumps(value, sort_keys=True).encode()).decode()


@lru_cache(maxsize=4096)
def _decrypt_json(keys: tuple[str, ...], token: str) -> dict:
    # Every probe and every propagation target decrypts its cluster's credentials; a Fernet token is
    # unique per encryption, so (keys, token) -> credentials can be kept. The plaintext is already in
    # this process's memory anyway: the cached kubernetes ApiClient holds it (clusters/kube.py).
    return json.loads(MultiFernet([Fernet(key) for key in keys]).decrypt(token.encode()))


def reencrypt(token: str) -> str:
    """``token`` encrypted again under the first key (its plaintext unchanged), so older keys can
    be retired; CredentialDecryptError when no configured key opens it."""
    try:
        return _fernet().rotate(token.encode()).decode()
    except (InvalidToken, ValueError):
        raise CredentialDecryptError(
            "The stored credentials cannot be decrypted with any FEDPORTAL_ENCRYPTION_KEY."
        ) from None


def first_key_fingerprint() -> str:
    """A short, non-reversible id of the key that encrypts (for audit events)."""
    return hashlib.sha256(settings.FEDPORTAL_ENCRYPTION_KEYS[0].encode()).hexdigest()[:12]


def decrypt_json(token: str) -> dict:
    if not token:
        return {}
    try:
        return dict(_decrypt_json(tuple(settings.FEDPORTAL_ENCRYPTION_KEYS), token))  # a new dict per call
    except (InvalidToken, ValueError):
        raise CredentialDecryptError(
            "The stored credentials cannot be decrypted: FEDPORTAL_ENCRYPTION_KEY changed? "
            "Rotate the cluster's credentials."
        ) from None
