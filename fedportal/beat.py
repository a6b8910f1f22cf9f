"""Beat entries created by data migrations (django-celery-beat; editable in the admin afterwards).

Migrations pass their historical ``apps`` so these helpers work at any point in the history.
"""


def schedule_every(apps, name: str, task: str, seconds: int, *, expire_seconds: int, description: str = "") -> None:
    """Create or update the periodic task ``name`` running ``task`` every ``seconds`` on the default
    queue; a run still waiting after ``expire_seconds`` is stale and skipped."""
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    interval, _ = IntervalSchedule.objects.get_or_create(every=seconds, period="seconds")
    PeriodicTask.objects.update_or_create(
        name=name,
        defaults={
            "task": task,
            "interval": interval,
            "crontab": None,
            "expire_seconds": expire_seconds,
            "enabled": True,
            "description": description,
        },
    )


def unschedule(apps, *names: str) -> None:
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name__in=names).delete()
