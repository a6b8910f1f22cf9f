"""Shared fixtures for the simulator contract tests: one fleet per module, and kubernetes
clients built from their own Configuration (never the global default)."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.fleet_fixtures import start_fleet

CONTRACT_FLEET = {
    "defaults": {"rolloutSeconds": 0.5},
    "clusters": [
        {
            "name": "host",
            "role": "host",
            "version": "v1.29.4",
            "token": "host-rw",
            "readonlyToken": "host-ro",
            "labels": {"region": "eu-west-1", "env": "prod"},
            "nodes": {
                "count": 3,
                "kubeletVersions": ["v1.29.4", "v1.28.9"],
                "region": "eu-west-1",
                "zones": ["eu-west-1a", "eu-west-1b"],
            },
        },
        {"name": "m125", "version": "v1.25.16", "labels": {"region": "us-east-1", "env": "dev"}},
        {"name": "m127", "version": "v1.27.3", "labels": {"region": "us-east-1", "env": "prod"}},
        {"name": "m128", "version": "v1.28.2", "labels": {"region": "ap-southeast-1", "env": "staging"}},
        {"name": "m131", "version": "v1.31.0", "labels": {"region": "eu-west-1", "env": "prod"}},
        {"name": "spare", "version": "v1.30.1"},
    ],
}


@pytest.fixture(scope="session")
def sim(tmp_path_factory):
    """One contract fleet for the whole simulator suite (tests restore any fault they set)."""
    running = start_fleet(CONTRACT_FLEET, workdir=tmp_path_factory.mktemp("contract-fleet"))
    yield running
    running.stop()


def make_client(fleet, name: str, token: str | None = "default", *, retries: int | None = None) -> client.ApiClient:
    config = client.Configuration()
    config.host = fleet.url(name)
    if token == "default":
        token = fleet.token(name)
    if token:
        config.api_key = {"authorization": f"Bearer {token}"}
    if fleet.ca_path:
        config.ssl_ca_cert = fleet.ca_path
    if retries is not None:
        config.retries = retries
    return client.ApiClient(config)


@pytest.fixture
def api(sim):
    """api(name, token="default") -> kubernetes.client.ApiClient for that cluster."""
    made = []

    def factory(name: str, token: str | None = "default", **kw) -> client.ApiClient:
        c = make_client(sim, name, token, **kw)
        made.append(c)
        return c

    yield factory
    for c in made:
        c.close()


def deployment(
    name: str,
    *,
    replicas: int = 2,
    labels: dict | None = None,
    image: str = "nginx:1.25",
    init_restart_policy: str | None = None,
) -> dict:
    labels = labels or {"app": name}
    init = []
    if init_restart_policy:
        init = [{"name": "sidecar", "image": "busybox:1.36", "restartPolicy": init_restart_policy}]
    pod_spec = {"containers": [{"name": "web", "image": image, "ports": [{"containerPort": 80}]}]}
    if init:
        pod_spec["initContainers"] = init
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
        },
    }
