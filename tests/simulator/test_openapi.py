"""OpenAPI v3 (/openapi/v3 and per group-version): the operations of every served kind with their
query parameters, which is how kubectl learns that the server validates fields itself."""
import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from tests.simulator.test_custom_resources import CRD


def get(c: client.ApiClient, path: str) -> dict:
    response = c.call_api(path, "GET", header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
                          _preload_content=False, _return_http_data_only=True)
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
    assert {p["name"] for p in patch["parameters"] if p["in"] == "query"} >= {"fieldValidation", "fieldManager", "force", "dryRun"}
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
