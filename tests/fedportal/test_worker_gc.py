"""Celery workers and web workers freeze their start-up objects out of the garbage collector's
sweeps, and collect the young generation less often (fedportal.gc_tuning)."""

import gc
import os
import subprocess
import sys
import weakref
from pathlib import Path

from celery.signals import worker_process_init, worker_ready

from fedportal.gc_tuning import GC_YOUNG_THRESHOLD, freeze_startup_objects


def _receivers(signal):
    return [receiver() if isinstance(receiver, weakref.ReferenceType) else receiver for _, receiver in signal.receivers]


def test_worker_signals_freeze_what_is_loaded():
    assert freeze_startup_objects in _receivers(worker_ready)  # threads pool: tasks run in this process
    assert freeze_startup_objects in _receivers(worker_process_init)  # prefork children


def test_freezing_moves_live_objects_to_the_permanent_generation_and_raises_the_young_threshold():
    keep = [{"n": i} for i in range(1000)]
    thresholds = gc.get_threshold()
    try:
        worker_ready.send(sender=None)
        assert gc.get_freeze_count() >= len(keep)
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *thresholds[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_the_web_application_module_loads_every_view_then_freezes():
    """What gunicorn imports (fedportal.wsgi): in a fresh interpreter, the URLconf's views are loaded
    and frozen, and the young threshold is raised, before any request."""
    probe = (
        "import gc, sys; import fedportal.wsgi; "
        "print(gc.get_freeze_count(), gc.get_threshold()[0], 'drift.views' in sys.modules, len(gc.get_objects()))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "fedportal.settings"}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    frozen, threshold, views_loaded, tracked = int(out[0]), int(out[1]), out[2] == "True", int(out[3])
    assert frozen > 50_000  # Django and the app's modules, not a handful
    assert threshold == GC_YOUNG_THRESHOLD
    assert views_loaded
    assert tracked < frozen / 10  # almost nothing left for a full collection to walk
