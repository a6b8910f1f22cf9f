"""The simulator where FedPortal's verdicts and clients depend on kube-apiserver's exact behaviour
(issue 18). Each test names the apiserver code or convention it reproduces (Kubernetes, Apache-2.0)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.fleet_fixtures import start_fleet

PARITY_FLEET = {
    "defaults": {"rolloutSeconds": 0.3},
    "clusters": [
        {"name": "plain", "role": "host", "version": "v1.32.2", "token": "plain-rw", "readonlyToken": "plain-ro"},
        {"name": "beta", "version": "v1.32.2", "token": "beta-rw", "readonlyToken": "beta-ro",
         "runtimeConfig": {"storage.k8s.io/v1beta1": True}},
        {"name": "old", "version": "v1.29.4", "token": "old-rw"},
    ],
}


@pytest.fixture(scope="module")
def pfleet(tmp_path_factory):
    running = start_fleet(PARITY_FLEET, workdir=tmp_path_factory.mktemp("parity-fleet"))
    yield running
    running.stop()


def call(fleet, cluster: str, method: str, path: str, body=None, *, token: str | None = None,
         ctype: str = "application/json", query: str = "") -> tuple[int, bytes, dict]:
    """(status, raw body, headers) of one request; no client library in between."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    url = fleet.url(cluster) + path + (f"?{query}" if query else "")
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token or fleet.token(cluster)}")
    if data is not None:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers)


def get_json(fleet, cluster: str, path: str, **kw) -> dict:
    status, raw, _ = call(fleet, cluster, "GET", path, **kw)
    assert status == 200, raw
    return json.loads(raw)


# --- 1. discovery serves what a default apiserver serves -----------------------------------------

def served_group_versions(fleet, cluster: str) -> set[str]:
    core = get_json(fleet, cluster, "/api")["versions"]
    groups = get_json(fleet, cluster, "/apis")["groups"]
    return set(core) | {v["groupVersion"] for g in groups for v in g["versions"]}


def test_discovery_serves_only_what_a_default_apiserver_serves(pfleet):
    """kube-apiserver's DefaultAPIResourceConfigSource (pkg/controlplane/instance.go): GA
    group-versions on, alpha off, betas off since KEP-3136 unless listed in
    legacyBetaEnabledByDefaultResources (empty from 1.32; flowcontrol v1beta3 in 1.29-1.31)."""
    served = served_group_versions(pfleet, "plain")
    assert len(served) == 21
    assert not [gv for gv in served if "alpha" in gv or "beta" in gv]
    assert "storage.k8s.io/v1beta1" not in served and "resource.k8s.io/v1beta1" not in served
    status, _, _ = call(pfleet, "plain", "GET", "/apis/storage.k8s.io/v1beta1/volumeattributesclasses")
    assert status == 404
    index = get_json(pfleet, "plain", "/openapi/v3")["paths"]
    assert "apis/storage.k8s.io/v1beta1" not in index and "apis/storage.k8s.io/v1" in index
    old = served_group_versions(pfleet, "old")
    assert "flowcontrol.apiserver.k8s.io/v1beta3" in old  # a legacy beta, still on in 1.29
    assert "admissionregistration.k8s.io/v1beta1" not in old  # a post-KEP-3136 beta: off


def test_runtime_config_switches_an_api_on_for_one_cluster(pfleet):
    """--runtime-config=storage.k8s.io/v1beta1=true serves that group-version (discovery, OpenAPI,
    the REST paths) on that cluster only."""
    assert served_group_versions(pfleet, "beta") == served_group_versions(pfleet, "plain") | {"storage.k8s.io/v1beta1"}
    assert "apis/storage.k8s.io/v1beta1" in get_json(pfleet, "beta", "/openapi/v3")["paths"]
    vac = {"apiVersion": "storage.k8s.io/v1beta1", "kind": "VolumeAttributesClass",
           "metadata": {"name": "fast"}, "driverName": "csi.example.com"}
    status, raw, _ = call(pfleet, "beta", "POST", "/apis/storage.k8s.io/v1beta1/volumeattributesclasses", vac)
    assert status == 201, raw
    status, _, _ = call(pfleet, "plain", "POST", "/apis/storage.k8s.io/v1beta1/volumeattributesclasses", vac)
    assert status == 404


def test_runtime_config_in_the_fleet_file_is_checked():
    from clusters.simulator.fleet import FleetSpecError, parse_fleet

    spec = parse_fleet({"clusters": [{"name": "a", "version": "v1.30.0",
                                      "runtimeConfig": "api/alpha=true,batch/v1=false"}]})
    assert spec.clusters[0].runtime_config == {"api/alpha": True, "batch/v1": False}
    for bad in ({"not a key!": True}, {"api/beta": "maybe"}, ["api/beta"]):
        with pytest.raises(FleetSpecError):
            parse_fleet({"clusters": [{"name": "a", "version": "v1.30.0", "runtimeConfig": bad}]})


