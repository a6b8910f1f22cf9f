"""Benchmark: export 1,000,000 audit events as CSV through the production web server.

    .venv/bin/python tests/bench/bench_audit_export.py          # or: make bench

1. A throwaway database, migrated: SQLite under var/bench/audit_export/, or, when DATABASE_URL
   names a PostgreSQL server, a fresh ``fedportal_bench_audit_<pid>`` database on it that is
   dropped afterwards (the audit log is append-only: never fill a real one).
2. 1,000,000 audit events inserted with ``bulk_create``; their hash chain is computed in Python
   with ``fedportal.audit.compute_hash`` so the log still verifies.
3. gunicorn (1 sync worker) with FEDPORTAL_PROFILE=production (SECURE_SSL_REDIRECT=0, DEBUG=0,
   throwaway secrets) serves ``/audit/export.csv`` to a viewer, logged in by session cookie.
4. The whole CSV is downloaded over HTTP while the worker's RSS is sampled from
   /proc/<pid>/status; its VmHWM (peak resident set since it started) is the figure.

Prints one JSON line: {"audit_export_1m": {"seconds": ..., "peak_rss_mb": ..., ...}}.
Goal: peak_rss_mb <= 200. Exits 1 if the goal or the row count is missed.
FEDPORTAL_BENCH_AUDIT_ROWS overrides the row count (for a quick try); FEDPORTAL_BENCH_KEEP=1 keeps
the database for a rerun (insertion is skipped when it already holds enough rows).
"""

import datetime
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.harness import production_secrets  # noqa: E402

WORK = ROOT / "var" / "bench" / "audit_export"
ROWS = int(os.environ.get("FEDPORTAL_BENCH_AUDIT_ROWS", "1000000"))
KEEP = os.environ.get("FEDPORTAL_BENCH_KEEP") == "1"
GOAL_MB = 200
BATCH = 5000
USERNAME = "bench-viewer"


def bench_env() -> dict[str, str]:
    WORK.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "fedportal.settings",
        "FEDPORTAL_PROFILE": "production",
        "FEDPORTAL_VAR_DIR": str(WORK),
        **production_secrets(),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "0",
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        "CACHE_URL": "locmem",
    }
    db_url = os.environ.get("DATABASE_URL", "")
    if db_url.startswith(("postgres://", "postgresql://")):
        parts = urlsplit(db_url)
        env["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/fedportal_bench_audit_{os.getpid()}"))
        env["FEDPORTAL_BENCH_PG_ADMIN_URL"] = urlunsplit(parts._replace(path="/postgres"))
    else:
        env["DATABASE_URL"] = f"sqlite:///{WORK / 'audit_export.sqlite3'}"
    return env


def throwaway_postgres(env: dict[str, str], *, create: bool) -> None:
    """Create (or drop) the benchmark's own PostgreSQL database."""
    import psycopg

    name = urlsplit(env["DATABASE_URL"]).path.lstrip("/")
    with psycopg.connect(env["FEDPORTAL_BENCH_PG_ADMIN_URL"], autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if create:
            conn.execute(f'CREATE DATABASE "{name}"')


def setup_django(env: dict[str, str]) -> None:
    os.environ.update(env)
    import django

    django.setup()


def fill_audit_log(rows: int) -> float:
    """Append ``rows`` events with a valid hash chain; returns the seconds it took."""
    from django.db import transaction

    from fedportal.audit import GENESIS_HASH, compute_hash, head_mac
    from fedportal.models import AuditChainHead, AuditEvent

    started = time.monotonic()
    head, _ = AuditChainHead.objects.get_or_create(pk=1)
    prev_hash = head.last_hash or GENESIS_HASH
    length = head.length
    base = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=rows)
    actions = ["cluster.probe", "federation.resource.update", "changerequest.approve", "auth.login", "drift.detect"]
    payloads = ["", '=HYPERLINK("http://evil.example")', "+1+1", "@SUM(A1)", "-2"]
    done = 0
    while done < rows:
        batch = []
        for i in range(done, min(done + BATCH, rows)):
            event = AuditEvent(
                created_at=base + datetime.timedelta(seconds=i),
                actor_name=f"user-{i % 37}",
                action=actions[i % len(actions)],
                object_type="federation.federatedresource",
                object_id=str(i % 5000),
                object_repr=f"default/web-{i % 5000}",
                cluster=f"member-{i % 12:02d}",
                summary=f"{payloads[i % len(payloads)]}bench event {i}: replicas changed on member-{i % 12:02d}",
                before={"replicas": i % 7, "image": "nginx:1.27"},
                after={"replicas": (i + 1) % 7, "image": "nginx:1.27"},
                request_id=f"{i:032x}",
                source_ip=f"10.0.{(i >> 8) % 256}.{i % 256}",
                prev_hash=prev_hash,
            )
            event.hash = compute_hash(event)
            prev_hash = event.hash
            batch.append(event)
        with transaction.atomic():
            AuditEvent.objects.bulk_create(batch, batch_size=BATCH)
            length += len(batch)
            AuditChainHead.objects.filter(pk=1).update(
                last_hash=prev_hash, length=length, mac=head_mac(head.chain_id, length, prev_hash, head.legacy_length)
            )
        done += len(batch)
    return time.monotonic() - started


