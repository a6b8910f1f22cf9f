"""FederatedResource.approved_drift_policy: what drift checks act on, set when a change request is
applied. A resource already on the clusters acts on the policy its last applied change request held."""

from django.db import migrations, models


STAGED_KINDS = ("create", "edit", "rollback")


def approved_policies(apps, schema_editor):
    """A propagated resource acts on the drift policy it had when a change request of it was last
    applied: its current one, unless the policy was changed since (then what it was changed from)."""
    adopt_last_approved(apps, "drift_policy", fallback="Report")


def adopt_last_approved(apps, setting: str, *, fallback: str) -> None:
    """Each propagated resource's ``approved_<setting>``: the ``setting`` it had when a change request
    of it was last applied, i.e. its current one unless changed since (then what it was changed
    from; ``fallback`` when that is not recorded). Migration 0011 does the same for retention."""
    resources = apps.get_model("federation", "FederatedResource")
    changes = apps.get_model("federation", "SettingsChange")
    requests = apps.get_model("approvals", "ChangeRequest")
    for resource in resources.objects.filter(propagated_revision__isnull=False).only("pk", setting):
        applied_at = (
            requests.objects.filter(resource_id=resource.pk, kind__in=STAGED_KINDS, applied_at__isnull=False)
            .order_by("-applied_at")
            .values_list("applied_at", flat=True)
            .first()
        )
        later = changes.objects.filter(resource_id=resource.pk).order_by("created_at", "id")
        if applied_at is not None:
            later = later.filter(created_at__gt=applied_at)
        value = getattr(resource, setting)
        for before, after in later.values_list("before", "after"):
            if setting in (after or {}) and (before or {}).get(setting) != after[setting]:
                value = (before or {}).get(setting) or fallback  # the first change since: what it was
                break
        resources.objects.filter(pk=resource.pk).update(**{f"approved_{setting}": value})


class Migration(migrations.Migration):
    dependencies = [
        ("federation", "0009_watch_fleet_watchers"),
        ("approvals", "0006_rollout_waves"),
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
        migrations.RunPython(approved_policies, migrations.RunPython.noop),
    ]
