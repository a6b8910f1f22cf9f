"""The simulator where FedPortal's verdicts and clients depend on kube-apiserver's exact behaviour
(issue 18). Each test names the apiserver code or convention it reproduces (Kubernetes, Apache-2.0)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest

from tests.fleet_fixtures import start_fleet

PARITY_FLEET = {
    "defaults": {"rolloutSeconds": 0.3},
    "clusters": [
        {"name": "plain", "role": "host", "version": "v1.32.2", "token": "plain-rw", "readonlyToken": "plain-ro"},
        {
            "name": "beta",
            "version": "v1.32.2",
            "token": "beta-rw",
            "readonlyToken": "beta-ro",
            "runtimeConfig": {"storage.k8s.io/v1beta1": True},
        },
        {"name": "old", "version": "v1.29.4", "token": "old-rw"},
    ],
}


@pytest.fixture(scope="module")
def pfleet(tmp_path_factory):
    running = start_fleet(PARITY_FLEET, workdir=tmp_path_factory.mktemp("parity-fleet"))
    yield running
    running.stop()


def call(
    fleet,
    cluster: str,
    method: str,
    path: str,
    body=None,
    *,
    token: str | None = None,
    ctype: str = "application/json",
    query: str = "",
) -> tuple[int, bytes, dict]:
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
    vac = {
        "apiVersion": "storage.k8s.io/v1beta1",
        "kind": "VolumeAttributesClass",
        "metadata": {"name": "fast"},
        "driverName": "csi.example.com",
    }
    status, raw, _ = call(pfleet, "beta", "POST", "/apis/storage.k8s.io/v1beta1/volumeattributesclasses", vac)
    assert status == 201, raw
    status, _, _ = call(pfleet, "plain", "POST", "/apis/storage.k8s.io/v1beta1/volumeattributesclasses", vac)
    assert status == 404


def test_runtime_config_in_the_fleet_file_is_checked():
    from clusters.simulator.fleet import FleetSpecError, parse_fleet

    spec = parse_fleet(
        {"clusters": [{"name": "a", "version": "v1.30.0", "runtimeConfig": "api/alpha=true,batch/v1=false"}]}
    )
    assert spec.clusters[0].runtime_config == {"api/alpha": True, "batch/v1": False}
    for bad in ({"not a key!": True}, {"api/beta": "maybe"}, ["api/beta"]):
        with pytest.raises(FleetSpecError):
            parse_fleet({"clusters": [{"name": "a", "version": "v1.30.0", "runtimeConfig": bad}]})


@pytest.mark.django_db
def test_switching_an_api_on_for_one_cluster_changes_its_compat_verdict(pfleet):
    """FedPortal reads each cluster's discovery with its inventory; the compatibility matrix and the
    preflight accept an apiVersion only where the cluster serves it."""
    from clusters.probing import probe_cluster
    from clusters.services import register_cluster
    from drift import selectors
    from drift.preflight import compat_preview_check
    from federation.models import FederatedType
    from federation.services import create_resource

    clusters = {}
    for name in ("plain", "beta"):
        clusters[name] = register_cluster(
            name=name,
            api_server=pfleet.url(name),
            role="host" if name == "plain" else "member",
            labels={},
            token=pfleet.token(name),
            insecure_skip_tls_verify=True,
            probe=False,
        )
        probe_cluster(clusters[name])
        clusters[name].refresh_from_db()
    assert "storage.k8s.io/v1beta1" in clusters["beta"].served_apis
    assert "storage.k8s.io/v1beta1" not in clusters["plain"].served_apis
    ftype, _ = FederatedType.objects.get_or_create(
        group="storage.k8s.io",
        kind="VolumeAttributesClass",
        defaults={"version": "v1beta1", "plural": "volumeattributesclasses", "scope": "Cluster"},
    )
    resource = create_resource(
        ftype, namespace="", name="fast", template={"driverName": "csi.example.com"}, placement={"clusterSelector": {}}
    )
    cells = selectors.compat_row(resource, selectors.fleet_rows())
    assert cells["beta"].status == "compatible"
    assert cells["plain"].status == "incompatible"
    assert cells["plain"].result.problems[0].code == "api_not_served"
    manifest = cells["beta"].manifest
    assert compat_preview_check(manifest, clusters["beta"]) == []
    [warning] = compat_preview_check(manifest, clusters["plain"])
    assert warning.startswith(
        "Incompatible with plain (v1.32.2): storage.k8s.io/v1beta1 VolumeAttributesClass "
        "exists in v1.32 but is not enabled on this cluster"
    )


# --- 8. Status error bodies, byte for byte ---------------------------------------------------------


def test_status_errors_have_the_apiservers_field_order_and_shape(pfleet):
    """k8s.io/apimachinery metav1.Status: fields kind, apiVersion, metadata, status, message, reason,
    details, code in that order; StatusDetails' group is omitempty (absent for the core group); the
    apiserver's JSON serializer (encoding/json Encoder) ends the body with a newline."""
    status, raw, _ = call(pfleet, "plain", "GET", "/api/v1/namespaces/default/configmaps/nope")
    assert status == 404
    assert raw == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"configmaps \\"nope\\" not found","reason":"NotFound",'
        b'"details":{"name":"nope","kind":"configmaps"},"code":404}\n'
    )
    status, raw, _ = call(pfleet, "plain", "GET", "/apis/apps/v1/namespaces/default/deployments/nope")
    assert raw == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"deployments.apps \\"nope\\" not found","reason":"NotFound",'
        b'"details":{"name":"nope","group":"apps","kind":"deployments"},"code":404}\n'
    )
    status, raw, _ = call(pfleet, "plain", "GET", "/api/v1/namespaces", token="wrong")
    assert status == 401
    assert raw == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"Unauthorized","reason":"Unauthorized","code":401}\n'
    )
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}
    status, raw, _ = call(pfleet, "plain", "POST", "/api/v1/namespaces/default/configmaps", bad)
    assert status == 422
    assert raw.endswith(
        b'"details":{"kind":"ConfigMap","causes":[{"reason":"FieldValueRequired",'
        b'"message":"Required value: name or generateName is required","field":"metadata.name"}]},'
        b'"code":422}\n'
    )


