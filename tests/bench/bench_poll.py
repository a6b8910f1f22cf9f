"""Benchmark poll_1000: poll 1,000 simulated clusters end to end through real Celery workers.

    .venv/bin/python tests/bench/bench_poll.py [--clusters 1000] [--workers 2] [--threads 8]

1. A throwaway database and broker (tests/bench/harness.py: PostgreSQL/Redis when DATABASE_URL /
   CELERY_BROKER_URL are set, else SQLite + the filesystem broker under var/bench/poll/).
2. A generated 1,000-cluster simulator fleet; 1,000 Cluster rows (Ready).
3. ``--workers`` real ``celery worker`` processes, each a thread pool of ``--threads``; the fleet
   poll fans out one task per ``--batch`` clusters (default: FEDPORTAL_PROBE_BATCH_SIZE), each
   probing with ``--probe-threads`` threads.
4. One warm-up poll (connections and ApiClients built, every cluster's inventory read, as in steady
   state: beat polls every 10 s), then the measured polls: ``poll_fleet_task`` enqueued -> probes ->
   every Cluster row has a ``last_probe_at`` after the request (state, version written). These are
   the polls a fleet sees between inventory refreshes: one /version call per cluster.

   Also ``inventory_seconds`` / ``inventory_ratio``: a poll with every cluster's inventory due
   (/version, /readyz and the node list, VersionSamples written), as happens for a cluster at
   least every FEDPORTAL_INVENTORY_REFRESH_SECONDS (60 s: one poll in six at the default period).
5. Baseline, same run, same concurrency (workers x threads x probe threads): a bare thread pool calling the
   kubernetes client's ``VersionApi.get_code()`` once per cluster (warm clients too).

   Also ``same_calls_baseline_seconds``: the bare loop making the three calls of an inventory poll
   (/readyz, /version, the node list), so ``inventory_same_calls_ratio`` is FedPortal's own overhead.

Prints {"poll_1000": {"seconds", "baseline_seconds", "ratio", ...}}. Goals: ratio <= 1.5, seconds <= 20.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.harness import BenchEnv, fleet_versions, register_clusters, start_worker, wait_until  # noqa: E402
from tests.fleet_fixtures import start_fleet  # noqa: E402


def poll_once(total: int, timeout: float, *, inventory: bool = False) -> float:
    from django.utils import timezone

    from clusters.models import Cluster
    from clusters.tasks import poll_fleet_task

    if inventory:  # every cluster's inventory due, as on a first poll
        Cluster.objects.update(inventory_at=None)
    requested = timezone.now()
    started = time.perf_counter()
    poll_fleet_task.apply_async((requested.isoformat(),))
    wait_until(
        lambda: Cluster.objects.filter(last_probe_at__gte=requested).count() >= total,
        timeout=timeout,
        interval=0.05,
        message="every cluster probed",
    )
    return time.perf_counter() - started


def baseline(fleet, names, concurrency: int, *, same_calls: bool = False) -> float:
    from kubernetes import client

    apis = []
    for name in names:
        config = client.Configuration(host=fleet.url(name))
        config.api_key = {"authorization": f"Bearer {fleet.token(name)}"}
        config.retries = False
        apis.append(client.VersionApi(client.ApiClient(config)))

    def call(api):
        if same_calls:  # what one probe asks: readiness, version, nodes
            core = client.CoreV1Api(api.api_client)
            # read, as a probe reads it (an unread response does not give its connection back)
            api.api_client.call_api(
                "/readyz",
                "GET",
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=(10, 10),
            ).read()
            core.list_node(limit=500, _request_timeout=(10, 10))
        return api.get_code(_request_timeout=(10, 10)).git_version

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(call, apis))  # warm: connections open, as the workers' are
        started = time.perf_counter()
        versions = list(pool.map(call, apis))
        seconds = time.perf_counter() - started
    assert all(versions)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="Celery threads per worker (probe batches at once)")
    parser.add_argument("--probe-threads", type=int, default=8, help="probe threads inside one batch task")
    parser.add_argument("--batch", type=int, default=None, help="clusters per probe task (default: the setting's)")
    parser.add_argument("--rounds", type=int, default=5, help="measured polls of each kind (the median is reported)")
    args = parser.parse_args()
    env = BenchEnv("poll")
    env.setup()
    fleet = start_fleet({"generate": args.clusters, "versions": "1.25-1.33"}, timeout=300)
    workers = []
    try:
        from clusters.models import Cluster, VersionSample

        names = fleet.names
        register_clusters(fleet, names, versions=fleet_versions(fleet))
        from django.conf import settings

        batch = args.batch or settings.FEDPORTAL_PROBE_BATCH_SIZE
        tuning = {"FEDPORTAL_PROBE_THREADS": str(args.probe_threads), "FEDPORTAL_PROBE_BATCH_SIZE": str(batch)}
        workers = [
            start_worker(env.env, f"poll{i}", concurrency=args.threads, extra_env=tuning) for i in range(args.workers)
        ]
        warm = poll_once(len(names), timeout=600)
        rounds = [poll_once(len(names), timeout=600) for _ in range(args.rounds)]
        seconds = sorted(rounds)[len(rounds) // 2]
        inventory_rounds = [poll_once(len(names), timeout=600, inventory=True) for _ in range(args.rounds)]
        inventory_seconds = sorted(inventory_rounds)[len(inventory_rounds) // 2]
        concurrency = args.workers * args.threads * args.probe_threads
        base = baseline(fleet, names, concurrency)
        base_same = baseline(fleet, names, concurrency, same_calls=True)
        samples = VersionSample.objects.count()
        ready = Cluster.objects.filter(state="Ready").count()
    finally:
        for worker in workers:
            worker.stop()
        fleet.stop()
        env.teardown()
    result = {
        "seconds": round(seconds, 2),
        "baseline_seconds": round(base, 2),
        "ratio": round(seconds / base, 2),
        "same_calls_baseline_seconds": round(base_same, 2),
        "inventory_seconds": round(inventory_seconds, 2),
        "inventory_ratio": round(inventory_seconds / base, 2),
        "inventory_same_calls_ratio": round(inventory_seconds / base_same, 2),
        "warmup_seconds": round(warm, 2),
        "rounds": [round(r, 2) for r in rounds],
        "inventory_rounds": [round(r, 2) for r in inventory_rounds],
        "clusters": len(names),
        "ready": ready,
        "version_samples": samples,
        "workers": args.workers,
        "threads_per_worker": args.threads,
        "probe_threads": args.probe_threads,
        "batch": batch,
        "concurrency": concurrency,
        "database": env.database,
        "broker": env.broker,
    }
    print(json.dumps({f"poll_{args.clusters}": result}))
    return 0 if result["ratio"] <= 1.5 and result["seconds"] <= 20 else 1  # the goals above


if __name__ == "__main__":
    sys.exit(main())
