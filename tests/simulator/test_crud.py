"""CRUD, lists, metadata, conflicts and patches through the official kubernetes client."""

import base64
import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from tests.simulator.conftest import deployment
from tests.utils import wait_for


@pytest.fixture
def ns(api):
    core = client.CoreV1Api(api("host"))
    name = f"crud-{id(core) % 100000}"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    try:
        core.delete_namespace(name)
    except ApiException:
        pass


def test_create_get_list_delete_configmap(api, ns):
    core = client.CoreV1Api(api("host"))
    created = core.create_namespaced_config_map(
        ns, {"metadata": {"name": "cfg", "labels": {"tier": "a"}}, "data": {"k": "v"}}
    )
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert created.metadata.resource_version
    got = core.read_namespaced_config_map("cfg", ns)
    assert got.data == {"k": "v"} and got.metadata.labels == {"tier": "a"}
    core.create_namespaced_config_map(ns, {"metadata": {"name": "other", "labels": {"tier": "b"}}})
    assert [i.metadata.name for i in core.list_namespaced_config_map(ns, label_selector="tier=a").items] == ["cfg"]
    assert [i.metadata.name for i in core.list_namespaced_config_map(ns, label_selector="tier in (a,b)").items] == [
        "cfg",
        "other",
    ]
    assert [i.metadata.name for i in core.list_namespaced_config_map(ns, label_selector="tier!=a").items] == [
        "kube-root-ca.crt",
        "other",
    ]  # != also selects objects without the label, as the root CA ConfigMap
    status = core.delete_namespaced_config_map("cfg", ns)
    assert status.status == "Success"
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("cfg", ns)
    assert exc.value.status == 404
    body = json.loads(exc.value.body)
    assert body["kind"] == "Status" and body["reason"] == "NotFound" and 'configmaps "cfg" not found' in body["message"]


def test_resource_version_increases_and_generation_follows_spec_only(api, ns):
    apps = client.AppsV1Api(api("host"))
    d = apps.create_namespaced_deployment(ns, deployment("web"))
    assert d.metadata.generation == 1
    rv1 = int(d.metadata.resource_version)
    d2 = apps.patch_namespaced_deployment("web", ns, {"metadata": {"labels": {"app": "web", "x": "y"}}})
    assert int(d2.metadata.resource_version) > rv1
    assert d2.metadata.generation == 1
    d3 = apps.patch_namespaced_deployment("web", ns, {"spec": {"replicas": 4}})
    assert d3.metadata.generation == 2 and int(d3.metadata.resource_version) > int(d2.metadata.resource_version)
    assert d3.metadata.uid == d.metadata.uid and d3.metadata.labels["x"] == "y"
    # a Deployment's annotations move its generation too (copied to its ReplicaSets: the apps
    # registry strategy's PrepareForUpdate); a ConfigMap has no generation at all
    d4 = apps.patch_namespaced_deployment("web", ns, {"metadata": {"annotations": {"team": "blue"}}})
    assert d4.metadata.generation == 3


def test_create_existing_name_is_409_already_exists(api, ns):
    core = client.CoreV1Api(api("host"))
    core.create_namespaced_service_account(ns, {"metadata": {"name": "robot"}})
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_service_account(ns, {"metadata": {"name": "robot"}})
    assert exc.value.status == 409
    assert json.loads(exc.value.body)["reason"] == "AlreadyExists"


def test_update_with_stale_resource_version_is_409_conflict(api, ns):
    core = client.CoreV1Api(api("host"))
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    cm.data = {"a": "2"}
    updated = core.replace_namespaced_config_map("c", ns, cm)
    assert updated.data == {"a": "2"}
    cm.data = {"a": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as exc:
        core.replace_namespaced_config_map("c", ns, cm)
    body = json.loads(exc.value.body)
    assert exc.value.status == 409 and body["reason"] == "Conflict" and "has been modified" in body["message"]


def test_namespaced_object_needs_its_namespace(api):
    with pytest.raises(ApiException) as exc:
        client.CoreV1Api(api("host")).create_namespaced_secret("nope", {"metadata": {"name": "s"}})
    assert exc.value.status == 404 and 'namespaces "nope" not found' in json.loads(exc.value.body)["message"]


def test_missing_required_field_is_422_invalid(api, ns):
    bad = deployment("broken")
    del bad["spec"]["selector"]
    with pytest.raises(ApiException) as exc:
        client.AppsV1Api(api("host")).create_namespaced_deployment(ns, bad)
    body = json.loads(exc.value.body)
    assert exc.value.status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "spec.selector"


def test_missing_name_is_422(api, ns):
    with pytest.raises(ApiException) as exc:
        client.CoreV1Api(api("host")).create_namespaced_config_map(ns, {"metadata": {}})
    assert exc.value.status == 422


def test_strategic_merge_patch_merges_containers_by_name(api, ns):
    apps = client.AppsV1Api(api("host"))
    body = deployment("smp")
    body["spec"]["template"]["spec"]["containers"].append({"name": "log", "image": "fluentbit:2"})
    apps.create_namespaced_deployment(ns, body)
    patched = apps.patch_namespaced_deployment(
        "smp",
        ns,
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "web", "image": "nginx:1.27", "env": [{"name": "A", "value": "1"}]}]
                    }
                }
            }
        },
    )
    containers = {c.name: c for c in patched.spec.template.spec.containers}
    assert set(containers) == {"web", "log"}
    assert containers["web"].image == "nginx:1.27" and containers["web"].ports[0].container_port == 80
    assert containers["web"].env[0].name == "A"


