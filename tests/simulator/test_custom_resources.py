"""A CustomResourceDefinition makes its kind served (discovery, CRUD, merge patch, apply)."""

import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


def test_crd_serves_its_kind_until_deleted(api):
    c = api("m128")
    ext = client.ApiextensionsV1Api(c)
    created = ext.create_custom_resource_definition(CRD)
    assert {cond.type for cond in created.status.conditions} >= {"Established", "NamesAccepted"}
    groups = {g.name for g in client.ApisApi(c).get_api_versions().groups}
    assert "example.com" in groups
    custom = client.CustomObjectsApi(c)
    widget = custom.create_namespaced_custom_object(
        "example.com",
        "v1",
        "default",
        "widgets",
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}},
    )
    assert widget["metadata"]["generation"] == 1
    patched = custom.patch_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", "w1", {"spec": {"size": 4}}
    )
    assert patched["spec"]["size"] == 4 and patched["metadata"]["generation"] == 2
    listed = custom.list_namespaced_custom_object("example.com", "v1", "default", "widgets")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["w1"]
    ext.delete_custom_resource_definition("widgets.example.com")
    with pytest.raises(ApiException) as exc:
        custom.list_namespaced_custom_object("example.com", "v1", "default", "widgets")
    assert exc.value.status == 404
    assert "example.com" not in {g.name for g in client.ApisApi(c).get_api_versions().groups}


def test_crd_is_validated_against_the_apiextensions_schema(api):
    bad = json.loads(json.dumps(CRD))
    bad["metadata"]["name"] = "gadgets.example.com"
    bad["spec"]["names"]["bogus"] = True
    with pytest.raises(ApiException) as exc:
        client.ApiextensionsV1Api(api("m128")).create_custom_resource_definition(bad, field_validation="Strict")
    assert exc.value.status == 400 and "spec.names.bogus" in exc.value.body
