"""Shared set-up for the fleet benchmarks (bench_poll, bench_propagate, bench_pages).

Not a scenario itself (run_all only runs ``bench_*.py``). What it gives a scenario:

* ``BenchEnv(name)``: a throwaway database and broker for one scenario, chosen like the app does:
  ``DATABASE_URL`` when set (a fresh ``fedportal_bench_<name>_<pid>`` database on that PostgreSQL
  server, dropped at the end), else SQLite under ``var/bench/<name>/``; ``CELERY_BROKER_URL`` when set
  (e.g. Redis), else the filesystem broker under ``var/bench/<name>/broker``. ``env`` is the process
  environment for workers and servers; ``setup()`` points this process at it, migrates and returns.
* ``start_worker(env, name, concurrency, queues)``: a real ``celery worker`` subprocess (thread pool).
* ``register_clusters(fleet, names)``: Cluster rows for a running simulator fleet (bulk insert,
  credentials encrypted as the registry does; Ready, with the fleet's versions).
* ``wait_until(predicate, timeout)``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

QUEUES = "default,probes,propagation"


def production_secrets() -> dict[str, str]:
    """Fresh values for every setting the production profile refuses to start without."""
    from cryptography.fernet import Fernet

    return {
        "SECRET_KEY": secrets.token_urlsafe(64),
        "FEDPORTAL_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "FEDPORTAL_AUDIT_KEY": secrets.token_urlsafe(48),
    }


class BenchEnv:
    def __init__(self, name: str, *, profile: str = "development"):
        self.name = name
        self.work = ROOT / "var" / "bench" / name
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.pg_admin_url = None
        self.db_name = None
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "fedportal.settings",
            "FEDPORTAL_PROFILE": profile,
            "FEDPORTAL_VAR_DIR": str(self.work),
            **production_secrets(),
            "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
            "SECURE_SSL_REDIRECT": "0",
            "DEBUG": "0",
            "LOG_LEVEL": "WARNING",
            "CACHE_URL": os.environ.get("CACHE_URL") or "locmem",
            "FEDPORTAL_BROKER_DIR": str(self.work / "broker"),
            "PYTHONUNBUFFERED": "1",
        }
        db_url = os.environ.get("DATABASE_URL", "")
        if db_url.startswith(("postgres://", "postgresql://")):
            parts = urlsplit(db_url)
            self.db_name = f"fedportal_bench_{name}_{os.getpid()}"
            self.pg_admin_url = urlunsplit(parts._replace(path="/postgres"))
            env["DATABASE_URL"] = urlunsplit(parts._replace(path="/" + self.db_name))
        else:
            env["DATABASE_URL"] = f"sqlite:///{self.work / 'bench.sqlite3'}"
        self.env = env

    @property
    def database(self) -> str:
        return "postgresql" if self.db_name else "sqlite"

    @property
    def broker(self) -> str:
        url = self.env.get("CELERY_BROKER_URL") or "filesystem://"
        return url.split("://")[0]

    def _pg(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.pg_admin_url, autocommit=True) as conn:
            conn.execute(sql)

    def setup(self) -> None:
        """Create (PostgreSQL) and migrate the database; django is set up in this process."""
        if self.db_name:
            self._pg(f'DROP DATABASE IF EXISTS "{self.db_name}"')
            self._pg(f'CREATE DATABASE "{self.db_name}"')
        os.environ.update(self.env)
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
        self.purge_broker()

    def analyze(self) -> None:
        """After a bulk load, on PostgreSQL: collect the planner's statistics, as autovacuum does for a
        database that grew in use. Seconds after 10,000 rows were bulk-inserted its estimates are
        still those of an empty table (a page's approval count read the whole table instead of its
        index). SQLite keeps no such statistics unless asked, and its production default has none."""
        from django.db import connection

        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")

    def purge_broker(self) -> None:
        from fedportal.celery import app

        with app.connection_for_write() as conn:
            for queue in QUEUES.split(","):
                try:
                    conn.default_channel.queue_purge(queue)
                except Exception:  # noqa: BLE001 - the queue may not exist yet
                    pass

    def teardown(self) -> None:
        from django.db import connections

        connections.close_all()
        if self.db_name:
            try:
                self._pg(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
            except Exception as exc:  # noqa: BLE001
                print(f"could not drop {self.db_name}: {exc}", file=sys.stderr)
        if os.environ.get("FEDPORTAL_BENCH_KEEP") != "1":
            shutil.rmtree(self.work, ignore_errors=True)


class Worker:
    def __init__(self, env: dict, name: str, *, concurrency: int, queues: str = QUEUES, extra_env=None):
        from tests.utils import celery_worker_command

        self.log_path = Path(env["FEDPORTAL_VAR_DIR"]) / f"worker-{name}.log"
        self.log_path.write_text("")
        self.process = subprocess.Popen(
            celery_worker_command(
                queues=queues, concurrency=concurrency, node=f"{name}-{os.getpid()}@%h", log_path=self.log_path
            ),
            cwd=ROOT,
            env={**env, **(extra_env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited: {self.log_path.read_text()[-3000:]}")
            if " ready." in self.log_path.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise RuntimeError("worker not ready")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_worker(env: dict, name: str, *, concurrency: int, queues: str = QUEUES, extra_env=None) -> Worker:
    return Worker(env, name, concurrency=concurrency, queues=queues, extra_env=extra_env)


def register_clusters(fleet, names, *, versions: dict | None = None):
    """Ready Cluster rows for the fleet's clusters (bulk insert), each with its own token."""
    from clusters.choices import ClusterRole, ClusterState
    from clusters.models import Cluster

    rows = []
    for name in names:
        version = (versions or {}).get(name) or "v1.29.0"
        minor = int(version.lstrip("v").split(".")[1])
        cluster = Cluster(
            name=name,
            api_server=fleet.url(name),
            labels=fleet.labels(name),
            role=ClusterRole.MEMBER,
            state=ClusterState.READY,
            server_version=version,
            version_major=1,
            version_minor=minor,
        )
        cluster.set_credentials({"token": fleet.token(name)})
        rows.append(cluster)
    Cluster.objects.bulk_create(rows, batch_size=500)
    return list(Cluster.objects.filter(name__in=list(names)).order_by("pk"))