# --- 3. dry run ----------------------------------------------------------------------------------


def web_deployment(name: str, image: str = "nginx:1.25", replicas: int = 2) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": image}]},
            },
        },
    }


def wait_converged(fleet, cluster: str, name: str) -> dict:
    from tests.utils import wait_for

    path = f"/apis/apps/v1/namespaces/default/deployments/{name}"

    def done() -> bool:
        obj = get_json(fleet, cluster, path)
        status = obj.get("status", {})
        return status.get("updatedReplicas") == status.get("readyReplicas") == obj["spec"]["replicas"]

    wait_for(done, timeout=10, message="roll-out")
    return get_json(fleet, cluster, path)


@pytest.mark.parametrize(
    "ctype, status",
    [
        ("application/apply-patch+yaml", 201),
        ("application/apply-patch+yaml; charset=utf-8", 201),  # what FedPortal sends (clusters/kube.py)
        ("application/merge-patch+json;charset=utf-8", 404),  # a merge patch of nothing: NotFound
        ("application/yaml; charset=utf-8", 415),
    ],
)
def test_a_patch_types_parameters_are_dropped_before_its_type_is_read(pfleet, ctype, status):
    """The apiserver cuts the Content-Type at its first ";" before it reads the patch type
    (apiserver/pkg/endpoints/handlers/patch.go, "Remove "; charset=" if included in header")."""
    name = "-".join(re.findall(r"[a-z0-9]+", ctype))
    path = f"/api/v1/namespaces/default/configmaps/{name}"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}
    got, raw, _ = call(pfleet, "plain", "PATCH", path, body, ctype=ctype, query="fieldManager=t")
    assert got == status, raw
    if status == 201:
        assert get_json(pfleet, "plain", path)["data"] == {"k": "v"}


