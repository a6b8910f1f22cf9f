"""Benchmark api: the automation API's lists at scale, with a bearer token.

    .venv/bin/python tests/bench/bench_api.py [--clusters 1000] [--change-requests 10000] [--seconds 30]

1. A throwaway database (tests/bench/harness.py), production profile, 1,000 clusters (as bench_pages
   makes them) and 10,000 change requests (bulk insert, across 50 resources, every state, a third
   with an approval).
2. In-process through Django's test client with a viewer's API token: ``<list>_queries`` for the
   first page and for a page deep in the cursor chain (they must be equal: keyset pagination does
   not slow down with depth), and ``<list>_ms`` (median of 5 warm requests).
3. gunicorn as the README runs it (4 sync workers: tests/bench/bench_pages.py) and 20 concurrent
   clients for ``--seconds`` alternating ``GET /api/v1/clusters`` and ``GET /api/v1/change-requests``
   (50 per page): ``p50_ms``, ``p95_ms``, ``p99_ms``, ``errors``, ``requests``.

Prints {"api": {...}}. Goals: fixed query counts, p95_ms <= 100, errors == 0; exits 1 when missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.bench_pages import GUNICORN_THREADS, GUNICORN_WORKERS, make_clusters, start_gunicorn
from tests.bench.harness import BenchEnv, http_load

LISTS = {"clusters": "/api/v1/clusters", "change_requests": "/api/v1/change-requests"}
GOAL_P95_MS = 100


def make_change_requests(count: int) -> int:
    from django.utils import timezone

    from federation import services
    from federation.approvals.choices import ChangeState, Decision
    from federation.approvals.models import Approval, ChangeRequest
    from tests.federation.factories import ftype

    resources = [
        services.create_resource(
            ftype("ConfigMap"),
            namespace="bench",
            name=f"cm-{i:02d}",
            template={"data": {"i": str(i)}},
            placement={"clusters": ["c-0001"]},
        )
        for i in range(50)
    ]
    states = ChangeState.values
    now = timezone.now()
    rows = []
    for i in range(count):
        resource = resources[i % len(resources)]
        revision = resource.current_revision
        rows.append(
            ChangeRequest(
                kind="edit",
                state=states[i % len(states)],
                title=f"bench change {i}",
                author_name="bench-operator",
                resource=resource,
                resource_repr=str(resource),
                proposed_revision=revision,
                proposed_hash=revision.content_hash,
                target_clusters=["c-0001"],
                required_approvals=1,
                created_at=now - timezone.timedelta(seconds=count - i),
            )
        )
    ChangeRequest.objects.bulk_create(rows, batch_size=1000)
    approvals = [
        Approval(
            change_request_id=pk, approver_name="bench-approver", decision=Decision.APPROVE, content_hash=content_hash
        )
        for pk, content_hash in ChangeRequest.objects.values_list("pk", "proposed_hash")
        if pk % 3 == 0
    ]
    Approval.objects.bulk_create(approvals, batch_size=2000)
    return ChangeRequest.objects.count()


def viewer_token() -> str:
    from django.contrib.auth.models import Group, User

    from api.tokens import create_token
    from fedportal.roles import Role

    user = User.objects.create_user("bench-api-viewer", password="bench-pass-1")
    user.groups.add(Group.objects.get_or_create(name=Role.VIEWER)[0])
    return create_token(user, actor=None, name="bench").secret


def deep_cursor(client, path: str, headers: dict, pages: int) -> str:
    cursor = None
    for _ in range(pages):
        body = client.get(path, {"cursor": cursor} if cursor else {}, headers=headers).json()
        cursor = body["next_cursor"]
    return cursor


def measure_in_process(token: str) -> dict:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    headers = {"Authorization": f"Bearer {token}"}
    figures = {}
    for name, path in LISTS.items():
        cursor = deep_cursor(client, path, headers, 10)
        counts = {}
        for label, params in (("first", {}), ("deep", {"cursor": cursor})):
            with CaptureQueriesContext(connection) as queries:
                response = client.get(path, params, headers=headers)
            assert response.status_code == 200 and len(response.json()["items"]) == 50, (name, response.status_code)
            counts[label] = len(queries)
        timings = []
        for _ in range(5):
            started = time.perf_counter()
            client.get(path, headers=headers)
            timings.append((time.perf_counter() - started) * 1000)
        figures[f"{name}_queries"] = counts["first"]
        figures[f"{name}_deep_page_queries"] = counts["deep"]
        figures[f"{name}_ms"] = round(statistics.median(timings), 1)
    return figures


def load(port: int, token: str, paths: list[str], clients: int, seconds: float, server_pid=None) -> dict:
    return http_load(port, {"Authorization": f"Bearer {token}"}, paths, clients, seconds, server_pid=server_pid)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--change-requests", type=int, default=10000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--gunicorn-workers", type=int, default=GUNICORN_WORKERS)
    parser.add_argument("--gunicorn-threads", type=int, default=GUNICORN_THREADS)
    args = parser.parse_args()
    env = BenchEnv("api", profile="production")
    env.setup()
    server = None
    try:
        t = time.monotonic()
        clusters = make_clusters(args.clusters)
        change_requests = make_change_requests(args.change_requests)
        env.analyze()
        setup_s = time.monotonic() - t
        token = viewer_token()
        figures = measure_in_process(token)
        from tests.fleet_fixtures import free_port

        port = free_port()
        server = start_gunicorn(
            env.env, port, env.work / "gunicorn.log", workers=args.gunicorn_workers, threads=args.gunicorn_threads
        )
        load(port, token, list(LISTS.values()), 2, 3)  # warm both workers
        figures.update(load(port, token, list(LISTS.values()), args.clients, args.seconds, server.pid))
        figures.update(
            {
                "clusters": len(clusters),
                "change_requests": change_requests,
                "setup_seconds": round(setup_s, 1),
                "clients": args.clients,
                "load_seconds": args.seconds,
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
    print(json.dumps({"api": figures}))
    fixed = all(figures[f"{n}_queries"] == figures[f"{n}_deep_page_queries"] for n in LISTS)
    return 0 if fixed and figures["errors"] == 0 and figures["p95_ms"] <= GOAL_P95_MS else 1


if __name__ == "__main__":
    sys.exit(main())