def fleet_versions(fleet) -> dict[str, str]:
    return {c["name"]: c["version"] for c in fleet.admin("GET", "/clusters")["clusters"]}


def _stat_fields(pid: int) -> list[str]:
    """A process's /proc/<pid>/stat after its name (Linux; OSError elsewhere or once it is gone):
    [1] the parent's pid, [11] and [12] its user and system CPU, [13] and [14] its reaped children's."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _seconds(fields: list[str], user: int) -> float:
    """The user + system CPU seconds at ``fields[user]`` and the one after (``_stat_fields``)."""
    return (int(fields[user]) + int(fields[user + 1])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc; 0.0 elsewhere)."""
    try:
        return _seconds(_stat_fields(pid), 11)
    except OSError:
        return 0.0


def postgres_cpu() -> dict[int, float]:
    """CPU seconds used so far by every PostgreSQL process on this machine (a benchmark's server is
    local and otherwise idle), by pid, and under each postmaster's negated pid what its exited
    backends used (its children's times, added once it reaps them). Without those, a backend opened
    and closed between two samples was not counted at all. Ask again at every measurement: backends
    come and go with connections."""
    found = {}
    for comm in Path("/proc").glob("[0-9]*/comm"):
        pid = int(comm.parent.name)
        try:
            if comm.read_text().strip() != "postgres":
                continue
            fields = _stat_fields(pid)
        except OSError:
            continue
        found[pid] = _seconds(fields, 11)
        if not _is_postgres(int(fields[1])):  # its parent is not postgres: the postmaster
            found[-pid] = _seconds(fields, 13)
    return found


def _is_postgres(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "postgres"
    except OSError:
        return False


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a process and its children (a gunicorn master and its workers)."""
    pids = [pid]
    try:
        pids += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        pass
    return sum(cpu_seconds(p) for p in pids)


def wait_until(predicate, *, timeout: float, interval: float = 0.05, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {message}")


def http_load(
    port: int, headers: dict, paths: list[str], clients: int, seconds: float, *, server_pid: int | None = None
) -> dict:
    """``clients`` threads GET ``paths`` in turn for ``seconds``: latency percentiles and errors, and the
    CPU milliseconds per request of this load generator, (given its pid) of the server and, on
    PostgreSQL, of the database's processes: on a 2-core
    machine with 20 closed-loop clients the p95 is about 10x their sum, so these say where to cut."""
    import urllib3

    http = urllib3.PoolManager(maxsize=clients, retries=False, timeout=urllib3.Timeout(connect=5, read=60))
    timings: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client(index: int):
        n = index
        while time.monotonic() < stop_at:
            path = paths[n % len(paths)]
            n += 1
            started = time.perf_counter()
            try:
                response = http.request("GET", f"http://127.0.0.1:{port}{path}", headers=headers, redirect=False)
                ok = response.status == 200
                status = response.status
            except Exception as exc:  # noqa: BLE001
                ok, status = False, type(exc).__name__
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                timings.append(elapsed)
                if not ok:
                    errors.append(f"{path} {status}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    from django.db import connection

    database_cpu = postgres_cpu() if connection.vendor == "postgresql" else None
    client_cpu, server_cpu = time.process_time(), tree_cpu_seconds(server_pid) if server_pid else 0.0
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client_cpu = time.process_time() - client_cpu
    server_cpu = tree_cpu_seconds(server_pid) - server_cpu if server_pid else None
    if database_cpu is not None:
        after = postgres_cpu()
        database_cpu = sum(seconds - database_cpu.get(pid, 0.0) for pid, seconds in after.items())
    ordered = sorted(timings)
    per_request = max(len(timings), 1) / 1000

    def pct(p):
        return round(ordered[min(len(ordered) - 1, int(len(ordered) * p))], 1) if ordered else None

    return {
        "p50_ms": pct(0.50),
        "p95_ms": pct(0.95),
        "p99_ms": pct(0.99),
        "errors": len(errors),
        "requests": len(timings),
        "requests_per_second": round(len(timings) / seconds, 1),
        "client_cpu_ms_per_request": round(client_cpu / per_request, 2),
        "server_cpu_ms_per_request": round(server_cpu / per_request, 2) if server_pid else None,
        # PostgreSQL's processes (the server is local and otherwise idle); None on SQLite
        "database_cpu_ms_per_request": round(database_cpu / per_request, 2) if database_cpu is not None else None,
        "error_samples": sorted(set(errors))[:5],
    }
