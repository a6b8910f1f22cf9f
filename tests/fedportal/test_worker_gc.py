"""Celery workers freeze their start-up objects out of the garbage collector's sweeps."""

import gc
import weakref

from celery.signals import worker_process_init, worker_ready

from fedportal.celery import freeze_startup_objects


def _receivers(signal):
    return [receiver() if isinstance(receiver, weakref.ReferenceType) else receiver for _, receiver in signal.receivers]


def test_worker_signals_freeze_what_is_loaded():
    assert freeze_startup_objects in _receivers(worker_ready)  # threads pool: tasks run in this process
    assert freeze_startup_objects in _receivers(worker_process_init)  # prefork children


def test_freezing_moves_live_objects_to_the_permanent_generation():
    keep = [{"n": i} for i in range(1000)]
    try:
        worker_ready.send(sender=None)
        assert gc.get_freeze_count() >= len(keep)
    finally:
        gc.unfreeze()
