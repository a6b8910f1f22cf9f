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


# Collect the youngest generation every 20,000 net allocations instead of 700: a chunk of propagation
# makes thousands of short-lived dicts (manifests, responses, rows), and the frequent young collections
# cost about a tenth of a worker's CPU in the 1,000-cluster benchmark. Garbage without cycles is freed
# at once whatever the threshold; cyclic garbage waits a little longer.
GC_YOUNG_THRESHOLD = 20_000


def freeze_startup_objects(**_) -> None:
    """Keep what a worker loaded at start-up out of the garbage collector's sweeps (``gc.freeze``),
    and collect the young generation less often (GC_YOUNG_THRESHOLD).

    Django, the kubernetes client's models and the app's modules are ~190,000 container objects that
    live as long as the process, yet every full collection walked them all again. Called when the
    worker is ready (the threads pool runs tasks in that process) and in each prefork child."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


worker_ready.connect(freeze_startup_objects, weak=False)
worker_process_init.connect(freeze_startup_objects, weak=False)
