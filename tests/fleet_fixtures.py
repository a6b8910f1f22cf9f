"""Fleet simulator fixtures (owned by the simulator work; see clusters/simulator/).

Stable API for every test that needs Kubernetes clusters:

``fleet_factory`` (function-scoped)
    ``fleet_factory(spec, tls=False, rollout_seconds=None) -> RunningFleet``. ``spec`` is a fleet
    dict (the FLEET_FORMAT.md shape), ``{"generate": N, "versions": "1.25-1.33"}``, or a path to
    a fleet YAML file. Starts
    ``manage.py runfleet`` as a SUBPROCESS on a free port (so the Celery worker process can reach
    it too), waits until it answers, and stops it at teardown.

``fleet`` (function-scoped)
    ``fleet_factory(DEFAULT_FLEET)``: host v1.29.4 and members m127 (v1.27.3), m128 (v1.28.2),
    m130 (v1.30.1), m131 (v1.31.0), with region/env labels; roll-outs converge after 0.3 s.

``RunningFleet``
    ``.names`` (cluster names, fleet order), ``.url(name)`` (API server URL),
    ``.token(name)``, ``.readonly_token(name)``, ``.labels(name)``, ``.version(name)``,
    ``.kubeconfig_path``, ``.ca_path`` (None without TLS), ``.admin_url``, ``.admin_token``,
    ``.set_down(name, mode="refused"|"503")``, ``.set_up(name)``, ``.set_latency(name, ms)``,
    ``.set_error_rate(name, share)``, ``.set_rollout_seconds(name, seconds)``,
    ``.set_kubelet_version(name, version, nodes=None)``,
    ``.external_edit(cluster, api_version, kind, namespace, name, merge_patch, field_manager="kubectl-edit")``
    (changes a live object out of band and returns it),
    ``.external_delete(cluster, api_version, kind, namespace, name)``, ``.set_version(name, git_version)``,
    ``.get_object(cluster, api_version, kind, namespace, name) -> dict | None`` (read through the
    admin endpoint, bypassing faults and auth), ``.stats()``, ``.stop()``.

Tokens for the admin side never appear in the portal; tests use ``.url``/``.token``/``.ca_path``
to register clusters as a user would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent

DEFAULT_FLEET = {
    "defaults": {"rolloutSeconds": 0.3},
    "clusters": [
        {
            "name": "host",
            "role": "host",
            "version": "v1.29.4",
            "labels": {"region": "eu-west-1", "env": "prod", "provider": "aws"},
            "nodes": {"count": 3, "kubeletVersions": ["v1.29.4", "v1.28.9"], "region": "eu-west-1"},
        },
        {
            "name": "m127",
            "version": "v1.27.3",
            "labels": {"region": "eu-west-1", "env": "prod", "provider": "aws"},
            "nodes": {"count": 2, "kubeletVersions": ["v1.27.3", "v1.26.5"], "region": "eu-west-1"},
        },
        {
            "name": "m128",
            "version": "v1.28.2",
            "labels": {"region": "us-east-1", "env": "staging", "provider": "gcp"},
            "nodes": {"count": 2, "kubeletVersions": ["v1.28.2"], "region": "us-east-1"},
        },
        {
            "name": "m130",
            "version": "v1.30.1",
            "labels": {"region": "us-east-1", "env": "prod", "provider": "azure"},
            "nodes": {"count": 3, "kubeletVersions": ["v1.30.1", "v1.29.4"], "region": "us-east-1"},
        },
        {
            "name": "m131",
            "version": "v1.31.0",
            "labels": {"region": "ap-southeast-1", "env": "dev", "provider": "onprem"},
            "nodes": {"count": 1, "kubeletVersions": ["v1.31.0"], "region": "ap-southeast-1"},
        },
    ],
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FleetError(RuntimeError):
    pass


class RunningFleet:
    def __init__(self, proc: subprocess.Popen, workdir: Path, kubeconfig_path: Path, state: dict, log_path: Path):
        self.proc = proc
        self.workdir = workdir
        self.kubeconfig_path = kubeconfig_path
        self.log_path = log_path
        self._state = state
        self.admin_url: str = state["adminUrl"]
        self.admin_token: str = state["adminToken"]
        self.ca_path: str | None = state.get("caPath")
        self.base_url: str = state["baseUrl"]
        self.owns_workdir = False  # start_fleet() made a temp dir: removed at stop()

    # -- reading the fleet --------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return list(self._state["clusters"])

    def _c(self, name: str) -> dict:
        try:
            return self._state["clusters"][name]
        except KeyError:
            raise FleetError(f"no cluster {name!r} in this fleet") from None

    def url(self, name: str) -> str:
        return self._c(name)["url"]

    def token(self, name: str) -> str:
        return self._c(name)["token"]

    def readonly_token(self, name: str) -> str:
        return self._c(name)["readonlyToken"]

    def labels(self, name: str) -> dict:
        return dict(self._c(name)["labels"])

    def version(self, name: str) -> str:
        return self.admin("GET", f"/clusters/{name}/")["version"]

    # -- admin endpoint -----------------------------------------------------------------------
    def admin(self, method: str, path: str, body: dict | None = None, *, allow_404: bool = False):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.admin_url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.admin_token}", "Content-Type": "application/json"},
        )
        ctx = ssl.create_default_context(cafile=self.ca_path) if self.ca_path else None
        try:
            with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            if allow_404 and exc.code == 404:
                return None
            raise FleetError(f"admin {method} {path}: {exc.code} {exc.read()[:500]!r}") from exc

    def set_down(self, name: str, mode: str = "refused") -> None:
        self.admin("POST", f"/clusters/{name}/faults", {"down": mode})

    def set_up(self, name: str) -> None:
        self.admin("POST", f"/clusters/{name}/faults", {"down": None})

    def drop_watches(self, name: str) -> int:
        return self.admin("POST", f"/clusters/{name}/drop-watches", {})["droppedWatches"]

    def set_latency(self, name: str, ms: int) -> None:
        self.admin("POST", f"/clusters/{name}/faults", {"latencyMs": int(ms)})

    def set_error_rate(self, name: str, share: float) -> None:
        self.admin("POST", f"/clusters/{name}/faults", {"errorRate": float(share)})

    def set_rollout_seconds(self, name: str, seconds: float) -> None:
        self.admin("POST", f"/clusters/{name}/rollout", {"seconds": float(seconds)})

    def set_version(self, name: str, git_version: str) -> None:
        self.admin("POST", f"/clusters/{name}/version", {"gitVersion": git_version})

    def set_kubelet_version(self, name: str, git_version: str, nodes: list[str] | None = None) -> list[str]:
        """A node upgrade (every node unless ``nodes``); returns the node names changed."""
        body = {"kubeletVersion": git_version, **({"nodes": nodes} if nodes is not None else {})}
        return self.admin("POST", f"/clusters/{name}/kubelets", body)["upgradedNodes"]

    def external_edit(
        self,
        cluster: str,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        merge_patch: dict,
        field_manager: str = "kubectl-edit",
    ) -> dict:
        return self.admin(
            "POST",
            f"/clusters/{cluster}/edit",
            {
                "apiVersion": api_version,
                "kind": kind,
                "namespace": namespace or "",
                "name": name,
                "mergePatch": merge_patch,
                "fieldManager": field_manager,
            },
        )

    def external_delete(self, cluster: str, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        """Delete a live object out of band (resource drift: the object is gone)."""
        self.admin(
            "POST",
            f"/clusters/{cluster}/delete",
            {"apiVersion": api_version, "kind": kind, "namespace": namespace or "", "name": name},
        )

    def get_object(self, cluster: str, api_version: str, kind: str, namespace: str | None, name: str) -> dict | None:
        query = urllib.parse.urlencode(
            {"apiVersion": api_version, "kind": kind, "namespace": namespace or "", "name": name}
        )
        return self.admin("GET", f"/clusters/{cluster}/object?{query}", allow_404=True)

    def stats(self) -> dict:
        return self.admin("GET", "/stats")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def start_fleet(
    spec,
    *,
    tls: bool = False,
    rollout_seconds: float | None = None,
    workdir: Path | None = None,
    timeout: float = 60.0,
    extra_args: tuple = (),
) -> RunningFleet:
    """Start `manage.py runfleet` in a subprocess and wait until its admin endpoint answers."""
    owns_workdir = workdir is None
    workdir = Path(workdir or tempfile.mkdtemp(prefix="fleet-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if isinstance(spec, dict) and "generate" in spec:
        source = ["--generate", str(int(spec["generate"])), "--versions", str(spec.get("versions", "1.25-1.33"))]
    elif isinstance(spec, dict):
        fleet_file = workdir / "fleet.yaml"
        fleet_file.write_text(yaml.safe_dump(spec, sort_keys=False))
        source = ["--fleet", str(fleet_file)]
    elif isinstance(spec, (str, Path)):
        source = ["--fleet", str(spec)]
    else:
        raise TypeError("spec must be a dict or a path")
    kubeconfig = workdir / "kubeconfig"
    state_file = workdir / "kubeconfig.state.json"
    port = free_port()
    args = [
        sys.executable,
        str(ROOT / "manage.py"),
        "runfleet",
        *source,
        "--port",
        str(port),
        "--kubeconfig-out",
        str(kubeconfig),
        *extra_args,
    ]
    if tls:
        args.append("--tls")
    if rollout_seconds is not None:
        args += ["--rollout-seconds", str(rollout_seconds)]
    log_path = workdir / "runfleet.log"
    log = open(log_path, "wb")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    log.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise FleetError(f"runfleet exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
        if state_file.exists():
            try:
                state = json.loads(state_file.read_text())
                if state.get("pid") == proc.pid:
                    running = RunningFleet(proc, workdir, kubeconfig, state, log_path)
                    running.owns_workdir = owns_workdir
                    running.admin("GET", "/clusters")
                    return running
            except (ValueError, FleetError, OSError):
                pass
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    raise FleetError(f"runfleet did not answer within {timeout}s: {log_path.read_text()[-2000:]}")


@pytest.fixture
def fleet_factory(tmp_path_factory):
    started: list[RunningFleet] = []

    def factory(spec, tls: bool = False, rollout_seconds: float | None = None) -> RunningFleet:
        running = start_fleet(spec, tls=tls, rollout_seconds=rollout_seconds, workdir=tmp_path_factory.mktemp("fleet"))
        started.append(running)
        return running

    yield factory
    for running in started:
        running.stop()


@pytest.fixture
def fleet(fleet_factory) -> RunningFleet:
    return fleet_factory(DEFAULT_FLEET)
