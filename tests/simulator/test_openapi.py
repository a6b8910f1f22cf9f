"""OpenAPI v3 (/openapi/v3 and per group-version): the operations of every served kind with their
query parameters, which is how kubectl learns that the server validates fields itself, and the
kinds' schemas (kubectl explain, strategic merge patches)."""

import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from tests.simulator.test_custom_resources import CRD


def get(c: client.ApiClient, path: str) -> dict:
    response = c.call_api(
        path,
        "GET",
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    return json.loads(response.data)


def test_index_lists_each_group_version_with_a_hashed_url(api):
    index = get(api("m127"), "/openapi/v3")["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/batch/v1"} <= set(index)
    assert index["apis/apps/v1"]["serverRelativeURL"].startswith("/openapi/v3/apis/apps/v1?hash=")
    assert "apis/policy/v1beta1" not in index, "removed in v1.25: not served by a v1.27 cluster"


def test_group_version_document_has_the_patch_operation_with_field_validation(api):
    c = api("m127")
    url = get(c, "/openapi/v3")["paths"]["apis/apps/v1"]["serverRelativeURL"]
    doc = get(c, url.split("?")[0])
    assert doc["openapi"].startswith("3.") and doc["info"]["version"] == "v1.27.0"
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert {p["name"] for p in patch["parameters"] if p["in"] == "query"} >= {
        "fieldValidation",
        "fieldManager",
        "force",
        "dryRun",
    }
    create = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"]["post"]
    assert "fieldValidation" in {p["name"] for p in create["parameters"]}
    nodes = get(c, "/openapi/v3/api/v1")["paths"]["/api/v1/nodes/{name}"]
    assert nodes["get"]["x-kubernetes-group-version-kind"]["kind"] == "Node"


def test_unknown_group_version_is_404_and_the_documents_need_a_token(api):
    with pytest.raises(ApiException) as missing:
        get(api("m127"), "/openapi/v3/apis/nope.example.com/v1")
    assert missing.value.status == 404
    with pytest.raises(ApiException) as anonymous:
        get(api("m127", token=None), "/openapi/v3")
    assert anonymous.value.status == 401


def test_a_crd_adds_its_group_version_until_deleted(api):
    c = api("m131")
    ext = client.ApiextensionsV1Api(c)
    ext.create_custom_resource_definition(CRD)
    try:
        assert "apis/example.com/v1" in get(c, "/openapi/v3")["paths"]
        paths = get(c, "/openapi/v3/apis/example.com/v1")["paths"]
        patch = paths["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"]
        assert patch["x-kubernetes-group-version-kind"]["kind"] == "Widget"
    finally:
        ext.delete_custom_resource_definition("widgets.example.com")
    assert "apis/example.com/v1" not in get(c, "/openapi/v3")["paths"]


def _refs(node, found):
    if isinstance(node, dict):
        if "$ref" in node:
            found.add(node["$ref"])
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)
    return found


def _types(node, found):
    if isinstance(node, dict):
        if isinstance(node.get("type"), (str, list)):
            found.append(node["type"])
        for key, value in node.items():
            if key != "properties":
                _types(value, found)
        for value in (node.get("properties") or {}).values():
            _types(value, found)
    elif isinstance(node, list):
        for value in node:
            _types(value, found)
    return found


def test_group_version_document_carries_the_kinds_schemas_as_openapi_3(api):
    doc = get(api("m127"), "/openapi/v3/apis/apps/v1")
    components = doc["components"]["schemas"]
    deployment = components["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [{"group": "apps", "kind": "Deployment", "version": "v1"}]
    assert deployment["description"].startswith("Deployment enables declarative updates")
    assert deployment["properties"]["spec"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}
    ]
    containers = components["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name" and containers["x-kubernetes-patch-strategy"] == "merge"
    assert components["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
    # every reference resolves inside the document, every type is one OpenAPI 3.0 type
    refs = _refs(doc["components"], set())
    assert refs and {r.rsplit("/", 1)[-1] for r in refs} <= set(components)
    assert all(r.startswith("#/components/schemas/") for r in refs)
    assert set(_types(doc["components"], [])) <= {"object", "string", "integer", "number", "boolean", "array"}


def test_a_group_version_document_holds_only_the_schemas_it_needs(api):
    flow = get(api("m127"), "/openapi/v3/apis/flowcontrol.apiserver.k8s.io/v1beta3")["components"]["schemas"]
    assert "io.k8s.api.flowcontrol.v1beta3.FlowSchema" in flow
    assert not any(name.startswith("io.k8s.api.apps.") for name in flow)  # only what the group-version needs
