"""Beat entries for the drift app (django-celery-beat; editable in the admin afterwards)."""

from django.db import migrations

from fedportal.beat import schedule_every, unschedule

SNAPSHOT = "drift: daily compliance snapshot"
ENFORCE = "drift: auto-isolate P0 members (when the policy enables it)"


def create_schedules(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    daily, _ = CrontabSchedule.objects.get_or_create(
        minute="5", hour="0", day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
    )
    PeriodicTask.objects.update_or_create(
        name=SNAPSHOT,
        defaults={
            "task": "drift.tasks.take_compliance_snapshot_task",
            "crontab": daily,
            "interval": None,
            "expire_seconds": 6 * 3600,
            "enabled": True,
            "description": "One ComplianceSnapshot row a day for the compliance trend charts.",
        },
    )
    schedule_every(apps, ENFORCE, "drift.tasks.enforce_version_policy_task", 300, expire_seconds=300,
                   description="Does nothing unless the version policy's 'auto-isolate on P0' option is on.")


def remove_schedules(apps, schema_editor):
    unschedule(apps, SNAPSHOT, ENFORCE)


class Migration(migrations.Migration):
    dependencies = [
        ("drift", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedules, remove_schedules)]
