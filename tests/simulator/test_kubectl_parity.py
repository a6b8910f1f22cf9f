"""kubectl 1.32 (Debian's kubernetes-client) against the simulator where it used to differ from a real
cluster (issue 18): protobuf bodies, auth can-i/whoami, diff, scale then server-side apply, get -w."""

import json
import os
import subprocess
import textwrap
import threading
import time

import pytest

KUBECTL = "/usr/bin/kubectl"
FLEET = {"clusters": [{"name": "kc", "role": "host", "version": "v1.32.2"}], "defaults": {"rolloutSeconds": 0.3}}
DEPLOYMENT = textwrap.dedent("""\
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web, namespace: default}
    spec:
      replicas: 2
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          containers: [{name: web, image: "nginx:1.25"}]
    """)

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not os.path.exists(KUBECTL), reason="kubectl not installed (make test installs it)"),
]


@pytest.fixture(scope="module")
def kfleet(tmp_path_factory):
    from tests.fleet_fixtures import start_fleet

    running = start_fleet(FLEET, tls=True, workdir=tmp_path_factory.mktemp("kubectl-fleet"))
    yield running
    running.stop()


def kubectl(fleet, *args, context="kc", check=True, timeout=60) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [KUBECTL, "--kubeconfig", str(fleet.kubeconfig_path), "--context", context, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_kubectl_sends_protobuf_and_asks_the_server_who_it_is(kfleet):
    """`create namespace`, `auth can-i` and `auth whoami` send protobuf bodies (k8s\\x00 +
    runtime.Unknown); SelfSubjectAccessReview and SelfSubjectReview are allowed for every
    authenticated user, the read-only one too."""
    assert kubectl(kfleet, "version", "--client").stdout.startswith("Client Version: v1.32")
    assert kubectl(kfleet, "create", "namespace", "from-proto").stdout.strip() == "namespace/from-proto created"
    assert kfleet.get_object("kc", "v1", "Namespace", None, "from-proto")["status"] == {"phase": "Active"}
    assert kubectl(kfleet, "auth", "can-i", "create", "pods").stdout.strip() == "yes"
    ro = kubectl(kfleet, "auth", "can-i", "create", "pods", context="kc-readonly", check=False)
    assert (ro.returncode, ro.stdout.strip()) == (1, "no")
    assert kubectl(kfleet, "auth", "can-i", "list", "deployments", context="kc-readonly").stdout.strip() == "yes"
    who = kubectl(kfleet, "auth", "whoami", "-o", "json", context="kc-readonly").stdout
    assert json.loads(who)["status"]["userInfo"]["username"] == "system:serviceaccount:fleet:readonly"
    assert "system:serviceaccount:fleet:admin" in kubectl(kfleet, "auth", "whoami").stdout
    denied = kubectl(kfleet, "create", "namespace", "nope", context="kc-readonly", check=False)
    assert denied.returncode == 1 and "is forbidden" in denied.stderr


def test_diff_scale_then_server_side_apply_and_get_watch(kfleet, tmp_path):
    manifest = tmp_path / "web.yaml"
    manifest.write_text(DEPLOYMENT)
    assert "serverside-applied" in kubectl(kfleet, "apply", "--server-side", "-f", str(manifest)).stdout
    kubectl(kfleet, "rollout", "status", "deployment/web", "--timeout=30s")
    stored = kfleet.get_object("kc", "apps/v1", "Deployment", "default", "web")
    # kubectl diff: a server-side dry run; only what the change itself does shows, nothing is stored
    changed = tmp_path / "changed.yaml"
    changed.write_text(DEPLOYMENT.replace("nginx:1.25", "nginx:1.27"))
    diff = kubectl(kfleet, "diff", "-f", str(changed), check=False)
    assert diff.returncode == 1, diff.stderr
    lines = [line for line in diff.stdout.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert "-      - image: nginx:1.25" in lines and "+      - image: nginx:1.27" in lines
    assert not [line for line in lines if "eplica" in line or "bservedGeneration" in line]
    assert kfleet.get_object("kc", "apps/v1", "Deployment", "default", "web") == stored
    # kubectl scale, then an apply that would revert it: a conflict, replicas stay
    assert "scaled" in kubectl(kfleet, "scale", "deployment/web", "--replicas=4").stdout
    reverted = kubectl(kfleet, "apply", "--server-side", "-f", str(manifest), check=False)
    assert reverted.returncode == 1
    assert (
        'Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using apps/v1: .spec.replicas'
    ) in reverted.stderr
    assert kfleet.get_object("kc", "apps/v1", "Deployment", "default", "web")["spec"]["replicas"] == 4
    # get, a write, then get -w (a list, then a watch from the list's resourceVersion)
    assert "kube-root-ca.crt" in kubectl(kfleet, "get", "configmaps").stdout
    kubectl(kfleet, "create", "configmap", "before-watch")
    watch = subprocess.Popen(
        [KUBECTL, "--kubeconfig", str(kfleet.kubeconfig_path), "--context", "kc", "get", "configmaps", "-w"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(watch.stdout), daemon=True)  # line by line
    reader.start()

    def printed(name: str) -> bool:
        deadline = time.monotonic() + 30  # kubectl's start-up, discovery and list on a loaded machine
        while time.monotonic() < deadline:
            if any(name in line for line in list(lines)):
                return True
            time.sleep(0.1)
        return False

    try:
        # the list printed: the watch starts from its resourceVersion, so nothing created now is missed
        assert printed("before-watch"), lines
        kubectl(kfleet, "create", "configmap", "during-watch")
        assert printed("during-watch"), lines
    finally:
        watch.terminate()
    watch.wait(timeout=10)
    reader.join(timeout=10)  # stdout is the reader's alone
    err = watch.stderr.read()
    assert "too old resource version" not in err and "Expired" not in err