@pytest.mark.parametrize(
    "value, status",
    [
        ("\\ud83d\\ude00", 400),  # a surrogate pair, as an ASCII-only JSON encoder writes an emoji
        ("😀", 201),
        ("\\\\ud83d", 201),  # an escaped backslash, then the letters: no escape of a surrogate
        ("\x7f", 400),  # a raw DEL
        ("\\u007f", 201),
    ],
)
def test_an_apply_body_is_read_as_yaml_reads_it_even_when_it_is_json(pfleet, value, status):
    """JSON is YAML, and the apiserver reads an apply patch as YAML (go-yaml), which refuses a
    surrogate escape and a raw control character that a JSON parser would take."""
    name = f"yaml-{status}-{len(value)}-{ord(value[-1])}"
    body = f'{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"k":"{value}"}}}}'
    got, raw, _ = call(
        pfleet,
        "plain",
        "PATCH",
        f"/api/v1/namespaces/default/configmaps/{name}",
        body.encode(),
        ctype="application/apply-patch+yaml",
        query="fieldManager=t",
    )
    assert got == status, raw
    if status == 400:
        assert json.loads(raw)["reason"] == "BadRequest"
    else:
        assert get_json(pfleet, "plain", f"/api/v1/namespaces/default/configmaps/{name}")["data"]["k"] == json.loads(
            f'"{value}"'
        )


