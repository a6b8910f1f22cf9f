"""The beat entry that polls the fleet (django-celery-beat; editable in the admin afterwards)."""

from django.conf import settings
from django.db import migrations

TASK_NAME = "clusters: poll fleet health and versions"


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    period = settings.FEDPORTAL_HEALTH_PERIOD_SECONDS
    interval, _ = IntervalSchedule.objects.get_or_create(every=period, period="seconds")
    PeriodicTask.objects.update_or_create(
        name=TASK_NAME,
        defaults={
            "task": "clusters.tasks.poll_fleet_task",
            "interval": interval,
            "expire_seconds": period,  # a fan-out that waited a whole period is stale: skip it
            "enabled": True,
            "description": "Fans out one probe per cluster (queue 'probes'): /readyz, /version, nodes.",
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=TASK_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
