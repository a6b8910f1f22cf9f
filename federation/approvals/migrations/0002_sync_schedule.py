"""The periodic safety-net sync of Applying change requests (django-celery-beat), every 60 s."""

import json

from django.db import migrations

TASK_NAME = "approvals: settle applying change requests"


def schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    interval, _ = IntervalSchedule.objects.get_or_create(every=60, period="seconds")
    PeriodicTask.objects.update_or_create(
        name=TASK_NAME,
        defaults={
            "task": "federation.approvals.tasks.sync_running_requests_task",
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
        ("approvals", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(schedule, unschedule)]
