"""Benchmark pages: the fleet-wide pages with 1,000 clusters x 200 federated resources.

    .venv/bin/python tests/bench/bench_pages.py [--clusters 1000] [--resources 200] [--seconds 30]

1. A throwaway database (tests/bench/harness.py; PostgreSQL when DATABASE_URL is set), production
   profile (DEBUG=0, static files collected, SECURE_SSL_REDIRECT=0).
2. 1,000 clusters (versions 1.25-1.33, kubelets, mixed states, three VersionSamples each), 200
   federated resources (Deployments, ConfigMaps, Services; created through the federation service)
   and their 200,000 PropagatedVersions (bulk insert; a few out of sync).
3. Each page once cold (the cache cleared first), then 5 times warm, in-process through Django's test
   client as a viewer, after the start-up step a gunicorn worker runs (fedportal.wsgi:
   ``prepare_web_process``, every view loaded and frozen out of the garbage collector's sweeps):
   ``<page>_cold_ms`` and ``<page>_cold_cpu_ms`` (wall and CPU time of the cold request; goal
   <= 500 ms), ``<page>_queries`` (queries of a warm request) and ``<page>_ms`` (median warm
   time); a page whose URL does not resolve is recorded as ``<page>_missing: 1``.
4. gunicorn as the README runs it (``--gunicorn-workers`` 4 sync workers; ``--gunicorn-threads`` above 1
   makes them gthread workers) and 20 concurrent clients for ``--seconds`` requesting the pages
   round-robin with a viewer's session: ``p50_ms``, ``p95_ms``, ``p99_ms``, ``errors`` (non-200 or
   failed requests), ``requests``.

Prints {"pages": {...}}. Goals: fixed query counts, p95_ms <= 300, every <page>_cold_ms <= 500, errors == 0.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.harness import BenchEnv, http_load, wait_until  # noqa: E402

PAGES = {
    "cluster_list": "clusters:cluster_list",
    "drift_matrix": "drift:skew_matrix",
    "compat_matrix": "drift:compat_matrix",
    "compliance_report": "drift:compliance_report",
}
MINORS = list(range(25, 34))


def make_clusters(count: int) -> list:
    from clusters.choices import ClusterRole, ClusterState
    from clusters.models import Cluster, VersionSample

    rng = random.Random(7)
    rows = []
    for i in range(count):
        minor = MINORS[i % len(MINORS)]
        version = f"v1.{minor}.{i % 7}"
        kubelets = {f"node-{n}": f"v1.{max(minor - (n % 3), 25)}.{n}" for n in range(3)}
        state = ClusterState.READY if i % 20 else rng.choice([ClusterState.NOT_READY, ClusterState.OFFLINE])
        cluster = Cluster(
            name=f"c-{i:04d}",
            api_server=f"http://10.{i // 250}.{i % 250}.1:6443",
            role=ClusterRole.HOST if i == 0 else ClusterRole.MEMBER,
            labels={"env": ["prod", "staging", "dev"][i % 3], "region": ["eu", "us", "ap"][i % 3 if i % 2 else 0]},
            state=state,
            server_version=version,
            version_major=1,
            version_minor=minor,
            platform="linux/amd64",
            kubelet_versions=kubelets,
            node_count=3,
            region="eu-west-1",
        )
        cluster.set_credentials({"token": f"token-{i}"})
        rows.append(cluster)
    Cluster.objects.bulk_create(rows, batch_size=500)
    clusters = list(Cluster.objects.order_by("pk"))
    samples = []
    for cluster in clusters:
        for back in (2, 1, 0):
            minor = max(25, cluster.version_minor - back)
            samples.append(
                VersionSample(
                    cluster=cluster,
                    git_version=f"v1.{minor}.0",
                    version_major=1,
                    version_minor=minor,
                    platform="linux/amd64",
                    kubelet_versions=cluster.kubelet_versions,
                )
            )
    VersionSample.objects.bulk_create(samples, batch_size=2000)
    return clusters


def _ftype(kind: str):
    import importlib

    from django.apps import apps

    from federation.models import FederatedType

    found = FederatedType.objects.filter(kind=kind).first()
    if found is None:
        importlib.import_module("federation.migrations.0002_seed_types").seed(apps, None)
        found = FederatedType.objects.get(kind=kind)
    return found


def make_resources(count: int, clusters) -> int:
    from federation import services
    from federation.choices import PropagationReason, SyncState
    from federation.models import FederatedResource, PropagatedVersion

    placement = {"clusterSelector": {}}
    services.create_resource(_ftype("Namespace"), namespace="", name="shop", template={}, placement=placement)
    for i in range(count - 1):
        kind = ("Deployment", "ConfigMap", "Service")[i % 3]
        if kind == "Deployment":
            container = {"name": "web", "image": f"nginx:1.{i % 27}"}
            pod = {"containers": [container]}
            if i % 9 == 0:  # a v1.28+ field: the compatibility matrix has findings
                pod["initContainers"] = [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]
            template = {
                "metadata": {"labels": {"app": f"web-{i}"}},
                "spec": {
                    "replicas": 1 + i % 3,
                    "selector": {"matchLabels": {"app": f"web-{i}"}},
                    "template": {"metadata": {"labels": {"app": f"web-{i}"}}, "spec": pod},
                },
            }
        elif kind == "ConfigMap":
            template = {"data": {"key": f"value-{i}", "mode": "bench"}}
        else:
            template = {"spec": {"selector": {"app": f"web-{i}"}, "ports": [{"port": 80, "targetPort": 8080}]}}
        services.create_resource(
            _ftype(kind), namespace="shop", name=f"{kind.lower()}-{i:03d}", template=template, placement=placement
        )
    resources = list(FederatedResource.objects.select_related("current_revision"))
    batch, written = [], 0
    for r_index, resource in enumerate(resources):
        for c_index, cluster in enumerate(clusters):
            drifted = (r_index * 31 + c_index) % 97 == 0
            batch.append(
                PropagatedVersion(
                    resource=resource,
                    cluster=cluster,
                    revision=resource.current_revision,
                    template_hash="t" * 64,
                    override_hash="o" * 64,
                    version="gen:1",
                    status=PropagationReason.OK,
                    sync_state=SyncState.OUT_OF_SYNC if drifted else SyncState.IN_SYNC,
                    drift=[{"path": "/spec/replicas", "before": 1, "after": 3, "change": "changed"}] if drifted else [],
                )
            )
            if len(batch) >= 5000:
                PropagatedVersion.objects.bulk_create(batch)
                written += len(batch)
                batch = []
    PropagatedVersion.objects.bulk_create(batch)
    FederatedResource.objects.update(propagated_revision_id=__import__("django").db.models.F("current_revision_id"))
    return written + len(batch)


def viewer_session() -> tuple:
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import Group, User
    from django.contrib.sessions.backends.db import SessionStore

    from fedportal.roles import Role

    user = User.objects.create_user("bench-viewer", password="bench-pass-1")
    user.groups.add(Group.objects.get_or_create(name=Role.VIEWER)[0])
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    return user, settings.SESSION_COOKIE_NAME, session.session_key


def measure_in_process(user, urls: dict) -> dict:
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from fedportal.gc_tuning import prepare_web_process

    prepare_web_process()  # what fedportal.wsgi does in each gunicorn worker before its first request
    client = Client()
    client.force_login(user)
    figures = {}
    for page, url in urls.items():
        cache.clear()  # cold: no fragment or drift results cached (this process's schemas stay loaded)
        started, cpu = time.perf_counter(), time.process_time()
        response = client.get(url)
        cold, cold_cpu = (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000
        assert response.status_code == 200, (page, response.status_code)
        timings, counts = [], []
        for _ in range(5):
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = client.get(url)
                timings.append((time.perf_counter() - started) * 1000)
            counts.append(len(queries))
        figures[f"{page}_queries"] = max(counts)
        figures[f"{page}_ms"] = round(statistics.median(timings), 1)
        figures[f"{page}_cold_ms"] = round(cold, 1)
        figures[f"{page}_cold_cpu_ms"] = round(cold_cpu, 1)
        figures[f"{page}_kb"] = round(len(response.content) / 1024, 1)
    return figures


def start_gunicorn(env: dict, port: int, log_path: Path, *, workers: int, threads: int) -> subprocess.Popen:
    """gunicorn as the README runs it: ``threads`` 1 is its default sync worker (``-w 4``), more is gthread."""
    import urllib.request

    log = open(log_path, "w")
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "fedportal.wsgi:application",
            "--workers",
            str(workers),
            *(["--threads", str(threads), "--worker-class", "gthread"] if threads > 1 else []),
            "--bind",
            f"127.0.0.1:{port}",
            "--timeout",
            "120",
            "--log-level",
            "warning",
        ],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def up():
        if server.poll() is not None:
            raise RuntimeError(f"gunicorn exited: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    wait_until(up, timeout=60, interval=0.2, message="gunicorn /healthz")
    return server


# The README's gunicorn: 4 sync workers. A sync worker takes a connection only when it is idle, so
# the load spreads evenly; a gthread worker keeps each kept-alive connection it accepted, and 20
# clients' connections split unevenly between 2 x 4 gthread workers. bench_api's p95 on PostgreSQL, the
# same hour: 2 x 4 gthread 74, 119, 97, 86 ms (4 x 2: 107 ms), 4 sync workers 64, 72, 80, 67 ms (the
# runs alternated) and 72 ms in make bench. Not 4 gthread workers of one thread each (5be3679 undid
# that): they keep connections too.
GUNICORN_WORKERS = 4
GUNICORN_THREADS = 1


def load(port: int, cookie: str, paths: list[str], clients: int, seconds: float, server_pid=None) -> dict:
    return http_load(port, {"Cookie": cookie}, paths, clients, seconds, server_pid=server_pid)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--resources", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--gunicorn-workers", type=int, default=GUNICORN_WORKERS)
    parser.add_argument("--gunicorn-threads", type=int, default=GUNICORN_THREADS)
    args = parser.parse_args()
    env = BenchEnv("pages", profile="production")
    env.setup()
    server = None
    try:
        from django.core.management import call_command
        from django.urls import NoReverseMatch, reverse

        call_command("collectstatic", interactive=False, verbosity=0)
        t = time.monotonic()
        clusters = make_clusters(args.clusters)
        pvs = make_resources(args.resources, clusters)
        env.analyze()
        setup_s = time.monotonic() - t
        urls, figures = {}, {}
        for page, name in PAGES.items():
            try:
                urls[page] = reverse(name)
            except NoReverseMatch:
                figures[f"{page}_missing"] = 1
        user, cookie_name, session_key = viewer_session()
        figures.update(measure_in_process(user, urls))
        from tests.fleet_fixtures import free_port

        port = free_port()
        server = start_gunicorn(
            env.env, port, env.work / "gunicorn.log", workers=args.gunicorn_workers, threads=args.gunicorn_threads
        )
        # one warm-up request per page and worker (the caches are per process with CACHE_URL=locmem)
        load(port, f"{cookie_name}={session_key}", list(urls.values()), 2, 3)
        figures.update(
            load(port, f"{cookie_name}={session_key}", list(urls.values()), args.clients, args.seconds, server.pid)
        )
        figures.update(
            {
                "clusters": len(clusters),
                "resources": args.resources,
                "propagated_versions": pvs,
                "setup_seconds": round(setup_s, 1),
                "clients": args.clients,
                "load_seconds": args.seconds,
                "gunicorn_workers": args.gunicorn_workers,
                "gunicorn_threads": args.gunicorn_threads,
                "database": env.database,
            }
        )
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
        env.teardown()
    print(json.dumps({"pages": figures}))
    return 0 if goals_met(figures) else 1


def goals_met(figures: dict) -> bool:
    """The goals above that one run can judge (query counts are judged against the tests' fixed ones)."""
    cold = [value for key, value in figures.items() if key.endswith("_cold_ms")]
    missing = [key for key in figures if key.endswith("_missing")]
    return not missing and all(ms <= 500 for ms in cold) and figures["p95_ms"] <= 300 and figures["errors"] == 0


if __name__ == "__main__":
    sys.exit(main())
