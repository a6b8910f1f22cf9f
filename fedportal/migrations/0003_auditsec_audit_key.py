"""The audit chain becomes keyed (HMAC-SHA256 with FEDPORTAL_AUDIT_KEY) and checkpointed.

Events already stored keep their plain SHA-256 hashes: they are not rehashed (that would bless
whatever they hold now). The head records how many there are (``legacy_length``); verify_audit
checks them the old way, and the first keyed event links onto the last of them, so from then on
they are anchored by a keyed hash. A chain id is given to an existing chain here; a new chain gets
one with its first event. The beat entry writes a signed checkpoint every few minutes.
"""

import secrets

from django.conf import settings
from django.db import migrations, models

from fedportal.beat import schedule_every, unschedule

TASK_NAME = "fedportal: audit checkpoint"


def reanchor_legacy_chain(apps, schema_editor):
    AuditEvent = apps.get_model("fedportal", "AuditEvent")
    AuditChainHead = apps.get_model("fedportal", "AuditChainHead")
    count = AuditEvent.objects.count()
    if count:
        head, _ = AuditChainHead.objects.get_or_create(pk=1)
        head.legacy_length = count
        head.chain_id = head.chain_id or secrets.token_hex(16)
        head.save(update_fields=["legacy_length", "chain_id"])


def create_schedule(apps, schema_editor):
    period = settings.FEDPORTAL_AUDIT_CHECKPOINT_SECONDS
    schedule_every(apps, TASK_NAME, "fedportal.tasks.audit_checkpoint_task", period, expire_seconds=period,
                   description="Appends a signed checkpoint (chain id, length, head hash) to FEDPORTAL_AUDIT_CHECKPOINTS.")


def remove_schedule(apps, schema_editor):
    unschedule(apps, TASK_NAME)


class Migration(migrations.Migration):
    dependencies = [
        ("fedportal", "0002_roles"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditchainhead",
            name="chain_id",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.AddField(
            model_name="auditchainhead",
            name="legacy_length",
            field=models.BigIntegerField(default=0),
        ),
        migrations.RunPython(reanchor_legacy_chain, migrations.RunPython.noop),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
