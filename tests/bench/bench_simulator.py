"""Fleet simulator benchmark (not part of `make test`).

Starts a generated 1,000-cluster fleet, creates a few dozen objects per cluster, then prints
    {"simulator_1000": {"rss_mb": ..., "version_p50_ms": ..., ...}}
Goals: rss_mb <= 1024 and version_p50_ms <= 10 (a /version round trip through the official
kubernetes client on an idle fleet).

    .venv/bin/python tests/bench/bench_simulator.py [--clusters 1000] [--objects 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedportal.settings")

import urllib3  # noqa: E402
from kubernetes import client  # noqa: E402

from tests.fleet_fixtures import start_fleet  # noqa: E402


def _deployment(i: int) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"web-{i}", "labels": {"app": f"web-{i}", "tier": "bench"}},
        "spec": {
            "replicas": 1 + i % 3,
            "selector": {"matchLabels": {"app": f"web-{i}"}},
            "template": {
                "metadata": {"labels": {"app": f"web-{i}"}},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1.25",
                            "ports": [{"containerPort": 80}],
                            "env": [{"name": "N", "value": str(i)}],
                        }
                    ]
                },
            },
        },
    }


def populate(fleet, names, per_cluster: int) -> int:
    http = urllib3.PoolManager(maxsize=4)
    created = 0
    for name in names:
        base, headers = (
            fleet.url(name),
            {"Authorization": f"Bearer {fleet.token(name)}", "Content-Type": "application/json"},
        )

        def post(path, body):
            resp = http.request("POST", base + path, body=json.dumps(body).encode(), headers=headers)
            assert resp.status in (200, 201), resp.data[:300]

        post("/api/v1/namespaces", {"metadata": {"name": "bench"}})
        created += 1
        for i in range(per_cluster - 1):
            kind = i % 3
            if kind == 0:
                post("/apis/apps/v1/namespaces/bench/deployments", _deployment(i))
            elif kind == 1:
                post(
                    "/api/v1/namespaces/bench/configmaps",
                    {"metadata": {"name": f"cfg-{i}"}, "data": {"k": "v" * 64, "i": str(i)}},
                )
            else:
                post(
                    "/api/v1/namespaces/bench/services",
                    {
                        "metadata": {"name": f"svc-{i}"},
                        "spec": {"selector": {"app": f"web-{i}"}, "ports": [{"port": 80}]},
                    },
                )
            created += 1
    return created


def version_p50(fleet, names, samples: int) -> float:
    clients = []
    for name in names[:: max(1, len(names) // 20)][:20]:
        config = client.Configuration(host=fleet.url(name))
        config.api_key = {"authorization": f"Bearer {fleet.token(name)}"}
        clients.append(client.VersionApi(client.ApiClient(config)))
    for api in clients:  # warm the connections
        api.get_code()
    timings = []
    for i in range(samples):
        api = clients[i % len(clients)]
        started = time.perf_counter()
        api.get_code(_request_timeout=5)
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


def schema_checks_seconds(clusters: int = 1000, manifests: int = 200) -> float:
    """clusters.schemas.validate_manifest for `manifests` manifests against `clusters` clusters
    spread over v1.25-v1.33 (the drift app's compatibility sweep)."""
    from clusters import schemas
    from tests.simulator.conftest import deployment

    docs = [
        deployment(f"d{i}", replicas=i % 5, init_restart_policy="Always" if i % 4 == 0 else None)
        for i in range(manifests)
    ]
    started = time.perf_counter()
    for cluster in range(clusters):
        minor = 25 + cluster % 9
        for doc in docs:
            schemas.validate_manifest(doc, minor)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--objects", type=int, default=30, help="objects created per cluster")
    parser.add_argument("--samples", type=int, default=500)
    args = parser.parse_args()
    started = time.monotonic()
    fleet = start_fleet({"generate": args.clusters, "versions": "1.25-1.33"}, timeout=300)
    try:
        boot_s = time.monotonic() - started
        names = fleet.names
        t = time.monotonic()
        created = populate(fleet, names, args.objects)
        populate_s = time.monotonic() - t
        time.sleep(1)
        p50 = version_p50(fleet, names, args.samples)
        stats = fleet.stats()
    finally:
        fleet.stop()
    checks_s = schema_checks_seconds()
    print(
        json.dumps(
            {
                f"simulator_{args.clusters}": {
                    "rss_mb": round(stats["rssMb"], 1),
                    "version_p50_ms": round(p50, 2),
                    "schema_checks_1000x200_s": round(checks_s, 2),
                    "objects": stats["objects"],
                    "created": created,
                    "boot_s": round(boot_s, 1),
                    "populate_s": round(populate_s, 1),
                }
            }
        )
    )
    return 0 if stats["rssMb"] <= 1024 and p50 <= 10 else 1  # the goals above


if __name__ == "__main__":
    sys.exit(main())