def test_a_dry_run_changes_nothing_but_what_the_request_changes(pfleet):
    """dryRun=All (what `kubectl diff` sends): the registry runs its strategy (the generation is
    bumped, the status is reset to the stored one: PrepareForUpdate) but nothing is stored and no
    controller sees it, so observedGeneration, replicas and the ReplicaSet named in the conditions
    stay as stored (apiserver/pkg/registry/rest/dryrun, pkg/registry/apps/deployment/strategy.go)."""
    path = "/apis/apps/v1/namespaces/default/deployments/dry"
    status, raw, _ = call(
        pfleet, "plain", "POST", "/apis/apps/v1/namespaces/default/deployments", web_deployment("dry")
    )
    assert status == 201, raw
    stored = wait_converged(pfleet, "plain", "dry")
    changed = web_deployment("dry", image="nginx:1.27", replicas=3)
    status, raw, _ = call(
        pfleet,
        "plain",
        "PATCH",
        path,
        changed,
        ctype="application/apply-patch+yaml",
        query="dryRun=All&fieldManager=kubectl&force=true",
    )
    assert status == 200, raw
    answer = json.loads(raw)
    assert answer["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert answer["spec"]["replicas"] == 3
    assert answer["metadata"]["generation"] == stored["metadata"]["generation"] + 1
    assert answer["status"] == stored["status"]
    assert answer["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert get_json(pfleet, "plain", path) == stored  # nothing persisted
    status, raw, _ = call(
        pfleet,
        "plain",
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        web_deployment("dry-new"),
        query="dryRun=All",
    )
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
    assert (
        call(pfleet, "plain", "POST", "/apis/apps/v1/namespaces/default/deployments", web_deployment("scaled"))[0]
        == 201
    )
    before = wait_converged(pfleet, "plain", "scaled")
    status, raw, _ = call(
        pfleet, "plain", "PATCH", path + "/scale", {"spec": {"replicas": 4}}, ctype="application/merge-patch+json"
    )
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


# --- 4. defaults on create -----------------------------------------------------------------------


def create(fleet, cluster: str, path: str, body: dict, **kw) -> tuple[int, dict]:
    status, raw, _ = call(fleet, cluster, "POST", path, body, **kw)
    return status, json.loads(raw)


def test_a_pod_is_created_pending_with_its_qos_class(pfleet):
    """pkg/registry/core/pod/strategy.go PrepareForCreate: status = {phase: Pending, qosClass};
    no generation before 1.33 (the pod strategy sets none)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"},
    }
    status, obj = create(pfleet, "plain", "/api/v1/namespaces/default/pods", pod)
    assert status == 201
    assert obj["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert "generation" not in obj["metadata"]  # 1.32: pods carry none


def test_service_defaults_and_allocations(pfleet):
    """SetDefaults_Service and the allocators: clusterIP from the service range, nodePorts in
    30000-32767 for NodePort/LoadBalancer, externalTrafficPolicy Cluster for those, internal
    policy, IP families, allocateLoadBalancerNodePorts, status.loadBalancer {}; no generation."""
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "lb"},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": "x"},
            "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}],
        },
    }
    status, obj = create(pfleet, "plain", "/api/v1/namespaces/default/services", svc)
    assert status == 201, obj
    spec = obj["spec"]
    import ipaddress

    assert ipaddress.ip_address(spec["clusterIP"]) in ipaddress.ip_network("10.96.0.0/12")
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    ports = [p["nodePort"] for p in spec["ports"]]
    assert all(30000 <= p <= 32767 for p in ports) and len(set(ports)) == 2
    assert (spec["externalTrafficPolicy"], spec["internalTrafficPolicy"]) == ("Cluster", "Cluster")
    assert (spec["ipFamilies"], spec["ipFamilyPolicy"]) == (["IPv4"], "SingleStack")
    assert spec["allocateLoadBalancerNodePorts"] is True and spec["sessionAffinity"] == "None"
    assert obj["status"] == {"loadBalancer": {}}
    assert "generation" not in obj["metadata"]
    plain = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "plain"}, "spec": {"ports": [{"port": 80}]}}
    status, obj = create(pfleet, "plain", "/api/v1/namespaces/default/services", plain)
    assert "externalTrafficPolicy" not in obj["spec"] and "nodePort" not in obj["spec"]["ports"][0]
    # a node port another Service holds: the apiserver's 422
    taken = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "taken"},
        "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": ports[0]}]},
    }
    status, err = create(pfleet, "plain", "/api/v1/namespaces/default/services", taken)
    assert status == 422
    assert err["message"] == (
        f'Service "taken" is invalid: spec.ports[0].nodePort: Invalid value: {ports[0]}: '
        "provided port is already allocated"
    )
    outside = {**taken, "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 8080}]}}
    status, err = create(pfleet, "plain", "/api/v1/namespaces/default/services", outside)
    assert status == 422 and err["message"].endswith(
        "Invalid value: 8080: provided port is not in the valid range. The range of valid ports is 30000-32767"
    )
    # an update leaving the allocated values out keeps them (patchAllocatedValues)
    path = "/api/v1/namespaces/default/services/lb"
    current = get_json(pfleet, "plain", path)
    current["spec"].pop("clusterIP"), current["spec"].pop("clusterIPs")
    for port in current["spec"]["ports"]:
        port.pop("nodePort")
    status, raw, _ = call(pfleet, "plain", "PUT", path, current)
    assert status == 200, raw
    kept = json.loads(raw)["spec"]
    assert kept["clusterIP"] == spec["clusterIP"] and [p["nodePort"] for p in kept["ports"]] == ports


def test_job_defaults_and_selector(pfleet):
    """SetDefaults_Job (backoffLimit 6, completions and parallelism 1, completionMode NonIndexed,
    suspend false) and the Job strategy's generated selector on the Job's uid."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}},
    }
    status, obj = create(pfleet, "plain", "/apis/batch/v1/namespaces/default/jobs", job)
    assert status == 201, obj
    spec, uid = obj["spec"], obj["metadata"]["uid"]
    assert (spec["backoffLimit"], spec["completions"], spec["parallelism"]) == (6, 1, 1)
    assert (spec["completionMode"], spec["suspend"]) == ("NonIndexed", False)
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert spec["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "j"
    assert obj["metadata"]["generation"] == 1


def test_every_namespace_has_a_default_service_account_and_the_root_ca(pfleet):
    """The service account controller and the root CA publisher (kube-controller-manager) put a
    `default` ServiceAccount and a `kube-root-ca.crt` ConfigMap in every namespace; ConfigMaps and
    Namespaces carry no generation."""
    for ns in ("default", "kube-system"):
        assert (
            get_json(pfleet, "plain", f"/api/v1/namespaces/{ns}/serviceaccounts/default")["metadata"]["name"]
            == "default"
        )
    status, made = create(pfleet, "plain", "/api/v1/namespaces", {"metadata": {"name": "fresh"}})
    assert status == 201 and "generation" not in made["metadata"]
    names = [i["metadata"]["name"] for i in get_json(pfleet, "plain", "/api/v1/namespaces/fresh/configmaps")["items"]]
    assert names == ["kube-root-ca.crt"]
    root = get_json(pfleet, "plain", "/api/v1/namespaces/fresh/configmaps/kube-root-ca.crt")
    assert "ca.crt" in root["data"] and "generation" not in root["metadata"]
    assert get_json(pfleet, "plain", "/api/v1/namespaces/fresh/serviceaccounts/default")["metadata"]["uid"]


@pytest.mark.django_db
def test_fedportal_retains_the_allocated_cluster_ip_and_node_ports(pfleet):
    """KubeFed's retained fields (pkg/controller/sync/dispatch/retain.go): a Service's clusterIP and
    nodePorts are the cluster's; a later propagation keeps the values the cluster allocated instead
    of asking for new ones (a different node port would be refused, a changed clusterIP too)."""
    from federation import propagation, services
    from federation.models import PropagatedVersion
    from tests.federation.factories import (
        drain,
        federate_namespace,
        ftype,
        register_fleet,
    )

    register_fleet(pfleet, ["beta"])
    drain(propagation.propagate_revision(federate_namespace("retain", ["beta"])))
    template = {"spec": {"type": "NodePort", "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}}
    resource = services.create_resource(
        ftype("Service"), namespace="retain", name="web", template=template, placement={"clusters": ["beta"]}
    )
    drain(propagation.propagate_revision(resource))
    first = pfleet.get_object("beta", "v1", "Service", "retain", "web")
    allocated_ip, allocated_port = first["spec"]["clusterIP"], first["spec"]["ports"][0]["nodePort"]
    assert allocated_ip.startswith("10.") and 30000 <= allocated_port <= 32767
    changed = {"spec": {**template["spec"], "ports": [{"name": "http", "port": 80}, {"name": "metrics", "port": 9090}]}}
    services.update_resource(resource, template=changed, placement={"clusters": ["beta"]})
    resource.refresh_from_db()
    drain(propagation.propagate_revision(resource))
    row = PropagatedVersion.objects.get(resource=resource, cluster__name="beta")
    assert row.status == "OK", row.status
    after = pfleet.get_object("beta", "v1", "Service", "retain", "web")
    assert after["spec"]["clusterIP"] == allocated_ip
    ports = {p["name"]: p["nodePort"] for p in after["spec"]["ports"]}
    assert ports["http"] == allocated_port and 30000 <= ports["metrics"] <= 32767 and ports["metrics"] != allocated_port


# --- 2. server-side apply field ownership ---------------------------------------------------------

CM = "/api/v1/namespaces/default/configmaps"


def apply(fleet, cluster: str, path: str, body: dict, manager: str, force: bool = False):
    query = f"fieldManager={manager}" + ("&force=true" if force else "")
    status, raw, _ = call(fleet, cluster, "PATCH", path, body, ctype="application/apply-patch+yaml", query=query)
    return status, json.loads(raw)


def entries(obj: dict) -> list[tuple]:
    return sorted(
        (e["manager"], e["operation"], e.get("subresource", ""), json.dumps(e["fieldsV1"], sort_keys=True))
        for e in obj["metadata"].get("managedFields") or []
    )


def test_an_apply_conflicts_with_the_same_managers_update(pfleet):
    """structured-merge-diff managers are identified by (manager, operation, subresource)
    (apiserver fieldmanager BuildManagerIdentifier): a field "mgr" set with an Update conflicts
    with an Apply by "mgr" that changes it; printManager names it `"mgr" using v1`."""
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "owned", "namespace": "default"},
        "data": {"a": "1"},
    }
    assert apply(pfleet, "plain", f"{CM}/owned", cm, "mgr")[0] == 201
    status, raw, _ = call(
        pfleet,
        "plain",
        "PATCH",
        f"{CM}/owned",
        {"data": {"x": "1"}},
        ctype="application/merge-patch+json",
        query="fieldManager=mgr",
    )
    assert status == 200, raw
    assert entries(json.loads(raw)) == [
        ("mgr", "Apply", "", '{"f:data": {"f:a": {}}}'),
        ("mgr", "Update", "", '{"f:data": {"f:x": {}}}'),
    ]
    status, err = apply(pfleet, "plain", f"{CM}/owned", {**cm, "data": {"a": "1", "x": "2"}}, "mgr")
    assert status == 409
    assert err["message"] == 'Apply failed with 1 conflict: conflict with "mgr" using v1: .data.x'
    # leaving the Update's field out of the apply keeps it: the Apply never owned it
    status, obj = apply(pfleet, "plain", f"{CM}/owned", cm, "mgr")
    assert status == 200 and obj["data"] == {"a": "1", "x": "1"}


def test_scale_then_server_side_apply_conflicts_on_replicas(pfleet):
    """A scale subresource write is recorded under its own entry (subresource "scale",
    apiVersion of the parent), so an apply that would revert replicas conflicts instead of
    silently undoing `kubectl scale`."""
    path = "/apis/apps/v1/namespaces/default/deployments/ssa-scaled"
    status, _ = apply(pfleet, "plain", path, web_deployment("ssa-scaled"), "deployer")
    assert status == 201
    status, raw, _ = call(
        pfleet,
        "plain",
        "PATCH",
        path + "/scale",
        {"spec": {"replicas": 5}},
        ctype="application/merge-patch+json",
        query="fieldManager=kubectl-scale",
    )
    assert status == 200, raw
    live = get_json(pfleet, "plain", path)
    scale_entry = [e for e in live["metadata"]["managedFields"] if e["manager"] == "kubectl-scale"]
    assert [(e["operation"], e["subresource"], e["apiVersion"], e["fieldsV1"]) for e in scale_entry] == [
        ("Update", "scale", "apps/v1", {"f:spec": {"f:replicas": {}}})
    ]
    status, err = apply(pfleet, "plain", path, web_deployment("ssa-scaled"), "deployer")
    assert status == 409
    assert err["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl-scale" with subresource '
        '"scale" using apps/v1: .spec.replicas'
    )
    assert get_json(pfleet, "plain", path)["spec"]["replicas"] == 5


def test_a_status_write_gets_its_own_entry(pfleet):
    """PUT/PATCH .../status changes the status alone and is recorded with subresource "status"."""
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "st"}, "spec": {"ports": [{"port": 80}]}}
    assert create(pfleet, "plain", "/api/v1/namespaces/default/services", svc)[0] == 201
    path = "/api/v1/namespaces/default/services/st/status"
    body = {"spec": {"ports": [{"port": 81}]}, "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}}
    status, raw, _ = call(
        pfleet, "plain", "PATCH", path, body, ctype="application/merge-patch+json", query="fieldManager=lb-controller"
    )
    assert status == 200, raw
    obj = json.loads(raw)
    assert obj["status"]["loadBalancer"]["ingress"] == [{"ip": "192.0.2.7"}]
    assert obj["spec"]["ports"][0]["port"] == 80  # the status strategy keeps the spec
    [entry] = [e for e in obj["metadata"]["managedFields"] if e["manager"] == "lb-controller"]
    assert (entry["operation"], entry["subresource"]) == ("Update", "status")
    assert entry["fieldsV1"] == {"f:status": {"f:loadBalancer": {"f:ingress": {}}}}


def test_client_written_managed_fields(pfleet):
    """The fieldmanager uses managedFields a client sends when they differ from the stored ones
    (kubectl's csaupgrade moves kubectl-client-side-apply's fields to its Apply entry this way);
    [] is ignored and [{}] strips them all; an apply may not carry any."""
    path = f"{CM}/migrated"
    status, raw, _ = call(
        pfleet,
        "plain",
        "POST",
        CM,
        {"metadata": {"name": "migrated"}, "data": {"a": "1", "b": "2"}},
        query="fieldManager=kubectl-client-side-apply",
    )
    assert status == 201, raw
    migrated = [
        {
            "manager": "kubectl",
            "operation": "Apply",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}, "f:b": {}}},
        }
    ]
    status, raw, _ = call(
        pfleet,
        "plain",
        "PATCH",
        path,
        [{"op": "replace", "path": "/metadata/managedFields", "value": migrated}],
        ctype="application/json-patch+json",
        query="fieldManager=kubectl",
    )
    assert status == 200, raw
    assert entries(json.loads(raw)) == [("kubectl", "Apply", "", '{"f:data": {"f:a": {}, "f:b": {}}}')]
    # kubectl now owns both as an applier: applying without b removes b
    status, obj = apply(
        pfleet,
        "plain",
        path,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "migrated"}, "data": {"a": "1"}},
        "kubectl",
    )
    assert status == 200 and obj["data"] == {"a": "1"}
    status, raw, _ = call(
        pfleet, "plain", "PATCH", path, {"metadata": {"managedFields": []}}, ctype="application/merge-patch+json"
    )
    assert entries(json.loads(raw)) == entries(obj)
    status, raw, _ = call(
        pfleet, "plain", "PATCH", path, {"metadata": {"managedFields": [{}]}}, ctype="application/merge-patch+json"
    )
    assert status == 200 and "managedFields" not in json.loads(raw)["metadata"]
    status, err = apply(
        pfleet,
        "plain",
        path,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "migrated", "managedFields": migrated}},
        "kubectl",
    )
    assert (status, err["message"]) == (400, "metadata.managedFields must be nil")


