"""The scale subresource: an autoscaling/v1 Scale over a Deployment's (StatefulSet's, ...) replicas."""

import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from tests.simulator.conftest import deployment


@pytest.fixture
def web(api):
    c = api("m127")
    apps = client.AppsV1Api(c)
    apps.create_namespaced_deployment("default", deployment("scaled", replicas=2))
    yield c, apps
    apps.delete_namespaced_deployment("scaled", "default")


def test_reading_the_scale(web):
    _, apps = web
    scale = apps.read_namespaced_deployment_scale("scaled", "default")
    assert scale.spec.replicas == 2 and scale.status.selector == "app=scaled"
    assert scale.metadata.name == "scaled" and scale.metadata.resource_version


def test_patching_the_scale_scales_the_deployment_with_a_new_generation(web):
    _, apps = web
    before = apps.read_namespaced_deployment("scaled", "default")
    scale = apps.patch_namespaced_deployment_scale("scaled", "default", {"spec": {"replicas": 5}})
    assert scale.spec.replicas == 5
    after = apps.read_namespaced_deployment("scaled", "default")
    assert after.spec.replicas == 5 and after.metadata.generation == before.metadata.generation + 1
    managers = {(e.manager, e.operation) for e in after.metadata.managed_fields}
    assert any(op == "Update" for _, op in managers)


def test_replacing_the_scale_checks_its_resource_version(web):
    _, apps = web
    scale = apps.read_namespaced_deployment_scale("scaled", "default")
    scale.spec.replicas = 3
    assert apps.replace_namespaced_deployment_scale("scaled", "default", scale).spec.replicas == 3
    scale.spec.replicas = 4  # the same, now stale, resourceVersion
    with pytest.raises(ApiException) as stale:
        apps.replace_namespaced_deployment_scale("scaled", "default", scale)
    assert stale.value.status == 409
    assert apps.read_namespaced_deployment("scaled", "default").spec.replicas == 3


@pytest.mark.parametrize(
    "patch,status",
    [
        ({"spec": {"replicas": -1}}, 422),
        ({"spec": {"replicas": "two"}}, 422),
        ({"kind": "Deployment"}, 400),
        ({"spec": "x"}, 400),
        ({"metadata": {"name": "another"}}, 400),
        ({"metadata": {"resourceVersion": 7}}, 400),
    ],
)
def test_a_bad_scale_changes_nothing(web, patch, status):
    _, apps = web
    with pytest.raises(ApiException) as bad:
        apps.patch_namespaced_deployment_scale("scaled", "default", patch)
    body = json.loads(bad.value.body)
    assert bad.value.status == status and body["kind"] == "Status"
    if status == 422:
        assert body["details"]["kind"] == "Scale" and body["details"]["causes"][0]["field"] == "spec.replicas"
    assert apps.read_namespaced_deployment("scaled", "default").spec.replicas == 2


def test_discovery_lists_the_scale_subresource_and_others_have_none(api):
    c = api("m127")
    resources = {r.name: r for r in client.AppsV1Api(c).get_api_resources().resources}
    assert resources["deployments/scale"].kind == "Scale" and resources["deployments/scale"].group == "autoscaling"
    assert "statefulsets/scale" in resources and "daemonsets/scale" not in resources
    with pytest.raises(ApiException) as none:
        c.call_api(
            "/apis/apps/v1/namespaces/default/daemonsets/x/scale",
            "GET",
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
    assert none.value.status == 404


def test_the_read_only_token_cannot_scale(api):
    apps = client.AppsV1Api(api("host"))
    apps.create_namespaced_deployment("default", deployment("ro-scaled", replicas=1))
    try:
        readonly = client.AppsV1Api(api("host", token="host-ro"))
        assert readonly.read_namespaced_deployment_scale("ro-scaled", "default").spec.replicas == 1
        with pytest.raises(ApiException) as forbidden:
            readonly.patch_namespaced_deployment_scale("ro-scaled", "default", {"spec": {"replicas": 3}})
        assert forbidden.value.status == 403
        assert apps.read_namespaced_deployment("ro-scaled", "default").spec.replicas == 1
    finally:
        apps.delete_namespaced_deployment("ro-scaled", "default")
