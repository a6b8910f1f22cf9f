"""Property: whatever a client sends, the simulator answers like an apiserver (JSON, no 5xx)."""

import json
import urllib.error
import urllib.request

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SPEC_KEYS = [
    "replicas",
    "selector",
    "template",
    "matchLabels",
    "metadata",
    "spec",
    "containers",
    "name",
    "image",
    "ports",
    "containerPort",
    "env",
    "value",
    "initContainers",
    "restartPolicy",
    "$patch",
    "strategy",
    "labels",
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(SPEC_KEYS + ["kind", "apiVersion", "data", "status", "x"]) | st.text(max_size=6),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)

PATHS = [
    "/api/v1/namespaces/default/configmaps",
    "/api/v1/namespaces/default/configmaps/fz",
    "/apis/apps/v1/namespaces/default/deployments",
    "/apis/apps/v1/namespaces/default/deployments/fz",
    "/api/v1/namespaces",
    "/api/v1/namespaces/fz",
    "/api/v1/nodes/host-node-1",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles/fz",
]
CTYPES = [
    "application/json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
    "application/apply-patch+yaml",
    "application/yaml",
]


def _body(value, garbage, wrap, path):
    if garbage is not None:
        return garbage
    if wrap:  # a plausible object whose spec is random, to reach merging and validation
        kind = "Deployment" if "deployments" in path else "ConfigMap"
        api_version = "apps/v1" if kind == "Deployment" else "v1"
        value = {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"name": "fz", "labels": {"a": "b"}},
            ("spec" if kind == "Deployment" else "data"): value,
        }
    return json.dumps(value).encode()


SEEDS = [
    (
        "/apis/apps/v1/namespaces/default/deployments",
        {
            "metadata": {"name": "fz"},
            "spec": {
                "selector": {"matchLabels": {"a": "b"}},
                "template": {
                    "metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 1}]}]},
                },
            },
        },
    ),
    ("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "fz"}, "data": {"a": "b"}}),
    ("/api/v1/namespaces", {"metadata": {"name": "fz"}}),
]


def _seed(sim):
    for path, body in SEEDS:
        req = urllib.request.Request(
            sim.url("host") + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {sim.token('host')}"},
        )
        try:
            urllib.request.urlopen(req, timeout=10).read()
        except urllib.error.HTTPError as exc:
            assert exc.code == 409


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.sampled_from(PATHS),
    method=st.sampled_from(["POST", "PUT", "PATCH", "DELETE", "GET"]),
    ctype=st.sampled_from(CTYPES),
    value=json_values,
    garbage=st.none() | st.binary(max_size=40),
    wrap=st.booleans(),
    query=st.sampled_from(
        [
            "",
            "?fieldManager=fz",
            "?fieldManager=fz&force=true",
            "?fieldValidation=Strict",
            "?dryRun=All",
            "?labelSelector=a%3Db",
            "?limit=1",
            "?continue=%%%",
        ]
    ),
)
def test_no_request_makes_the_simulator_fail(sim, path, method, ctype, value, garbage, wrap, query):
    _seed(sim)
    data = None if method == "GET" else _body(value, garbage, wrap, path)
    req = urllib.request.Request(
        sim.url("host") + path + query,
        data=data,
        method=method,
        headers={"Content-Type": ctype, "Authorization": f"Bearer {sim.token('host')}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            status, payload = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, payload = exc.code, exc.read()
    assert status < 500, payload
    doc = json.loads(payload)
    if status >= 400:
        assert doc["kind"] == "Status" and doc["code"] == status and doc["message"]
