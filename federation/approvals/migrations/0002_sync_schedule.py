"""The periodic safety-net sync of Applying change requests (django-celery-beat), every 60 s."""

from django.db import migrations

from fedportal.beat import schedule_every, unschedule

TASK_NAME = "approvals: settle applying change requests"


def schedule(apps, schema_editor):
    schedule_every(apps, TASK_NAME, "federation.approvals.tasks.sync_running_requests_task", 60, expire_seconds=55,
                   description="Settles Applying change requests whose own sync task was lost.")


def unschedule_task(apps, schema_editor):
    unschedule(apps, TASK_NAME)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(schedule, unschedule_task)]