@pytest.mark.django_db
def test_switching_an_api_on_for_one_cluster_changes_its_compat_verdict(pfleet):
    """FedPortal reads each cluster's discovery with its inventory; the compatibility matrix and the
    preflight accept an apiVersion only where the cluster serves it."""
    from clusters.services import probe_cluster, register_cluster
    from drift import selectors
    from drift.preflight import compat_preview_check
    from federation.models import FederatedType
    from federation.services import create_resource

    clusters = {}
    for name in ("plain", "beta"):
        clusters[name] = register_cluster(name=name, api_server=pfleet.url(name), role="host" if name == "plain" else "member",
                                          labels={}, token=pfleet.token(name), insecure_skip_tls_verify=True, probe=False)
        probe_cluster(clusters[name])
        clusters[name].refresh_from_db()
    assert "storage.k8s.io/v1beta1" in clusters["beta"].served_apis
    assert "storage.k8s.io/v1beta1" not in clusters["plain"].served_apis
    ftype, _ = FederatedType.objects.get_or_create(group="storage.k8s.io", kind="VolumeAttributesClass",
                                                   defaults={"version": "v1beta1", "plural": "volumeattributesclasses",
                                                             "scope": "Cluster"})
    resource = create_resource(ftype, namespace="", name="fast", template={"driverName": "csi.example.com"},
                               placement={"clusterSelector": {}})
    cells = selectors.compat_row(resource, selectors.fleet_rows())
    assert cells["beta"].status == "compatible"
    assert cells["plain"].status == "incompatible"
    assert cells["plain"].result.problems[0].code == "api_not_served"
    manifest = cells["beta"].manifest
    assert compat_preview_check(manifest, clusters["beta"]) == []
    [warning] = compat_preview_check(manifest, clusters["plain"])
    assert warning.startswith("Incompatible with plain (v1.32.2): storage.k8s.io/v1beta1 VolumeAttributesClass "
                              "exists in v1.32 but is not enabled on this cluster")


# --- 8. Status error bodies, byte for byte ---------------------------------------------------------

def test_status_errors_have_the_apiservers_field_order_and_shape(pfleet):
    """k8s.io/apimachinery metav1.Status: fields kind, apiVersion, metadata, status, message, reason,
    details, code in that order; StatusDetails' group is omitempty (absent for the core group); the
    apiserver's JSON serializer (encoding/json Encoder) ends the body with a newline."""
    status, raw, _ = call(pfleet, "plain", "GET", "/api/v1/namespaces/default/configmaps/nope")
    assert status == 404
    assert raw == (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                   b'"message":"configmaps \\"nope\\" not found","reason":"NotFound",'
                   b'"details":{"name":"nope","kind":"configmaps"},"code":404}\n')
    status, raw, _ = call(pfleet, "plain", "GET", "/apis/apps/v1/namespaces/default/deployments/nope")
    assert raw == (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                   b'"message":"deployments.apps \\"nope\\" not found","reason":"NotFound",'
                   b'"details":{"name":"nope","group":"apps","kind":"deployments"},"code":404}\n')
    status, raw, _ = call(pfleet, "plain", "GET", "/api/v1/namespaces", token="wrong")
    assert (status, raw) == (401, b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                                  b'"message":"Unauthorized","reason":"Unauthorized","code":401}\n')
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}
    status, raw, _ = call(pfleet, "plain", "POST", "/api/v1/namespaces/default/configmaps", bad)
    assert status == 422
    assert raw.endswith(b'"details":{"kind":"ConfigMap","causes":[{"reason":"FieldValueRequired",'
                        b'"message":"Required value: name or generateName is required","field":"metadata.name"}]},'
                        b'"code":422}\n')


# --- 3. dry run ----------------------------------------------------------------------------------

def web_deployment(name: str, image: str = "nginx:1.25", replicas: int = 2) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "web", "image": image}]}}}}


def wait_converged(fleet, cluster: str, name: str) -> dict:
    from tests.utils import wait_for

    path = f"/apis/apps/v1/namespaces/default/deployments/{name}"
    def done() -> bool:
        obj = get_json(fleet, cluster, path)
        status = obj.get("status", {})
        return status.get("updatedReplicas") == status.get("readyReplicas") == obj["spec"]["replicas"]

    wait_for(done, timeout=10, message="roll-out")
    return get_json(fleet, cluster, path)


