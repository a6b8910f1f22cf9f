"""Metrics observed in the process that does the work (a probe's latency exists only while it runs).

Everything else /metrics shows is computed from the database at scrape time (api/metrics.py), so it
is the same whichever web process answers. These few are histograms kept in process memory; with
``PROMETHEUS_MULTIPROC_DIR`` set (one directory per host, shared by its gunicorn and Celery worker
processes, emptied at start) prometheus-client's multiprocess mode writes them to files there and
/metrics merges every process's values."""

from prometheus_client import Histogram

# Probe round trips (/version, plus /readyz and nodes when the inventory is due), as the health
# check's 3 s timeout bounds them.
PROBE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

PROBE_LATENCY = Histogram(
    "fedportal_probe_latency_seconds",
    "Time one cluster probe took, by whether the API server answered.",
    ["reachable"],
    buckets=PROBE_BUCKETS,
    registry=None,  # collected by api/metrics.py, not by the global registry
)


def observe_probe(seconds: float, *, reachable: bool) -> None:
    PROBE_LATENCY.labels(reachable="true" if reachable else "false").observe(seconds)
