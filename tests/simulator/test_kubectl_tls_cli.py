"""TLS, the written kubeconfig, Debian's kubectl against it, and the fleetctl CLI."""

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command
from kubernetes import client

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = "/usr/bin/kubectl"
TLS_FLEET = {
    "clusters": [
        {"name": "tls-host", "role": "host", "version": "v1.29.4"},
        {"name": "tls-m127", "version": "v1.27.3"},
    ]
}


@pytest.fixture(scope="module")
def tls_fleet(tmp_path_factory):
    from tests.fleet_fixtures import start_fleet

    running = start_fleet(TLS_FLEET, tls=True, workdir=tmp_path_factory.mktemp("tls-fleet"))
    yield running
    running.stop()


def test_tls_fleet_serves_https_verified_by_its_ca(tls_fleet):
    assert tls_fleet.url("tls-host").startswith("https://127.0.0.1:")
    config = client.Configuration(host=tls_fleet.url("tls-host"))
    config.api_key = {"authorization": f"Bearer {tls_fleet.token('tls-host')}"}
    config.ssl_ca_cert = tls_fleet.ca_path
    with client.ApiClient(config) as c:
        assert client.VersionApi(c).get_code().git_version == "v1.29.4"


def test_kubeconfig_has_one_context_per_cluster_with_ca(tls_fleet):
    kc = yaml.safe_load(Path(tls_fleet.kubeconfig_path).read_text())
    contexts = {c["name"] for c in kc["contexts"]}
    assert {"tls-host", "tls-m127", "tls-host-readonly", "tls-m127-readonly"} <= contexts
    clusters = {c["name"]: c["cluster"] for c in kc["clusters"]}
    assert clusters["tls-m127"]["server"] == tls_fleet.url("tls-m127")
    assert clusters["tls-m127"]["certificate-authority-data"]


def test_kubeconfig_loads_into_a_private_configuration(tls_fleet):
    from kubernetes import config as kconfig

    configuration = client.Configuration()
    kconfig.load_kube_config(
        config_file=str(tls_fleet.kubeconfig_path), context="tls-m127", client_configuration=configuration
    )
    with client.ApiClient(configuration) as c:
        assert client.VersionApi(c).get_code().minor == "27"


