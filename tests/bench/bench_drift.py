"""Benchmark drift_1000x200: drift found by the fleet watcher, and the LIST-based safety-net sweep.

    .venv/bin/python tests/bench/bench_drift.py [--clusters 1000] [--resources 200] [--edits 100] [--threads 16]

Set-up: a throwaway database (tests/bench/harness.py), a generated simulator fleet, ``--resources``
federated ConfigMaps (namespace default) on every cluster. The objects are put on the clusters by a
bare thread pool of server-side applies of the manifests FedPortal renders, and their
PropagatedVersions are written in bulk as the worker records them (OK, in sync, the applied
manifest, the live resourceVersion and uid): propagating 200 resources to 1,000 clusters through
the worker would take the whole benchmark budget, and propagate_1000 measures that path already.
Then one ``manage.py watch_fleet`` process is started and the scenario waits until every watch is
connected.

* ``detect_p50_ms`` / ``detect_p95_ms``: ``--edits`` out-of-band edits (the simulator's admin edit,
  as ``fleetctl edit``) of random objects on random clusters, one every 50 ms; each is timed from the
  edit to its PropagatedVersion's ``drift_detected_at``. Goal p95 <= 5,000 ms.
* ``watcher_rss_mb`` (the watcher process's resident memory once every watch is open) <= 512;
  ``idle_cpu_percent``: the watcher's CPU over 30 s with no change, percent of one core, <= 5.
* ``sweep_seconds``: the safety-net sweep over the whole fleet (``detect_drift()``: one labelled LIST
  per cluster and type on ``--threads`` threads, each object judged); ``sweep_baseline_seconds``: a
  bare thread pool doing the same LIST calls with the kubernetes client at the same concurrency;
  ``sweep_ratio``, goal <= 1.5. Both start with open connections (one untimed version request per
  cluster each, as a worker's sweep finds its clients warm from the fleet polls).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.harness import (  # noqa: E402
    ROOT,
    BenchEnv,
    cpu_seconds,
    fleet_versions,
    register_clusters,
    wait_until,
)
from tests.fleet_fixtures import start_fleet  # noqa: E402

NAMESPACE = "default"


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def seed(fleet, names: list[str], resources: int, threads: int) -> None:
    """Federated ConfigMaps on every cluster and their PropagatedVersions, as the worker leaves them."""
    from kubernetes import client

    from clusters.models import Cluster
    from federation import services
    from federation.choices import PropagationReason, SyncState
    from federation.models import FederatedResource, PropagatedVersion
    from federation.propagation.common import live_identity, object_version, render_args
    from federation.rendering import render_manifest
    from tests.federation.factories import ftype

    cm = ftype("ConfigMap")
    made = [
        services.create_resource(
            cm,
            namespace=NAMESPACE,
            name=f"cfg-{i:03d}",
            template={"data": {"key": f"value-{i}"}},
            placement={"clusterSelector": {}},
        )
        for i in range(resources)
    ]
    made = list(FederatedResource.objects.filter(pk__in=[r.pk for r in made]).select_related("current_revision"))
    clusters = list(Cluster.objects.filter(name__in=names).order_by("pk"))
    apis = {}
    for c in clusters:
        config = client.Configuration(host=fleet.url(c.name))
        config.api_key = {"authorization": f"Bearer {fleet.token(c.name)}"}
        config.retries = False
        apis[c.pk] = client.ApiClient(config)

    def apply(pair):
        resource, cluster = pair
        manifest = render_manifest(**render_args(resource, resource.current_revision, cluster, live=None))
        resp = apis[cluster.pk].call_api(
            f"/api/v1/namespaces/{NAMESPACE}/configmaps/{resource.name}",
            "PATCH",
            query_params=[("fieldManager", "fedportal"), ("fieldValidation", "Strict"), ("force", "true")],
            header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
            body=manifest,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=(30, 30),
        )
        return resource, cluster, manifest, json.loads(resp.data)

    rows = []
    with ThreadPoolExecutor(threads) as pool:
        for resource, cluster, manifest, obj in pool.map(apply, [(r, c) for c in clusters for r in made]):
            rows.append(
                PropagatedVersion(
                    resource=resource,
                    cluster=cluster,
                    revision=resource.current_revision,
                    status=PropagationReason.OK,
                    applied_manifest=manifest,
                    version=object_version(obj),
                    sync_state=SyncState.IN_SYNC,
                    **live_identity(obj),
                )
            )
    PropagatedVersion.objects.bulk_create(rows, batch_size=2000)
    for api in apis.values():
        api.close()


def start_watcher(env: dict) -> subprocess.Popen:
    log = open(Path(env["FEDPORTAL_VAR_DIR"]) / "watcher.log", "w")
    return subprocess.Popen(
        [sys.executable, "manage.py", "watch_fleet", "--name", "bench"],
        cwd=ROOT,
        env={**env, "FEDERATION_WATCH_LEASE_SECONDS": "15"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def detect(fleet, names: list[str], resources: int, edits: int) -> list[float]:
    from federation.models import PropagatedVersion

    rng = random.Random(19)
    made = []
    for i in range(edits):
        cluster, name = rng.choice(names), f"cfg-{rng.randrange(resources):03d}"
        if (cluster, name) in {(c, n) for c, n, _ in made}:
            continue
        fleet.external_edit(cluster, "v1", "ConfigMap", NAMESPACE, name, {"data": {"key": f"edited-{i}"}})
        made.append((cluster, name, time.time()))
        time.sleep(0.05)

    def detected():
        found = {}
        for cluster, name, at in PropagatedVersion.objects.filter(drift_detected_at__isnull=False).values_list(
            "cluster__name", "resource__name", "drift_detected_at"
        ):
            found[(cluster, name)] = at.timestamp()
        return found if all((c, n) in found for c, n, _ in made) else None

    found = wait_until(detected, timeout=120, message="every edit detected")
    return [max(0.0, (found[(c, n)] - at) * 1000) for c, n, at in made]


def warm_connections(threads: int) -> None:
    """One version request per cluster through FedPortal's cached clients, untimed, as the baseline
    warms its own: both loops then start with open connections (a worker's sweep finds its clients
    warm from the polls)."""
    from clusters import kube
    from clusters.models import Cluster
    from clusters.services import connection_for

    connections = [connection_for(cluster) for cluster in Cluster.objects.all()]
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda conn: kube.get_version(conn, timeout=10), connections))


def sweep_baseline(fleet, names: list[str], threads: int) -> float:
    from kubernetes import client

    apis = []
    for name in names:
        config = client.Configuration(host=fleet.url(name))
        config.api_key = {"authorization": f"Bearer {fleet.token(name)}"}
        config.retries = False
        apis.append(client.ApiClient(config))

    def list_all(api):
        items, token = 0, ""
        while True:
            query = [("limit", "500"), ("labelSelector", "fedportal.io/managed=true")]
            if token:
                query.append(("continue", token))
            data = json.loads(
                api.call_api(
                    "/api/v1/configmaps",
                    "GET",
                    query_params=query,
                    header_params={"Accept": "application/json"},
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _return_http_data_only=True,
                    _request_timeout=(30, 30),
                ).data
            )
            items += len(data.get("items") or [])
            token = (data.get("metadata") or {}).get("continue") or ""
            if not token:
                return items

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda api: client.VersionApi(api).get_code(_request_timeout=(10, 10)), apis))
        started = time.perf_counter()
        list(pool.map(list_all, apis))
        seconds = time.perf_counter() - started
    for api in apis:
        api.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--resources", type=int, default=200)
    parser.add_argument("--edits", type=int, default=100)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    args = parser.parse_args()
    env = BenchEnv("drift")
    env.env["FEDERATION_THREADS"] = str(args.threads)
    env.setup()
    fleet = start_fleet({"generate": args.clusters, "versions": "1.27-1.33"}, timeout=300)
    watcher = None
    try:
        names = fleet.names
        register_clusters(fleet, names, versions=fleet_versions(fleet))
        started = time.monotonic()
        seed(fleet, names, args.resources, args.threads)
        seed_seconds = time.monotonic() - started
        from federation.models import ClusterWatch

        watcher = start_watcher(env.env)
        started = time.monotonic()
        wait_until(
            lambda: ClusterWatch.objects.filter(connected=True).count() == len(names),
            timeout=600,
            interval=0.5,
            message="every watch connected",
        )
        connect_seconds = time.monotonic() - started
        time.sleep(3)
        rss = rss_mb(watcher.pid)
        before = cpu_seconds(watcher.pid)
        time.sleep(args.idle_seconds)
        idle_cpu = (cpu_seconds(watcher.pid) - before) / args.idle_seconds * 100
        latencies = sorted(detect(fleet, names, args.resources, args.edits))
        from federation import propagation

        warm_connections(args.threads)
        started = time.perf_counter()
        summary = propagation.detect_drift()
        sweep = time.perf_counter() - started
        baseline = sweep_baseline(fleet, names, args.threads)
        result = {
            "drift_1000x200": {
                "clusters": len(names),
                "resources": args.resources,
                "objects": len(names) * args.resources,
                "edits": len(latencies),
                "detect_p50_ms": round(statistics.median(latencies), 1),
                "detect_p95_ms": round(latencies[max(0, int(len(latencies) * 0.95 + 0.5) - 1)], 1),
                "detect_max_ms": round(latencies[-1], 1),
                "watcher_rss_mb": round(rss, 1),
                "idle_cpu_percent": round(idle_cpu, 2),
                "watch_connect_seconds": round(connect_seconds, 1),
                "sweep_seconds": round(sweep, 2),
                "sweep_baseline_seconds": round(baseline, 2),
                "sweep_ratio": round(sweep / baseline, 2) if baseline else None,
                "sweep_checked": summary.checked,
                "sweep_errors": summary.errors,
                "seed_seconds": round(seed_seconds, 1),
                "threads": args.threads,
                "database": env.database,
            }
        }
        print(json.dumps(result), flush=True)
        figures = result["drift_1000x200"]
        ok = (
            figures["detect_p95_ms"] <= 5000
            and figures["watcher_rss_mb"] <= 512
            and figures["idle_cpu_percent"] <= 5
            and (figures["sweep_ratio"] or 0) <= 1.5
        )
        sys.exit(0 if ok else 1)
    finally:
        if watcher is not None:
            watcher.terminate()
            try:
                watcher.wait(timeout=15)
            except subprocess.TimeoutExpired:
                watcher.kill()
        fleet.stop()
        env.teardown()


if __name__ == "__main__":
    main()