def test_a_dry_run_changes_nothing_but_what_the_request_changes(pfleet):
    """dryRun=All (what `kubectl diff` sends): the registry runs its strategy (the generation is
    bumped, the status is reset to the stored one: PrepareForUpdate) but nothing is stored and no
    controller sees it, so observedGeneration, replicas and the ReplicaSet named in the conditions
    stay as stored (apiserver/pkg/registry/rest/dryrun, pkg/registry/apps/deployment/strategy.go)."""
    path = "/apis/apps/v1/namespaces/default/deployments/dry"
    status, raw, _ = call(pfleet, "plain", "POST", "/apis/apps/v1/namespaces/default/deployments",
                          web_deployment("dry"))
    assert status == 201, raw
    stored = wait_converged(pfleet, "plain", "dry")
    changed = web_deployment("dry", image="nginx:1.27", replicas=3)
    status, raw, _ = call(pfleet, "plain", "PATCH", path, changed, ctype="application/apply-patch+yaml",
                          query="dryRun=All&fieldManager=kubectl&force=true")
    assert status == 200, raw
    answer = json.loads(raw)
    assert answer["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert answer["spec"]["replicas"] == 3
    assert answer["metadata"]["generation"] == stored["metadata"]["generation"] + 1
    assert answer["status"] == stored["status"]
    assert answer["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert get_json(pfleet, "plain", path) == stored  # nothing persisted
    status, raw, _ = call(pfleet, "plain", "POST", "/apis/apps/v1/namespaces/default/deployments",
                          web_deployment("dry-new"), query="dryRun=All")
    assert status == 201
    assert json.loads(raw).get("status", {}) == {}
    assert call(pfleet, "plain", "GET", "/apis/apps/v1/namespaces/default/deployments/dry-new")[0] == 404


# --- 5. list, then watch from the list's resourceVersion -----------------------------------------

def watch_events(fleet, cluster: str, path: str, rv: str) -> list[dict]:
    status, raw, _ = call(fleet, cluster, "GET", path, query=f"watch=1&resourceVersion={rv}&timeoutSeconds=1")
    assert status == 200, raw
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


def test_a_watch_from_a_lists_resource_version_resumes_on_a_fresh_cluster(pfleet):
    """The apiserver's watch cache serves any resourceVersion inside its window (it starts with the
    apiserver), and answers 410 Expired only for an older one (apiserver/pkg/storage/cacher
    watch_cache.go, "too old resource version")."""
    path = "/api/v1/namespaces/default/configmaps"
    listed = get_json(pfleet, "old", path)["metadata"]["resourceVersion"]
    assert call(pfleet, "old", "POST", path, {"metadata": {"name": "after-list"}})[0] == 201
    events = watch_events(pfleet, "old", path, listed)  # the cluster's first watch
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "after-list")]
    for i in range(505):  # more than the window holds
        assert call(pfleet, "old", "POST", path, {"metadata": {"name": f"fill-{i}"}})[0] == 201
    [expired] = watch_events(pfleet, "old", path, listed)
    assert expired["type"] == "ERROR"
    assert (expired["object"]["reason"], expired["object"]["code"]) == ("Expired", 410)


# --- 6. the scale subresource resizes the current ReplicaSet -------------------------------------

def test_scaling_does_not_roll_out_a_new_replica_set(pfleet):
    """pkg/controller/deployment: a change of replicas alone is a scaling event (sync.go
    isScalingEvent): the current ReplicaSet is resized, so UP-TO-DATE is the new count at once and
    the Progressing condition still names the same ReplicaSet."""
    path = "/apis/apps/v1/namespaces/default/deployments/scaled"
    assert call(pfleet, "plain", "POST", "/apis/apps/v1/namespaces/default/deployments",
                web_deployment("scaled"))[0] == 201
    before = wait_converged(pfleet, "plain", "scaled")
    status, raw, _ = call(pfleet, "plain", "PATCH", path + "/scale", {"spec": {"replicas": 4}},
                          ctype="application/merge-patch+json")
    assert status == 200, raw
    now = get_json(pfleet, "plain", path)
    assert now["status"]["observedGeneration"] == before["metadata"]["generation"] + 1
    assert now["status"]["updatedReplicas"] == 4 and now["status"]["replicas"] == 4
    assert now["status"]["readyReplicas"] == 2
    progressing = [c for c in now["status"]["conditions"] if c["type"] == "Progressing"]
    assert progressing == [c for c in before["status"]["conditions"] if c["type"] == "Progressing"]
    assert progressing[0]["reason"] == "NewReplicaSetAvailable"
    after = wait_converged(pfleet, "plain", "scaled")
    assert after["status"]["readyReplicas"] == 4 and after["status"]["availableReplicas"] == 4