@pytest.mark.kubectl
@pytest.mark.skipif(not os.path.exists(KUBECTL), reason="kubectl not installed (CI installs kubernetes-client)")
def test_kubectl_version_get_and_apply(tls_fleet, tmp_path):
    base = [KUBECTL, "--kubeconfig", str(tls_fleet.kubeconfig_path), "--context", "tls-host"]

    def run(*args):
        proc = subprocess.run([*base, *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    out = run("version", "-o", "json")
    versions = json.loads(out)
    assert versions["serverVersion"]["gitVersion"] == "v1.29.4"
    # kubectl >= 1.29 reads /openapi/v3 to learn that the server validates fields, and leaves it to
    # the server; older ones want the protobuf OpenAPI v2 document, which the simulator does not serve
    # (a kubectl that picks its version by the server's, like Google Cloud's, runs 1.29 here)
    client_minor = int("".join(ch for ch in versions["clientVersion"]["minor"] if ch.isdigit()))
    validate = [] if client_minor >= 29 else ["--validate=false"]
    assert "kube-system" in run("get", "ns")
    manifest = tmp_path / "deployment.yaml"
    manifest.write_text(
        textwrap.dedent("""\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web, namespace: default, labels: {app: web}}
        spec:
          replicas: 2
          selector: {matchLabels: {app: web}}
          template:
            metadata: {labels: {app: web}}
            spec:
              containers: [{name: web, image: "nginx:1.25"}]
        """)
    )
    assert "created" in run("apply", *validate, "-f", str(manifest))
    assert "unchanged" in run("apply", *validate, "-f", str(manifest))
    manifest.write_text(manifest.read_text().replace("replicas: 2", "replicas: 4"))
    assert "configured" in run("apply", *validate, "-f", str(manifest))
    live = tls_fleet.get_object("tls-host", "apps/v1", "Deployment", "default", "web")
    assert live["spec"]["replicas"] == 4 and live["metadata"]["generation"] == 2
    # a strategic merge patch built from the served schemas (containers merge by name)
    manifest.write_text(manifest.read_text().replace("nginx:1.25", "nginx:1.27"))
    assert "configured" in run("apply", *validate, "-f", str(manifest))
    containers = tls_fleet.get_object("tls-host", "apps/v1", "Deployment", "default", "web")["spec"]["template"][
        "spec"
    ]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("web", "nginx:1.27")]
    explained = run("explain", "deployment.spec.strategy")  # the OpenAPI v3 schemas, with descriptions
    assert "rollingUpdate" in explained and "Rolling update config params" in explained
    assert "web" in run("get", "deployments")
    assert "successfully rolled out" in run("rollout", "status", "deployment/web", "--timeout=30s")  # a watch
    assert "scaled" in run("scale", "deployment/web", "--replicas=3")  # the scale subresource
    assert tls_fleet.get_object("tls-host", "apps/v1", "Deployment", "default", "web")["spec"]["replicas"] == 3
    manifest.write_text(manifest.read_text().replace("replicas: 4", "replicas: 3"))
    assert "serverside-applied" in run("apply", "--server-side", "--force-conflicts", *validate, "-f", str(manifest))
    if validate:
        return
    # kubectl's own validation: the server rejects an unknown field (fieldValidation=Strict)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        manifest.read_text().replace("name: web,", "name: web-bad,").replace("\nspec:\n", "\nspec:\n  bogus: 1\n")
    )
    proc = subprocess.run([*base, "apply", "-f", str(bad)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and 'strict decoding error: unknown field "spec.bogus"' in proc.stderr
    assert tls_fleet.get_object("tls-host", "apps/v1", "Deployment", "default", "web-bad") is None


def fleetctl_subprocess(state, *args):
    return subprocess.run(
        [sys.executable, "manage.py", "fleetctl", "--state", str(state), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def fleetctl(state, *args) -> str:
    out = io.StringIO()
    call_command("fleetctl", "--state", str(state), *args, stdout=out)
    return out.getvalue()


def test_fleetctl_entry_point_lists_the_fleet(tls_fleet):
    state = Path(tls_fleet.kubeconfig_path).with_name("kubeconfig.state.json")
    listing = fleetctl_subprocess(state, "list")
    assert listing.returncode == 0 and "tls-m127" in listing.stdout and "v1.27.3" in listing.stdout


def test_fleetctl_switches_faults_versions_and_edits(tls_fleet):
    state = Path(tls_fleet.kubeconfig_path).with_name("kubeconfig.state.json")
    fleetctl(state, "down", "tls-m127", "--mode", "503")
    assert tls_fleet.admin("GET", "/clusters/tls-m127/")["faults"]["down"] == "503"
    fleetctl(state, "up", "tls-m127")
    assert tls_fleet.admin("GET", "/clusters/tls-m127/")["faults"]["down"] is None
    fleetctl(state, "latency", "tls-m127", "5")
    assert tls_fleet.admin("GET", "/clusters/tls-m127/")["faults"]["latencyMs"] == 5
    fleetctl(state, "errors", "tls-m127", "0.5")
    assert tls_fleet.admin("GET", "/clusters/tls-m127/")["faults"]["errorRate"] == 0.5
    tls_fleet.admin("POST", "/clusters/tls-m127/faults", {"latencyMs": 0, "errorRate": 0})
    fleetctl(state, "version", "tls-m127", "v1.28.1")
    assert tls_fleet.version("tls-m127") == "v1.28.1"
    tls_fleet.set_version("tls-m127", "v1.27.3")
    upgraded = json.loads(fleetctl(state, "kubelets", "tls-m127", "v1.27.4"))["upgradedNodes"]
    for node in upgraded:
        assert (
            tls_fleet.get_object("tls-m127", "v1", "Node", None, node)["status"]["nodeInfo"]["kubeletVersion"]
            == "v1.27.4"
        )
    fleetctl(
        state,
        "edit",
        "tls-host",
        "default",
        "--api-version",
        "v1",
        "--kind",
        "Namespace",
        "--patch",
        '{"metadata": {"labels": {"drift": "yes"}}}',
    )
    got = fleetctl(state, "get", "tls-host", "default", "--api-version", "v1", "--kind", "Namespace")
    assert json.loads(got)["metadata"]["labels"]["drift"] == "yes"
    assert json.loads(fleetctl(state, "stats"))["clusters"] == 2


@pytest.mark.parametrize(
    "args,message",
    [
        (("version", "tls-m127", "nope"), "bad Kubernetes version"),
        (("up", "ghost"), "404"),
        (("kubelets", "tls-m127", "v1.27.4", "--node", "ghost"), "no node named ghost"),
        (("edit", "tls-host", "default", "--api-version", "v1", "--kind", "Namespace", "--patch", "{nope"), "not JSON"),
    ],
)
def test_fleetctl_reports_errors(tls_fleet, args, message):
    state = Path(tls_fleet.kubeconfig_path).with_name("kubeconfig.state.json")
    with pytest.raises(CommandError, match=message):
        fleetctl(state, *args)


def test_fleetctl_without_a_fleet_says_how_to_find_one(tmp_path):
    with pytest.raises(CommandError, match="--admin-url"):
        fleetctl(tmp_path / "missing.json", "list")
