"""The periodic resource-drift check (django-celery-beat), every 60 seconds, expiring if late."""

from django.db import migrations

from fedportal.beat import schedule_every, unschedule

TASK_NAME = "federation: detect resource drift"


def schedule(apps, schema_editor):
    schedule_every(apps, TASK_NAME, "federation.tasks.detect_drift_task", 60, expire_seconds=55,
                   description="Compares live objects with what FedPortal applied; Enforce re-applies.")


def unschedule_task(apps, schema_editor):
    unschedule(apps, TASK_NAME)


class Migration(migrations.Migration):
    dependencies = [
        ("federation", "0002_seed_types"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(schedule, unschedule_task)]
