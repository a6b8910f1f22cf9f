"""The beat entry that polls the fleet (django-celery-beat; editable in the admin afterwards)."""

from django.conf import settings
from django.db import migrations

from fedportal.beat import schedule_every, unschedule

TASK_NAME = "clusters: poll fleet health and versions"


def create_schedule(apps, schema_editor):
    period = settings.FEDPORTAL_HEALTH_PERIOD_SECONDS
    # a fan-out that waited a whole period is stale: skip it
    schedule_every(apps, TASK_NAME, "clusters.tasks.poll_fleet_task", period, expire_seconds=period,
                   description="Fans out one probe per cluster (queue 'probes'): /readyz, /version, nodes.")


def remove_schedule(apps, schema_editor):
    unschedule(apps, TASK_NAME)


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
