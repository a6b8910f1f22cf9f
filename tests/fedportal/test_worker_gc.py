"""Celery workers freeze their start-up objects out of the garbage collector's sweeps, and collect
the young generation less often."""

import gc
import weakref

from celery.signals import worker_process_init, worker_ready

from fedportal.celery import GC_YOUNG_THRESHOLD, freeze_startup_objects


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