def test_json_merge_patch_replaces_lists(api, ns):
    c = api("host")
    apps = client.AppsV1Api(c)
    apps.create_namespaced_deployment(ns, deployment("jmp"))
    data, status, _ = c.call_api(
        f"/apis/apps/v1/namespaces/{ns}/deployments/jmp",
        "PATCH",
        header_params={"Content-Type": "application/merge-patch+json", "Accept": "application/json"},
        body={"spec": {"template": {"spec": {"containers": [{"name": "other", "image": "redis:7"}]}}}},
        auth_settings=["BearerToken"],
        response_type="V1Deployment",
        _return_http_data_only=False,
    )
    assert status == 200
    assert [c.name for c in data.spec.template.spec.containers] == ["other"]


def test_services_secrets_and_cluster_scoped_objects(api, ns):
    c = api("m131")
    core = client.CoreV1Api(c)
    core.create_namespace({"metadata": {"name": ns}})
    svc = core.create_namespaced_service(
        ns, {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}
    )
    assert svc.spec.cluster_ip and svc.spec.ports[0].protocol == "TCP"
    secret = core.create_namespaced_secret(
        ns, {"metadata": {"name": "s"}, "data": {"p": "b2xk", "q": "cQ=="}, "stringData": {"p": "x"}}
    )
    # kube-apiserver merges write-only stringData into data (its keys winning) and never returns it
    assert secret.metadata.name == "s" and secret.data == {"p": "eA==", "q": "cQ=="} and secret.string_data is None
    assert core.read_namespaced_secret("s", ns).data == {"p": "eA==", "q": "cQ=="}
    rbac = client.RbacAuthorizationV1Api(c)
    role = rbac.create_cluster_role(
        {"metadata": {"name": f"{ns}-reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    )
    assert role.metadata.namespace is None
    assert any(r.metadata.name == f"{ns}-reader" for r in rbac.list_cluster_role().items)
    answered = json.loads(core.delete_namespace(ns, _preload_content=False).data)
    # the namespace registry answers the Namespace Terminating, even when it is gone at once
    assert answered["kind"] == "Namespace" and answered["status"]["phase"] == "Terminating"
    assert answered["metadata"]["name"] == ns and answered["metadata"]["deletionTimestamp"]
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_service("web", ns)
    assert exc.value.status == 404


def test_nodes_are_read_only(api):
    core = client.CoreV1Api(api("host"))
    node = core.list_node().items[0].metadata.name
    with pytest.raises(ApiException) as exc:
        core.patch_node(node, {"metadata": {"labels": {"x": "y"}}})
    assert exc.value.status == 405


def test_list_all_namespaces(api, ns):
    apps = client.AppsV1Api(api("host"))
    apps.create_namespaced_deployment(ns, deployment("everywhere"))
    names = [(d.metadata.namespace, d.metadata.name) for d in apps.list_deployment_for_all_namespaces().items]
    assert (ns, "everywhere") in names


def test_list_pages_with_limit_and_continue(api, ns):
    core = client.CoreV1Api(api("host"))
    for i in range(5):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"page-{i}", "labels": {"paged": "yes"}}})
    first = core.list_namespaced_config_map(ns, limit=2, label_selector="paged")
    assert [i.metadata.name for i in first.items] == ["page-0", "page-1"]
    # remainingItemCount only for a list without selectors (the apiserver cannot count a filtered rest)
    assert first.metadata._continue and first.metadata.remaining_item_count is None
    assert core.list_namespaced_config_map(ns, limit=2).metadata.remaining_item_count >= 3
    # an object the first page served goes, another comes: the next page starts after the last one
    # served (nothing skipped), and answers the first page's resourceVersion, the one to watch from
    core.delete_namespaced_config_map("page-0", ns)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "page-5", "labels": {"paged": "yes"}}})
    rest = core.list_namespaced_config_map(ns, limit=10, _continue=first.metadata._continue, label_selector="paged")
    assert [i.metadata.name for i in rest.items] == ["page-2", "page-3", "page-4", "page-5"]
    assert not rest.metadata._continue and rest.metadata.resource_version == first.metadata.resource_version
    with pytest.raises(ApiException) as forged:
        core.list_namespaced_config_map(ns, limit=2, _continue="MTA=")  # an offset, as tokens once were
    assert forged.value.status == 400
    with pytest.raises(ApiException) as pinned:
        core.list_namespaced_config_map(ns, limit=2, _continue=first.metadata._continue, resource_version="5")
    assert pinned.value.status == 400 and "not allowed when using continue" in pinned.value.body
    for state in ({"rv": 1e999, "start": ["a", "b"]}, {"rv": 0, "start": ["a", "b"]}):
        token = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
        with pytest.raises(ApiException) as bad:
            core.list_namespaced_config_map(ns, limit=2, _continue=token)
        assert bad.value.status == 400 and "invalid continue token" in bad.value.body


