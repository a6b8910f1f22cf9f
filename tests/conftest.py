"""Shared fixtures: users per role, and a real Celery worker process sharing the test database.

The worker is a real ``celery worker`` subprocess (never eager mode). Tests that enqueue work use
``@pytest.mark.worker`` and ``@pytest.mark.django_db(transaction=True)`` so that what they write is
committed and visible to the worker.
"""

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from hypothesis import settings as hypothesis_settings

from fedportal.roles import Role
from tests.utils import celery_worker_command

pytest_plugins = ["tests.fleet_fixtures", "tests.browser_fixtures"]

ROOT = Path(__file__).resolve().parent.parent
WORKER_QUEUES = "default,probes,propagation"

# Property tests judge results, never time: one example slowed past Hypothesis' default deadline
# (200 ms) by a loaded CI machine would fail the run as "unreliable test timings".
hypothesis_settings.register_profile("fedportal", deadline=None)
hypothesis_settings.load_profile("fedportal")


# --- users -----------------------------------------------------------------------------------


@pytest.fixture
def make_user(django_user_model):
    """make_user("alice", Role.OPERATOR) -> a user in that role group (no role: roles=())."""

    def make(username: str, *roles: str, password: str = "pass-for-tests-1"):
        user = django_user_model.objects.create_user(username=username, password=password)
        for role in roles:
            # get_or_create: transactional tests flush the groups the migration made
            user.groups.add(Group.objects.get_or_create(name=role)[0])
        return user

    return make


@pytest.fixture
def viewer(make_user):
    return make_user("vera-viewer", Role.VIEWER)


@pytest.fixture
def operator(make_user):
    return make_user("otto-operator", Role.OPERATOR)


@pytest.fixture
def approver(make_user):
    return make_user("anna-approver", Role.APPROVER)


@pytest.fixture
def admin_user(make_user):
    return make_user("adam-admin", Role.ADMIN)


@pytest.fixture
def nobody(make_user):
    """Logged in, but in no role group: every page answers 403."""
    return make_user("nick-norole")


# --- the page cache (off in the test settings, since most tests change rows directly) -------------


@pytest.fixture
def page_cache():
    """FEDPORTAL_FRAGMENT_CACHE_SECONDS=30 with a fresh local-memory cache, as in production."""
    from django.test import override_settings

    caches = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "page-cache-test"}}
    with override_settings(FEDPORTAL_FRAGMENT_CACHE_SECONDS=30, CACHES=caches):
        from django.core.cache import cache

        cache.clear()
        yield


# --- the audit chain's checkpoints --------------------------------------------------------------


@pytest.fixture(autouse=True)
def _audit_checkpoints_of_this_test(settings, tmp_path):
    """Each test's database starts a new audit chain: its checkpoints go to a folder of its own, since
    another chain's checkpoints beside it are what a wiped log looks like to verify_audit."""
    settings.FEDPORTAL_AUDIT_CHECKPOINTS = tmp_path / "audit-checkpoints"


# --- the real Celery worker ----------------------------------------------------------------------


def test_database_url() -> str:
    """A DATABASE_URL pointing at the test database that pytest-django created."""
    from django.db import connection

    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    auth = ""
    if db.get("USER"):
        auth = quote(db["USER"], safe="")
        if db.get("PASSWORD"):
            auth += ":" + quote(db["PASSWORD"], safe="")
        auth += "@"
    host = db.get("HOST") or "localhost"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}{host}{port}/{db['NAME']}"


def child_process_env(extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a real worker or watcher process on the test database and broker."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "fedportal.settings_test",
        "FEDPORTAL_TEST_RUN_ID": settings.TEST_RUN_ID,
        "DATABASE_URL": test_database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }


class ChildProcess:
    """A real FedPortal process started by a test: its log, and stopping or killing it."""

    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self):
        """SIGKILL, as a crashed machine would: unacknowledged tasks are redelivered, leases run out."""
        self.process.kill()
        self.process.wait(timeout=10)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