# --- 7. protobuf bodies, self reviews ----------------------------------------------------------


def pb_field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (wire type 2); lengths here stay under 128."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def pb_envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    """runtime.Unknown behind the k8s\\x00 magic (apimachinery runtime/serializer/protobuf)."""
    type_meta = pb_field(1, api_version.encode()) + pb_field(2, kind.encode())
    return b"k8s\x00" + pb_field(1, type_meta) + pb_field(2, raw)


def test_protobuf_bodies_are_decoded(pfleet):
    """k8s.io/api core/v1 generated.proto: Namespace{metadata=1}, ObjectMeta{name=1, labels=11
    (map entries key=1, value=2)}; authorization/v1 SelfSubjectAccessReview{spec=2
    {resourceAttributes=1 {namespace=1, verb=2, resource=5}}}."""
    meta = pb_field(1, b"raw-pb") + pb_field(11, pb_field(1, b"team") + pb_field(2, b"blue"))
    body = pb_envelope("v1", "Namespace", pb_field(1, meta))
    status, raw, _ = call(
        pfleet, "plain", "POST", "/api/v1/namespaces", body, ctype="application/vnd.kubernetes.protobuf"
    )
    assert status == 201, raw
    made = json.loads(raw)
    assert made["metadata"]["name"] == "raw-pb" and made["metadata"]["labels"]["team"] == "blue"
    attributes = pb_field(1, b"default") + pb_field(2, b"delete") + pb_field(5, b"pods")
    review = pb_envelope("authorization.k8s.io/v1", "SelfSubjectAccessReview", pb_field(2, pb_field(1, attributes)))
    answers = {}
    for token in ("plain-rw", "plain-ro"):
        status, raw, _ = call(
            pfleet,
            "plain",
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            review,
            ctype="application/vnd.kubernetes.protobuf",
            token=token,
        )
        assert status == 201, raw
        answers[token] = json.loads(raw)
    assert answers["plain-rw"]["status"]["allowed"] is True
    assert answers["plain-ro"]["status"] == {"allowed": False}
    assert answers["plain-ro"]["spec"]["resourceAttributes"] == {
        "namespace": "default",
        "verb": "delete",
        "resource": "pods",
    }
    status, raw, _ = call(
        pfleet, "plain", "POST", "/api/v1/namespaces", b"not protobuf", ctype="application/vnd.kubernetes.protobuf"
    )
    assert status == 400


def test_self_subject_rules_review_per_token(pfleet):
    path = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}}
    status, raw, _ = call(pfleet, "plain", "POST", path, body, token="plain-ro")
    assert status == 201, raw
    assert json.loads(raw)["status"]["resourceRules"] == [
        {"verbs": ["get", "list", "watch"], "apiGroups": ["*"], "resources": ["*"]}
    ]
