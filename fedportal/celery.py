"""The Celery application. Configuration comes from Django settings (CELERY_* names)."""

import gc
import os

from celery import Celery
from celery.signals import worker_process_init, worker_ready
from kombu.transport import TRANSPORT_ALIASES

# The embedded broker writes its message files atomically (see fedportal/broker.py).
TRANSPORT_ALIASES["filesystem"] = "fedportal.broker:Transport"

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedportal.settings")

app = Celery("fedportal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def freeze_startup_objects(**_) -> None:
    """Keep what a worker loaded at start-up out of the garbage collector's sweeps (``gc.freeze``).

    Django, the kubernetes client's models and the app's modules are ~190,000 container objects that
    live as long as the process, yet every full collection walked them all again. Called when the
    worker is ready (the threads pool runs tasks in that process) and in each prefork child."""
    gc.collect()
    gc.freeze()


worker_ready.connect(freeze_startup_objects, weak=False)
worker_process_init.connect(freeze_startup_objects, weak=False)