def viewer_session_cookie() -> tuple[str, str]:
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.auth.models import Group
    from django.contrib.sessions.backends.db import SessionStore

    user, _ = get_user_model().objects.get_or_create(username=USERNAME)
    user.groups.add(Group.objects.get_or_create(name="viewer")[0])
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    return settings.SESSION_COOKIE_NAME, session.session_key


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def proc_status_kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def worker_pids(master: int) -> list[int]:
    try:
        return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]
    except FileNotFoundError:
        return []


def start_gunicorn(env: dict[str, str], port: int) -> tuple[subprocess.Popen, int]:
    log = open(WORK / "gunicorn.log", "w")
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "fedportal.wsgi:application",
            "--workers",
            "1",
            "--bind",
            f"127.0.0.1:{port}",
            "--timeout",
            "900",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"gunicorn exited: {(WORK / 'gunicorn.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                if response.status == 200 and worker_pids(server.pid):
                    return server, worker_pids(server.pid)[0]
        except OSError:
            pass
        time.sleep(0.2)
    server.terminate()
    raise RuntimeError("gunicorn did not answer /healthz within 60s")


def download(port: int, cookie: str) -> tuple[int, int, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/audit/export.csv", headers={"Cookie": cookie})
    size = lines = 0
    head = b""
    with urllib.request.urlopen(request, timeout=900) as response:
        if response.status != 200 or not response.headers["Content-Type"].startswith("text/csv"):
            raise RuntimeError(f"export answered {response.status} {response.headers['Content-Type']}")
        while chunk := response.read(1 << 20):
            if not head:
                head = chunk[:400]
            size += len(chunk)
            lines += chunk.count(b"\n")
    return size, lines, head


def main() -> int:
    env = bench_env()
    db_file = None
    if "FEDPORTAL_BENCH_PG_ADMIN_URL" in env:
        throwaway_postgres(env, create=True)
    elif env["DATABASE_URL"].startswith("sqlite:///"):
        db_file = Path(env["DATABASE_URL"][len("sqlite:///") :])
        if not KEEP:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db_file}{suffix}").unlink(missing_ok=True)
    setup_django(env)
    from django.core.management import call_command
    from django.db import connections

    from fedportal.models import AuditEvent

    call_command("migrate", verbosity=0, interactive=False)
    existing = AuditEvent.objects.count()
    insert_seconds = fill_audit_log(ROWS - existing) if existing < ROWS else 0.0
    total = AuditEvent.objects.count()
    cookie_name, session_key = viewer_session_cookie()
    connections.close_all()

    port = free_port()
    server, worker = start_gunicorn(env, port)
    peak_sampled = [0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak_sampled[0] = max(peak_sampled[0], proc_status_kb(worker, "VmRSS"))
            time.sleep(0.05)

    try:
        rss_idle_kb = proc_status_kb(worker, "VmRSS")
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        size, lines, head = download(port, f"{cookie_name}={session_key}")
        seconds = time.monotonic() - started
        hwm_kb = proc_status_kb(worker, "VmHWM")
        stop.set()
        sampler.join()
    finally:
        stop.set()
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()

    peak_kb = max(hwm_kb, peak_sampled[0])
    rows_out = lines - 1  # minus the header
    result = {
        "audit_export_1m": {
            "seconds": round(seconds, 2),
            "peak_rss_mb": round(peak_kb / 1024, 1),
            "idle_rss_mb": round(rss_idle_kb / 1024, 1),
            "rows": rows_out,
            "megabytes": round(size / 1e6, 1),
            "rows_per_second": round(rows_out / seconds) if seconds else None,
            "insert_seconds": round(insert_seconds, 1),
            "goal_peak_rss_mb": GOAL_MB,
        }
    }
    if "FEDPORTAL_BENCH_PG_ADMIN_URL" in env:
        connections.close_all()
        throwaway_postgres(env, create=False)
    if db_file is not None and not KEEP:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db_file}{suffix}").unlink(missing_ok=True)
        shutil.rmtree(WORK / "cache", ignore_errors=True)
    ok = head.startswith("\ufeffID,".encode()) and rows_out >= total and peak_kb / 1024 <= GOAL_MB
    if not ok:
        sys.stderr.write(f"goal missed: rows {rows_out}/{total}, peak {peak_kb / 1024:.1f} MB, head {head[:60]!r}\n")
    print(json.dumps(result))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
