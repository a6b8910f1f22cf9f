"""Credentials at rest: MultiFernet over settings.FEDPORTAL_ENCRYPTION_KEYS (first key encrypts,
all keys decrypt, so keys can be rotated by prepending a new one)."""

import json

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class CredentialDecryptError(Exception):
    """The stored credentials cannot be decrypted with any configured key."""


def _fernet() -> MultiFernet:
    return MultiFernet([Fernet(key) for key in settings.FEDPORTAL_ENCRYPTION_KEYS])


def encrypt_json(value: dict) -> str:
    return _fernet().encrypt(json.dumps(value, sort_keys=True).encode()).decode()


def decrypt_json(token: str) -> dict:
    if not token:
        return {}
    try:
        return json.loads(_fernet().decrypt(token.encode()))
    except (InvalidToken, ValueError):
        raise CredentialDecryptError(
            "The stored credentials cannot be decrypted: FEDPORTAL_ENCRYPTION_KEY changed? "
            "Rotate the cluster's credentials."
        ) from None
