"""FederatedResource.approved_drift_policy: what drift checks act on, set when a change request is
applied. Resources already on the clusters keep acting as they did: their current policy."""

from django.db import migrations, models
from django.db.models import F


def keep_current_behaviour(apps, schema_editor):
    resources = apps.get_model("federation", "FederatedResource")
    resources.objects.filter(propagated_revision__isnull=False).update(approved_drift_policy=F("drift_policy"))


class Migration(migrations.Migration):
    dependencies = [
        ("federation", "0009_watch_fleet_watchers"),
    ]

    operations = [
        migrations.AddField(
            model_name="federatedresource",
            name="approved_drift_policy",
            field=models.CharField(
                blank=True,
                choices=[("Report", "Report"), ("Enforce", "Enforce")],
                default="",
                help_text="The drift policy of the last applied change request, which is what drift checks act on "
                "(empty: none applied yet, so drift is reported, never repaired).",
                max_length=16,
            ),
        ),
        migrations.RunPython(keep_current_behaviour, migrations.RunPython.noop),
    ]
