from django.db import migrations, models

ROLES = ("viewer", "operator", "approver", "admin")


def roles_of_the_records_users(apps, schema_editor):
    """Records kept from before this field get their user's roles as they are now (the replays of
    the next 24 hours are refused once one of them is lost), as fedportal.roles.user_roles reads them."""
    Record = apps.get_model("api", "IdempotencyRecord")
    for record in Record.objects.select_related("user").iterator():
        user = record.user
        names = {g for g in user.groups.values_list("name", flat=True) if g in ROLES}
        if user.is_superuser or "admin" in names:
            names = set(ROLES)
        elif names:
            names.add("viewer")
        Record.objects.filter(pk=record.pk).update(roles=",".join(sorted(names)) if user.is_active else "")


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0001_api_tokens"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.AddField(
            model_name="idempotencyrecord",
            name="roles",
            field=models.CharField(
                blank=True, help_text="The user's roles when the first request ran (comma-separated).", max_length=100
            ),
        ),
        migrations.RunPython(roles_of_the_records_users, migrations.RunPython.noop),
    ]