class WorkerProcess(ChildProcess):
    def __init__(self, name: str, extra_env: dict[str, str] | None = None, concurrency: int = 8):
        self.name = name
        self.extra_env = extra_env
        self.concurrency = concurrency
        self.log_path = Path(settings.VAR_DIR) / f"worker-{settings.TEST_RUN_ID}-{name}.log"
        self.log_path.write_text("")
        self.start()

    def start(self):
        self.process = subprocess.Popen(
            celery_worker_command(
                queues=WORKER_QUEUES,
                concurrency=self.concurrency,
                node=f"{self.name}-{settings.TEST_RUN_ID}@%h",
                log_path=self.log_path,
            ),
            cwd=ROOT,
            env=child_process_env(self.extra_env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        self._wait_until_ready()

    readied = 0  # "ready." lines in the log so far (one per start)

    def _wait_until_ready(self, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"celery worker exited early:\n{self.log()}")
            if self.log().count(" ready.") > self.readied:
                self.readied += 1
                return
            time.sleep(0.2)
        raise RuntimeError(f"celery worker not ready after {timeout}s:\n{self.log()}")


class WatcherProcess(ChildProcess):
    """A real `manage.py watch_fleet` process on the test database (federation/watching)."""

    def __init__(self, name: str, extra_env: dict[str, str] | None = None):
        self.name = name
        self.log_path = Path(settings.VAR_DIR) / f"watcher-{settings.TEST_RUN_ID}-{name}.log"
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "watch_fleet", "--name", name],
                cwd=ROOT,
                env=child_process_env(extra_env),
                stdout=log,
                stderr=subprocess.STDOUT,
            )


@pytest.fixture
def watcher_factory(django_db_setup):
    started: list[WatcherProcess] = []

    def start(name: str = "w1", *, env: dict[str, str] | None = None) -> WatcherProcess:
        watcher = WatcherProcess(name, env)
        started.append(watcher)
        return watcher

    yield start
    for watcher in started:
        watcher.stop()


def _purge_broker():
    """Start from an empty queue: nothing left over from an earlier run reaches this worker."""
    from fedportal.celery import app

    with app.connection_for_write() as conn:
        for queue in WORKER_QUEUES.split(","):
            try:
                conn.default_channel.queue_purge(queue)
            except Exception:  # the queue may not exist yet
                pass


@pytest.fixture(scope="session")
def session_worker(django_db_setup, django_db_blocker):
    """A real worker process for the whole session, consuming every queue from the test database."""
    with django_db_blocker.unblock():
        _purge_broker()
    worker = WorkerProcess("session")
    yield worker
    worker.stop()


@pytest.fixture
def celery_worker(session_worker):
    """The session's worker. One that an earlier test left dead is started again (its log is kept
    and its end shown), so that test fails alone instead of every later test that needs a worker."""
    if not session_worker.alive():
        sys.stderr.write(
            f"the session worker had exited; starting it again. Its log ended:\n{session_worker.log()[-4000:]}\n"
        )
        session_worker.start()
    return session_worker


@pytest.fixture
def celery_worker_factory(django_db_setup):
    """Start extra workers (own env, e.g. shorter thresholds); all are stopped after the test."""
    started: list[WorkerProcess] = []

    def start(name: str = "extra", *, env: dict[str, str] | None = None, concurrency: int = 8):
        worker = WorkerProcess(name, env, concurrency)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def pytest_sessionfinish(session, exitstatus):
    """Remove this run's broker and cache folders (the SQLite test DB is removed by pytest-django)."""
    import shutil

    for path in (
        getattr(settings, "TEST_BROKER_DIR", None),
        Path(settings.VAR_DIR) / f"cache-test-{settings.TEST_RUN_ID}",
    ):
        if path:
            shutil.rmtree(path, ignore_errors=True)


def pytest_collection_modifyitems(items):
    """Everything that drives the browser is marked e2e (run them alone with -m e2e)."""
    for item in items:
        if "page" in getattr(item, "fixturenames", ()) or "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.e2e)
