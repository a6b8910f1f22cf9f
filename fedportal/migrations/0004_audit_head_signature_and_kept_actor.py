"""The audit chain's head row is signed, and an event keeps its actor's id when the user is deleted.

* ``AuditChainHead.mac``: an HMAC (FEDPORTAL_AUDIT_KEY) of the head's chain id, length, last hash
  and legacy length, so none of them can be fixed up without the key (a new chain id disowned every
  checkpoint; a legacy length covering the whole chain let plain SHA-256 vouch for rewritten
  events). An existing head is signed here only when it agrees with the last stored event (its
  hash and the number of events); otherwise it stays unsigned and verify_audit reports it.
* ``AuditEvent.actor``: the id is hashed, so deleting a user must not rewrite it (SET_NULL broke the
  chain from that event on): no database constraint, nothing done on delete.

The signature is computed as fedportal.audit.head_mac does today (a migration does not follow
later code).
"""

import hmac

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def sign_existing_head(apps, schema_editor):
    AuditEvent = apps.get_model("fedportal", "AuditEvent")
    AuditChainHead = apps.get_model("fedportal", "AuditChainHead")
    head = AuditChainHead.objects.filter(pk=1).first()
    if head is None or not head.length:
        return
    last = AuditEvent.objects.order_by("-id").values_list("hash", flat=True).first()
    if last != head.last_hash or AuditEvent.objects.count() != head.length:
        return
    message = f"fedportal-audit-head\x00{head.chain_id}\x00{head.length}\x00{head.last_hash}\x00{head.legacy_length}"
    head.mac = hmac.digest(settings.FEDPORTAL_AUDIT_KEY.encode(), message.encode(), "sha256").hex()
    head.save(update_fields=["mac"])


class Migration(migrations.Migration):
    dependencies = [
        ("fedportal", "0003_auditsec_audit_key"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="auditchainhead",
            name="mac",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="actor",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RunPython(sign_existing_head, migrations.RunPython.noop),
    ]
