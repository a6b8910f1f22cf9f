"""Issue 23 item 8: `manage.py demo` stopped by Ctrl-C and an impatient stream of SIGTERMs stops
every process it started, and returns only once they are all gone (a second signal used to cut the
cleanup short, leaving the fleet and the worker running so the next `make demo` refused to start).
A real `manage.py demo` in a throw-away var directory."""

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.worker  # starts the whole demo: fleet simulator, worker, beat, fleet watcher, web server

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie has stopped; only its parent has not reaped it yet


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                members.append(int(entry.name))
    return members


@pytest.fixture
def demo_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_ALLOW_ASYNC_UNSAFE", "FEDPORTAL_TEST_RUN_ID")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "fedportal.settings",
            "FEDPORTAL_VAR_DIR": str(tmp_path / "var"),
            "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
            "CELERY_BROKER_URL": "",
            "CACHE_URL": "",
            "FEDPORTAL_BROKER_DIR": str(tmp_path / "broker"),
        }
    )
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=300
    )
    return env


def test_ctrl_c_then_repeated_sigterm_stops_every_child_before_demo_returns(demo_env):
    demo = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--port", str(free_port()), "--fleet-port", str(free_port())],
        cwd=ROOT,
        env=demo_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    ready = threading.Event()

    def read():
        for line in demo.stdout:
            lines.append(line)
            if "FedPortal is running" in line:
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(240), "the demo did not start:\n" + "".join(lines)
        children = [int(pid) for pid in re.findall(r"\(pid (\d+),", "".join(lines))]
        assert len(children) == 5  # fleet simulator, worker, beat, fleet watcher, web server
        assert all(running(pid) for pid in children)

        demo.send_signal(signal.SIGINT)  # Ctrl-C
        deadline = time.monotonic() + 120
        while demo.poll() is None and time.monotonic() < deadline:
            demo.send_signal(signal.SIGTERM)  # ...and someone keeps asking it to stop
            time.sleep(0.05)
        assert demo.poll() is not None, "the demo did not exit"
        # the moment it has returned, nothing it started is still running
        left = {pid: group_members(pid) for pid in children}
        assert left == {pid: [] for pid in children}, "".join(lines)
        reader.join(5)
        assert "Stopped every demo process." in "".join(lines)
        assert "Traceback" not in "".join(lines)
    finally:
        if demo.poll() is None:
            demo.kill()
        for pid in re.findall(r"\(pid (\d+),", "".join(lines)):
            try:
                os.killpg(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
