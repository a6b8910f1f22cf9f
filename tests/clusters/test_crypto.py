"""clusters.crypto: credentials at rest (MultiFernet), key rotation, the decryption cache."""

import pytest
from cryptography.fernet import Fernet

from clusters import crypto


@pytest.fixture
def keys(settings):
    settings.FEDPORTAL_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    return settings


def test_round_trip_and_each_call_gets_its_own_dict(keys):
    token = crypto.encrypt_json({"token": "s3cret"})
    assert "s3cret" not in token
    first = crypto.decrypt_json(token)
    first["token"] = "changed by a caller"
    assert crypto.decrypt_json(token) == {"token": "s3cret"}  # a cached plaintext is never shared


def test_a_rotated_key_list_still_decrypts_and_a_foreign_key_does_not(keys):
    old = keys.FEDPORTAL_ENCRYPTION_KEYS[0]
    token = crypto.encrypt_json({"token": "s3cret"})
    assert crypto.decrypt_json(token) == {"token": "s3cret"}  # now cached for the old key list
    keys.FEDPORTAL_ENCRYPTION_KEYS = [Fernet.generate_key().decode(), old]  # rotation: new key first
    assert crypto.decrypt_json(token) == {"token": "s3cret"}
    keys.FEDPORTAL_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]  # the old key removed
    with pytest.raises(crypto.CredentialDecryptError, match="cannot be decrypted"):
        crypto.decrypt_json(token)  # the cache is per key list: no stale success


def test_garbage_is_a_clear_error(keys):
    with pytest.raises(crypto.CredentialDecryptError):
        crypto.decrypt_json("not-a-fernet-token")
    assert crypto.decrypt_json("") == {}
