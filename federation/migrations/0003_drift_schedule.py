"""The periodic resource-drift check (django-celery-beat), every 60 seconds, expiring if late."""

import json

from django.db import migrations

TASK_NAME = "federation: detect resource drift"


def schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    interval, _ = IntervalSchedule.objects.get_or_create(every=60, period="seconds")
    PeriodicTask.objects.update_or_create(
        name=TASK_NAME,
        defaults={
            "task": "federation.tasks.detect_drift_task",
            "interval": interval,
            "kwargs": json.dumps({}),
            "expires": None,
            "expire_seconds": 55,
            "enabled": True,
            "queue": "default",
        },
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=TASK_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("federation", "0002_seed_types"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(schedule, unschedule)]