def test_delete_collection_by_label(api, ns):
    core = client.CoreV1Api(api("host"))
    for i, tier in enumerate(["a", "a", "b"]):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"dc-{i}", "labels": {"tier": tier}}})
    core.delete_collection_namespaced_config_map(ns, label_selector="tier=a")
    assert [c.metadata.name for c in core.list_namespaced_config_map(ns).items] == ["dc-2", "kube-root-ca.crt"]


def test_generate_name(api, ns):
    cm = client.CoreV1Api(api("host")).create_namespaced_config_map(ns, {"metadata": {"generateName": "gen-"}})
    assert cm.metadata.name.startswith("gen-") and len(cm.metadata.name) > 4


def test_system_namespaces_cannot_be_deleted(api):
    with pytest.raises(ApiException) as exc:
        client.CoreV1Api(api("host")).delete_namespace("kube-system")
    assert exc.value.status == 403


def test_strategic_merge_patch_directives(api, ns):
    c = api("host")
    apps = client.AppsV1Api(c)
    apps.create_namespaced_deployment(ns, deployment("directives"))
    patch = {"metadata": {"finalizers": ["a/b", "c/d"]}}
    apps.patch_namespaced_deployment("directives", ns, patch)
    patched = apps.patch_namespaced_deployment(
        "directives",
        ns,
        {
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a/b"]},
            "spec": {
                "strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": None},
                "template": {
                    "spec": {
                        "$setElementOrder/containers": [{"name": "web"}],
                        "containers": [{"name": "web", "image": "nginx:1.28"}],
                    }
                },
            },
        },
    )
    assert patched.metadata.finalizers == ["c/d"]
    assert patched.spec.strategy.type == "Recreate" and patched.spec.strategy.rolling_update is None
    assert patched.spec.template.spec.containers[0].image == "nginx:1.28"


def test_a_deleted_namespace_is_terminating_until_its_content_is_gone(fleet_factory):
    """As the namespace registry and controller do it: the DELETE answers the Namespace Terminating
    (a deletionTimestamp, no grace period); its content is deleted; new content is refused
    (NamespaceLifecycle, 403 with its cause, before the object is validated); a PUT of the Namespace
    read before the DELETE, or an apply of it, neither clears the deletion nor its finalizers; a second
    DELETE answers it again; then it is gone."""
    from tests.simulator.conftest import make_client

    fleet = fleet_factory(
        {"defaults": {"namespaceDeletionSeconds": 5}, "clusters": [{"name": "c", "version": "v1.30.1"}]}
    )
    c = make_client(fleet, "c")
    core = client.CoreV1Api(c)
    core.create_namespace({"metadata": {"name": "going"}})
    core.create_namespaced_config_map("going", {"metadata": {"name": "old"}, "data": {"a": "1"}})
    before = core.read_namespace("going")
    answered = json.loads(core.delete_namespace("going", _preload_content=False).data)
    assert answered["kind"] == "Namespace" and answered["status"]["phase"] == "Terminating"
    assert answered["metadata"]["deletionTimestamp"] and "deletionGracePeriodSeconds" not in answered["metadata"]
    assert core.list_namespaced_config_map("going").items == []
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map("going", {"metadata": {"name": "new"}, "data": {"a": 1}})  # 422 otherwise
    body = json.loads(refused.value.body)
    assert refused.value.status == 403 and body["message"] == (
        'configmaps "new" is forbidden: unable to create new content in namespace going because it is being terminated'
    )
    assert body["details"]["causes"] == [
        {
            "reason": "NamespaceTerminating",
            "message": "namespace going is being terminated",
            "field": "metadata.namespace",
        }
    ]
    before.spec.finalizers = []
    before.metadata.resource_version = None
    core.replace_namespace("going", before)
    c.call_api(
        "/api/v1/namespaces/going",
        "PATCH",
        query_params=[("fieldManager", "t"), ("force", "true")],
        header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "going", "labels": {"team": "a"}}},
        auth_settings=["BearerToken"],
        _preload_content=False,
    )
    still = json.loads(core.read_namespace("going", _preload_content=False).data)
    assert still["status"]["phase"] == "Terminating" and still["metadata"]["deletionTimestamp"]
    assert still["spec"]["finalizers"] == ["kubernetes"] and still["metadata"]["labels"]["team"] == "a"
    again = json.loads(core.delete_namespace("going", _preload_content=False).data)
    assert again["metadata"]["deletionTimestamp"] == answered["metadata"]["deletionTimestamp"]
    wait_for(lambda: _gone(core, "going"), timeout=20)
    c.close()


def _gone(core, name: str) -> bool:
    try:
        core.read_namespace(name)
    except ApiException as exc:
        return exc.status == 404
    return False
