"""FederatedResource.approved_retention: what removals outside a change request act on, set when a
change request is applied. A resource already on the clusters acts on the retention its last applied
change request held (as 0010 does for the drift policy)."""

import importlib

from django.db import migrations, models


def approved_retentions(apps, schema_editor):
    """A propagated resource acts on the retention it had when a change request of it was last
    applied: its current one, unless the retention was changed since (then what it was changed from)."""
    importlib.import_module("federation.migrations.0010_approved_drift_policy").adopt_last_approved(
        apps, "retention", fallback="Orphan"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("federation", "0010_approved_drift_policy"),
    ]

    operations = [
        migrations.AddField(
            model_name="federatedresource",
            name="approved_retention",
            field=models.CharField(
                blank=True,
                choices=[("Delete", "Delete"), ("Orphan", "Orphan")],
                default="",
                help_text="The retention of the last applied change request, which is what removals outside a "
                "change request (a relabelled cluster leaving a placement) act on (empty: none applied yet, so "
                "they orphan).",
                max_length=16,
            ),
        ),
        migrations.RunPython(approved_retentions, migrations.RunPython.noop),
    ]
