"""manage.py rotate_encryption_key (issue 16, finding 11)."""

import io

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command

from clusters import crypto
from clusters.models import Cluster
from fedportal.audit import verify_chain
from fedportal.models import AuditEvent
from tests.clusters.factories import ClusterFactory

pytestmark = pytest.mark.django_db


def stored(name):
    return Cluster.objects.get(name=name).credentials_encrypted


def test_every_credential_is_reencrypted_under_the_first_key_and_the_old_key_can_go(settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.FEDPORTAL_ENCRYPTION_KEYS = [old]
    ClusterFactory(name="a", token="token-a")
    ClusterFactory(name="b", token="token-b")
    before = {name: stored(name) for name in ("a", "b")}
    settings.FEDPORTAL_ENCRYPTION_KEYS = [new, old]  # the new key first, the old one still readable
    out = io.StringIO()
    call_command("rotate_encryption_key", stdout=out)
    assert "Re-encrypted the credentials of 2 cluster(s)" in out.getvalue()
    for name in ("a", "b"):
        assert stored(name) != before[name]
        assert Fernet(new.encode()).decrypt(stored(name).encode())  # opens with the new key alone
    settings.FEDPORTAL_ENCRYPTION_KEYS = [new]  # the old key retired
    assert Cluster.objects.get(name="a").get_credentials() == {"token": "token-a"}
    assert Cluster.objects.get(name="b").get_credentials() == {"token": "token-b"}
    assert Cluster.objects.get(name="a").credential_version == 1
    event = AuditEvent.objects.get(action="cluster.rotate_encryption_key")
    fingerprint = crypto.first_key_fingerprint()
    assert event.summary == f"Re-encrypted the credentials of 2 cluster(s) under the key {fingerprint}"
    assert event.after == {"clusters": 2, "key_fingerprint": fingerprint} and event.actor_name == "system"
    assert new not in str(event.after) and verify_chain().ok


def test_credentials_no_key_opens_stop_the_rotation_and_nothing_changes(settings):
    lost = Fernet.generate_key().decode()
    settings.FEDPORTAL_ENCRYPTION_KEYS = [lost]
    ClusterFactory(name="orphan", token="t")
    kept = Fernet.generate_key().decode()
    settings.FEDPORTAL_ENCRYPTION_KEYS = [kept]
    ClusterFactory(name="fine", token="t")
    before = {name: stored(name) for name in ("orphan", "fine")}
    with pytest.raises(
        CommandError,
        match="No configured FEDPORTAL_ENCRYPTION_KEY opens the credentials of orphan; nothing was re-encrypted",
    ):
        call_command("rotate_encryption_key", stdout=io.StringIO())
    assert {name: stored(name) for name in ("orphan", "fine")} == before
    assert not AuditEvent.objects.filter(action="cluster.rotate_encryption_key").exists()


def test_the_service_checks_the_role(viewer):
    from django.core.exceptions import PermissionDenied

    from clusters.services.encryption import rotate_encryption_key

    with pytest.raises(PermissionDenied):
        rotate_encryption_key(actor=viewer)
