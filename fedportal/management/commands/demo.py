"""`make demo`: a simulated fleet, a worker, beat, the fleet watcher and the web server, all
stopped by Ctrl-C.

Every step is a separate process or a management command invoked by name, so this project-level
command depends on no app's internals.
"""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import BaseCommand, CommandError, call_command

from fedportal.roles import Role

DEMO_RESOURCES = Path(__file__).resolve().parents[2] / "demo" / "staged-web.yaml"
DEMO_USERS = {"admin": Role.ADMIN, "operator": Role.OPERATOR, "approver": Role.APPROVER, "viewer": Role.VIEWER}


class Command(BaseCommand):
    help = "Run the demo: fleet simulator, Celery worker + beat, fleet watcher and the web server on 127.0.0.1:8000."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--fleet-port", type=int, default=8600)
        parser.add_argument("--fleet", default=str(settings.BASE_DIR / "clusters/simulator/fleets/demo.yaml"))
        parser.add_argument("--host-context", default="host", help="kubeconfig context of the host cluster")

    def handle(self, *args, **options):
        self.children: list[subprocess.Popen] = []
        demo_dir = Path(settings.VAR_DIR) / "demo"
        demo_dir.mkdir(parents=True, exist_ok=True)
        for port in (options["port"], options["fleet_port"]):
            if _port_in_use(port):
                raise CommandError(f"Port {port} is already in use: is another demo running? Stop it first.")
        password = self._demo_users(demo_dir)
        kubeconfig = demo_dir / "kubeconfig"
        kubeconfig.unlink(missing_ok=True)
        signal.signal(signal.SIGTERM, stop_requested)
        signal.signal(signal.SIGINT, stop_requested)
        try:
            self._start(
                "fleet simulator",
                [
                    "manage.py",
                    "runfleet",
                    "--fleet",
                    options["fleet"],
                    "--port",
                    str(options["fleet_port"]),
                    "--tls",
                    "--kubeconfig-out",
                    str(kubeconfig),
                ],
                demo_dir / "fleet.log",
            )
            _wait_for(lambda: kubeconfig.exists() and _port_in_use(options["fleet_port"]), "the fleet simulator")
            self._register_fleet(kubeconfig, options["host_context"])
            # a resource with a staged rollout strategy, so a newcomer sees waves and gates (README: Staged rollouts)
            call_command("fedctl", "apply", "-f", str(DEMO_RESOURCES), stdout=self.stdout)
            self._start(
                "celery worker",
                [
                    "-m",
                    "celery",
                    "-A",
                    "fedportal",
                    "worker",
                    "-Q",
                    "default,probes,propagation",
                    "-P",
                    "threads",
                    "-c",
                    "16",
                    "-l",
                    "INFO",
                    "--without-mingle",
                    "--without-gossip",
                ],
                demo_dir / "worker.log",
            )
            self._start(
                "celery beat",
                [
                    "-m",
                    "celery",
                    "-A",
                    "fedportal",
                    "beat",
                    "-l",
                    "INFO",
                    "--schedule",
                    str(demo_dir / "celerybeat-schedule"),
                ],
                demo_dir / "beat.log",
            )
            self._start("fleet watcher", ["manage.py", "watch_fleet", "--name", "demo"], demo_dir / "watcher.log")
            call_command("poll_versions")
            self._start(
                "web server",
                ["manage.py", "runserver", f"127.0.0.1:{options['port']}", "--noreload"],
                demo_dir / "web.log",
            )
            _wait_for(lambda: _port_in_use(options["port"]), "the web server")
            self.stdout.write(
                self.style.SUCCESS(
                    f"\nFedPortal is running at http://127.0.0.1:{options['port']}/\n"
                    f"  log in as admin / {password}   (also: operator, approver, viewer — same password)\n"
                    f"  Cluster API: capi-eu and capi-us are managed by host; see /clusters/lifecycle/ and upgrade\n"
                    f"  one from its cluster page (README, Upgrading clusters).\n"
                    f"  logs: {demo_dir}/*.log   ·   Ctrl-C stops everything.\n"
                )
            )
            while all(child.poll() is None for child in self.children):
                time.sleep(1)
            raise CommandError("A demo process exited; see the logs in " + str(demo_dir))
        except KeyboardInterrupt:
            self.stdout.write("\nStopping…")
        finally:
            self._stop_all()

    def _register_fleet(self, kubeconfig: Path, host_context: str):
        """Register every simulated cluster from the written kubeconfig, with the labels the fleet
        file gives it (region, env, provider), as an admin would with `import_kubeconfig --label`."""
        state = json.loads(kubeconfig.with_name(kubeconfig.name + ".state.json").read_text())
        for name, cluster in sorted(state["clusters"].items()):
            labels = [f"{key}={value}" for key, value in sorted(cluster.get("labels", {}).items())]
            call_command(
                "import_kubeconfig",
                str(kubeconfig),
                contexts=[name],
                labels=labels,
                host_context=host_context if name == host_context else None,
                update_existing=True,
            )

    def _demo_users(self, demo_dir: Path) -> str:
        password_file = demo_dir / "password"
        if not password_file.exists():
            password_file.write_text(secrets.token_urlsafe(9))
            password_file.chmod(0o600)
        password = password_file.read_text().strip()
        User = get_user_model()
        for username, role in DEMO_USERS.items():
            user, _ = User.objects.get_or_create(username=username)
            user.set_password(password)
            user.is_staff = user.is_superuser = role == Role.ADMIN
            user.save()
            user.groups.set([Group.objects.get_or_create(name=role)[0]])
        return password

    def _start(self, label: str, argv: list[str], log_path: Path):
        log = open(log_path, "ab")
        child = subprocess.Popen(
            [sys.executable, *argv],
            cwd=settings.BASE_DIR,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
            start_new_session=True,
        )
        self.children.append(child)
        self.stdout.write(f"started {label} (pid {child.pid}, log {log_path})")

    def _stop_all(self):
        """Stop every child and everything it started (each runs in its own process group), and
        return only when they are all gone. Further Ctrl-C / SIGTERM are ignored meanwhile: cleanup
        that a second signal cuts short is what used to leave the fleet and the worker running."""
        ignore_stop_signals()
        for child in reversed(self.children):
            signal_group(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for child in self.children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for child in self.children:
            signal_group(child.pid, signal.SIGKILL)  # what is left of the group, if anything
            child.wait()
        if self.children:
            self.stdout.write("Stopped every demo process.")


STOP_GRACE_SECONDS = 15


def stop_requested(signum, frame):
    """First Ctrl-C or SIGTERM: stop (the command's finally block cleans up); later ones are ignored."""
    ignore_stop_signals()
    raise KeyboardInterrupt


def ignore_stop_signals():
    # a handler that does nothing rather than SIG_IGN: a signal already pending when SIG_IGN is set
    # makes CPython print "Signal 15 ignored due to race condition"
    signal.signal(signal.SIGTERM, already_stopping)
    signal.signal(signal.SIGINT, already_stopping)


def already_stopping(signum, frame):
    pass


def signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # the whole group is gone already


def _port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_for(predicate, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise CommandError(f"{what} did not start within {timeout:.0f}s; see var/demo/*.log")
