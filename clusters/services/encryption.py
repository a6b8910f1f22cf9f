"""Re-encrypting every stored credential under the first FEDPORTAL_ENCRYPTION_KEY (key rotation)."""

from __future__ import annotations

from django.db import transaction

from clusters import crypto
from clusters.models import Cluster
from fedportal.audit import record_event
from fedportal.roles import Role, require_actor_role


def rotate_encryption_key(*, actor=None) -> int:
    """Re-encrypt every cluster's credentials under the first key; returns how many. All or nothing:
    if any cluster's credentials open with none of the keys, CredentialDecryptError names them and
    nothing changes. Audited. The plaintexts (and so credential_version) stay the same."""
    require_actor_role(actor, Role.ADMIN)
    with transaction.atomic():
        clusters = list(
            Cluster.objects.select_for_update()
            .exclude(credentials_encrypted="")
            .order_by("name")
            .only("id", "name", "credentials_encrypted")
        )
        rotated, unreadable = {}, []
        for cluster in clusters:
            try:
                rotated[cluster.pk] = crypto.reencrypt(cluster.credentials_encrypted)
            except crypto.CredentialDecryptError:
                unreadable.append(cluster.name)
        if unreadable:
            raise crypto.CredentialDecryptError(
                f"No configured FEDPORTAL_ENCRYPTION_KEY opens the credentials of {', '.join(unreadable)}; "
                "nothing was re-encrypted. Put the old key back (after the new one) and run this again."
            )
        for pk, token in rotated.items():
            Cluster.objects.filter(pk=pk).update(credentials_encrypted=token)
        fingerprint = crypto.first_key_fingerprint()
        record_event(
            "cluster.rotate_encryption_key",
            actor=actor,
            object_type="clusters.cluster",
            summary=f"Re-encrypted the credentials of {len(rotated)} cluster(s) under the key {fingerprint}",
            after={"clusters": len(rotated), "key_fingerprint": fingerprint},
        )
    return len(rotated)
