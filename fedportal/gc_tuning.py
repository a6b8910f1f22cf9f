"""Garbage-collector settings for long-running FedPortal processes (Celery workers, web workers).

Django, the kubernetes client's models and the app's modules are ~190,000 container objects that
live as long as the process, yet every full collection walked them all again: in a web worker one
such collection during a cold compliance report (1,000 clusters x 200 resources) cost about 250 ms,
half the page's budget. ``freeze_startup_objects`` moves what is loaded at start-up into the
permanent generation (``gc.freeze``), and collects the young generation every GC_YOUNG_THRESHOLD net
allocations instead of 700: a chunk of propagation or a fleet-wide page makes thousands of
short-lived dicts, and the frequent young collections cost about a tenth of a worker's CPU. Garbage
without cycles is freed at once whatever the threshold; cyclic garbage waits a little longer."""

import gc

GC_YOUNG_THRESHOLD = 20_000


def freeze_startup_objects(**_) -> None:
    """Collect once, freeze what survives, raise the young generation's threshold. Takes (and
    ignores) keyword arguments so it can be connected to Celery's signals."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def prepare_web_process() -> None:
    """What a web worker does once its application is loaded: import every view (the URLconf is
    otherwise imported by the first request), then freeze what is loaded."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - imports the URLconf and, through it, every view
    freeze_startup_objects()
