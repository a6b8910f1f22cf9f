import pytest

from federation.diffs import diff_desired_live, diff_objects, strip_server_fields, unified_yaml_diff
from federation.overrides import OverrideError, normalize_overrides
from federation.rendering import (
    MANAGED_LABEL,
    REVISION_ANNOTATION,
    TargetType,
    content_hash,
    override_hash,
    render_manifest,
)

DEPLOYMENT = TargetType("apps/v1", "Deployment", True)
TEMPLATE = {
    "metadata": {"name": "ignored", "namespace": "ignored", "labels": {"app": "web"}, "resourceVersion": "9"},
    "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
    "status": {"readyReplicas": 3},
}


def render(**kw):
    args = dict(target=DEPLOYMENT, template=TEMPLATE, namespace="shop", name="web", cluster="c1", revision=7)
    args.update(kw)
    return render_manifest(**args)


def test_identity_labels_and_annotation_are_ours():
    manifest = render()
    assert manifest["apiVersion"] == "apps/v1" and manifest["kind"] == "Deployment"
    assert manifest["metadata"]["name"] == "web" and manifest["metadata"]["namespace"] == "shop"
    assert manifest["metadata"]["labels"] == {"app": "web", MANAGED_LABEL: "true"}
    assert manifest["metadata"]["annotations"] == {REVISION_ANNOTATION: "7"}
    assert "status" not in manifest and "resourceVersion" not in manifest["metadata"]


def test_cluster_scoped_types_have_no_namespace():
    manifest = render(target=TargetType("v1", "Namespace", False), template={}, name="shop")
    assert "namespace" not in manifest["metadata"]


def test_overrides_then_scheduled_replicas():
    overrides = normalize_overrides(
        [
            {
                "clusterName": "c1",
                "clusterOverrides": [{"path": "/spec/template/spec/containers/0/image", "value": "nginx:1.25"}],
            }
        ]
    )
    manifest = render(overrides=overrides, replicas=4)
    assert manifest["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
    assert manifest["spec"]["replicas"] == 4
    assert render(overrides=overrides, cluster="c2")["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx"


def test_bad_override_raises_with_cluster():
    overrides = normalize_overrides(
        [{"clusterName": "c1", "clusterOverrides": [{"path": "/spec/paused", "value": True}]}]
    )
    with pytest.raises(OverrideError, match="c1"):
        render(overrides=overrides)


def test_service_cluster_ip_and_node_ports_are_retained_from_live():
    target = TargetType("v1", "Service", True)
    template = {"spec": {"type": "NodePort", "ports": [{"name": "http", "port": 80}]}}
    live = {
        "spec": {
            "clusterIP": "10.0.0.7",
            "clusterIPs": ["10.0.0.7"],
            "ports": [{"name": "http", "port": 80, "nodePort": 30080}],
        }
    }
    manifest = render(target=target, template=template, live=live)
    assert manifest["spec"]["clusterIP"] == "10.0.0.7"
    assert manifest["spec"]["ports"][0]["nodePort"] == 30080
    assert "clusterIP" not in render(target=target, template=template)["spec"]


def test_job_selector_retained_unless_manual():
    target = TargetType("batch/v1", "Job", True)
    live = {
        "spec": {
            "selector": {"matchLabels": {"controller-uid": "u"}},
            "template": {"metadata": {"labels": {"controller-uid": "u"}}},
        }
    }
    manifest = render(target=target, template={"spec": {"template": {"metadata": {"labels": {"app": "x"}}}}}, live=live)
    assert manifest["spec"]["selector"] == {"matchLabels": {"controller-uid": "u"}}
    assert manifest["spec"]["template"]["metadata"]["labels"] == {"controller-uid": "u", "app": "x"}
    manual = render(target=target, template={"spec": {"manualSelector": True}}, live=live)
    assert "selector" not in manual["spec"]


def test_service_account_secrets_retained():
    manifest = render(target=TargetType("v1", "ServiceAccount", True), template={}, live={"secrets": [{"name": "tok"}]})
    assert manifest["secrets"] == [{"name": "tok"}]


def test_rendering_is_pure_and_deterministic():
    assert render() == render()
    assert TEMPLATE["metadata"]["name"] == "ignored"
    assert content_hash({"a": 1, "b": 2}) == content_hash({"b": 2, "a": 1})


def test_drift_diff_ignores_server_fields_and_defaults_but_sees_changes():
    desired = render()
    live = strip_server_fields(desired) | {"status": {"readyReplicas": 1}}
    live = {**desired, "metadata": {**desired["metadata"], "resourceVersion": "12", "uid": "x"}, "status": {"x": 1}}
    live["spec"] = {**desired["spec"], "progressDeadlineSeconds": 600}
    assert diff_desired_live(desired, live) == []
    live["spec"] = {**live["spec"], "replicas": 9}
    changes = diff_desired_live(desired, live)
    assert [(c.path, c.before, c.after) for c in changes] == [("/spec/replicas", 1, 9)]


def test_full_diff_reports_added_removed_changed():
    changes = {c.path: c.change for c in diff_objects({"a": 1, "b": {"c": 1}}, {"b": {"c": 2}, "d": 1})}
    assert changes == {"/a": "removed", "/b/c": "changed", "/d": "added"}


def test_unified_yaml_diff():
    assert unified_yaml_diff({"a": 1}, {"a": 1}) == ""
    text = unified_yaml_diff({"a": 1}, {"a": 2}, before_label="live", after_label="rendered")
    assert "-a: 1" in text and "+a: 2" in text and "live" in text


def test_override_hash_names_the_clusters_operations_and_replicas_whether_it_has_operations_or_not():
    overrides = [{"clusterName": "a", "clusterOverrides": [{"path": "/spec/replicas", "value": 3}]}]
    for cluster, replicas in (("a", None), ("a", 2), ("b", None), ("b", 4)):
        ops = overrides[0]["clusterOverrides"] if cluster == "a" else []
        assert override_hash(overrides, cluster, replicas) == content_hash({"ops": ops, "replicas": replicas})
    assert override_hash([], "b", 4) != override_hash([], "b", 5) != override_hash([], "b")
