"""The simulator's rollout faults: rollout-fail and image-fail (pattern) keep Deployments unavailable."""

import pytest

from clusters.simulator.fleet import FleetSpecError, parse_faults


def test_fault_fields_parse_and_refuse_bad_values():
    faults = parse_faults({"rolloutFail": True, "imageFail": " registry.example/web:2.* "})
    assert faults.rollout_fail and faults.image_fail == "registry.example/web:2.*"
    assert faults.as_dict()["rolloutFail"] is True and faults.as_dict()["imageFail"] == "registry.example/web:2.*"
    with pytest.raises(FleetSpecError, match="rolloutFail must be true or false"):
        parse_faults({"rolloutFail": "yes"})
    with pytest.raises(FleetSpecError, match="imageFail must be an image pattern"):
        parse_faults({"imageFail": 5})


def _live(fleet, cluster):
    return fleet.get_object(cluster, "apps/v1", "Deployment", "default", "web")


def apply_deployment(fleet, cluster, *, image):
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image}]},
            },
        },
    }
    _create(fleet, cluster, "/apis/apps/v1/namespaces/default/deployments", body)


def test_image_fail_and_rollout_fail_leave_deployments_unavailable(fleet_factory):
    import time

    fleet = fleet_factory(
        {
            "defaults": {"version": "v1.30.1", "rolloutSeconds": 0.2},
            "clusters": [
                {"name": "ok"},
                {"name": "pull", "faults": {"imageFail": "shop/web:2.*"}},
                {"name": "stuck"},
            ],
        }
    )
    fleet.admin("POST", "/clusters/stuck/faults", {"rolloutFail": True})
    for name in ("ok", "pull", "stuck"):
        apply_deployment(fleet, name, image="shop/web:2.1")
    time.sleep(0.5)
    status = {n: (_live(fleet, n).get("status") or {}) for n in ("ok", "pull", "stuck")}
    assert status["ok"].get("availableReplicas") == 1
    assert not status["pull"].get("availableReplicas") and not status["stuck"].get("availableReplicas")
    assert status["pull"]["updatedReplicas"] == 1, "the rollout happened; only its pods never become available"
    fleet.admin("POST", "/clusters/stuck/faults", {"rolloutFail": False})
    writes = fleet.admin("GET", "/clusters/ok/log")["writes"]
    assert any(w["method"] in ("POST", "PATCH", "PUT") and "/deployments" in w["path"] for w in writes)
    assert all(w["end"] >= w["start"] for w in writes)


def _create(fleet, cluster, path: str, body: dict) -> None:
    import json
    import urllib.request

    request = urllib.request.Request(
        f"{fleet.url(cluster)}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {fleet.token(cluster)}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201


def _pod_template(image: str) -> dict:
    return {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": image}]}}


def test_statefulsets_daemonsets_and_jobs_report_their_rollout_as_their_controllers_do(fleet_factory):
    """What a rollout's gates read of them (kubectl rollout status' rules): converged at once, or,
    with an image that never pulls, never ready (a Job never complete)."""
    from federation.propagation.gates import HEALTHY, WAITING, daemonset_rollout, job_rollout, statefulset_rollout

    fleet = fleet_factory(
        {
            "defaults": {"version": "v1.30.1"},
            "clusters": [{"name": "ok"}, {"name": "pull", "faults": {"imageFail": "*:broken"}}],
        }
    )
    for cluster, image in (("ok", "db:1"), ("pull", "db:broken")):
        selector = {"matchLabels": {"app": "db"}}
        apps = "/apis/apps/v1/namespaces/default"
        _create(fleet, cluster, f"{apps}/statefulsets", {
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
            "spec": {"replicas": 2, "serviceName": "db", "selector": selector, "template": _pod_template(image)},
        })  # fmt: skip
        _create(fleet, cluster, f"{apps}/daemonsets", {
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "db"},
            "spec": {"selector": selector, "template": _pod_template(image)},
        })  # fmt: skip
        job_pod = {**_pod_template(image), "spec": {**_pod_template(image)["spec"], "restartPolicy": "Never"}}
        _create(fleet, cluster, "/apis/batch/v1/namespaces/default/jobs", {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "db"}, "spec": {"template": job_pod},
        })  # fmt: skip
    rules = (("apps/v1", "StatefulSet", statefulset_rollout), ("apps/v1", "DaemonSet", daemonset_rollout))
    for api_version, kind, rule in (*rules, ("batch/v1", "Job", job_rollout)):
        ok = fleet.get_object("ok", api_version, kind, "default", "db")
        assert rule(ok)[0] == HEALTHY, (kind, ok.get("status"))
        assert rule(fleet.get_object("pull", api_version, kind, "default", "db"))[0] == WAITING, kind
    import json
    import urllib.request

    request = urllib.request.Request(
        f"{fleet.url('ok')}/api/v1/nodes", headers={"Authorization": f"Bearer {fleet.token('ok')}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        nodes = json.load(response)["items"]
    daemonset = fleet.get_object("ok", "apps/v1", "DaemonSet", "default", "db")["status"]
    assert daemonset["desiredNumberScheduled"] == daemonset["numberAvailable"] == len(nodes) >= 1, "one pod a node"
