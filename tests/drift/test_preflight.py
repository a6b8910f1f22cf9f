"""Change requests run drift's API-compatibility preflight: incompatible targets block approval."""

import pytest

from drift.preflight import compat_preflight
from federation.approvals import services as approvals
from federation.approvals.preflight import registered_checks
from federation.services import create_resource
from tests.drift.conftest import deployment_type
from tests.drift.test_compliance import sidecar_template

pytestmark = pytest.mark.django_db


def plain_template(app="web"):
    return {
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "a", "image": "nginx"}]},
            },
        }
    }


def test_drift_check_is_registered():
    assert compat_preflight in registered_checks()


def test_v1_28_field_blocks_approval_for_v1_25_to_v1_27_targets(
    sim_fleet, operator, approver, admin_user, make_cluster
):
    make_cluster("unknown-v", "", labels={})
    resource = create_resource(
        deployment_type(),
        namespace="default",
        name="web",
        template=sidecar_template(),
        placement={"clusterSelector": {}},
    )
    cr = approvals.create_change_request(resource, actor=operator)
    blocking = {p["cluster_name"] for p in cr.preflight if p["severity"] == "blocking"}
    warnings = {p["cluster_name"] for p in cr.preflight if p["severity"] == "warning"}
    assert blocking == {"m25", "m26", "m27"}
    assert warnings == {"unknown-v"}
    m25 = next(p for p in cr.preflight if p["cluster_name"] == "m25")
    assert "spec.template.spec.initContainers[0].restartPolicy" in m25["message"]
    assert "override remove /spec/template/spec/initContainers/0/restartPolicy" in m25["message"]
    assert "v1.28" in m25["message"]
    cr = approvals.submit(cr, actor=operator)
    with pytest.raises(approvals.TransitionError, match="blocking"):
        approvals.approve(cr, actor=approver)
    approvals.override_preflight(cr, actor=admin_user, reason="old clusters ignore the sidecar; accepted")
    approvals.approve(cr, actor=approver)  # no longer blocked (more approvals may still be needed)


def test_compatible_proposal_has_no_blocking_problem_and_isolated_targets_only_warn(sim_fleet, operator, admin_user):
    from drift.services import isolate_cluster

    host, members = sim_fleet
    resource = create_resource(
        deployment_type(), namespace="default", name="web", template=plain_template(), placement={"clusterSelector": {}}
    )
    cr = approvals.create_change_request(resource, actor=operator)
    assert [p for p in cr.preflight if p["severity"] == "blocking"] == []
    isolate_cluster(members[0], actor=admin_user, reason="upgrading")
    resource2 = create_resource(
        deployment_type(),
        namespace="default",
        name="side",
        template=sidecar_template(),
        placement={"clusters": ["m25", "m28"]},
    )
    cr2 = approvals.create_change_request(resource2, actor=operator)
    assert [(p["cluster_name"], p["severity"]) for p in cr2.preflight] == [("m25", "warning")]


# --- the same verdict on the federation preview --------------------------------------------------


def test_drift_check_answers_for_the_federation_preview():
    from drift.preflight import compat_preview_check
    from federation.preview_checks import registered_manifest_checks

    assert registered_manifest_checks()[0] is compat_preview_check


def _cluster(name, version):
    from clusters.models import Cluster

    return Cluster(name=name, server_version=version)


def test_preview_check_names_the_fix_and_the_version_that_accepts_the_field():
    from drift.preflight import compat_preview_check

    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        **sidecar_template(),
    }
    (warning,) = compat_preview_check(manifest, _cluster("m25", "v1.25.1"))
    assert warning.startswith("Incompatible with m25 (v1.25.1): ")
    assert "override remove /spec/template/spec/initContainers/0/restartPolicy" in warning and "v1.28" in warning
    assert compat_preview_check(manifest, _cluster("m29", "v1.29.1")) == []


def test_preview_check_reports_a_removed_api_version_and_what_replaces_it():
    from drift.preflight import compat_preview_check

    pdb = {
        "apiVersion": "policy/v1beta1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }
    (warning,) = compat_preview_check(pdb, _cluster("m26", "v1.26.1"))
    assert "policy/v1beta1" in warning and "policy/v1" in warning


def test_preview_check_cannot_verify_an_unpolled_or_unsupported_version():
    from drift.preflight import compat_preview_check

    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
    (unpolled,) = compat_preview_check(manifest, _cluster("new", ""))
    assert unpolled.startswith("Cannot verify on new (version not polled yet)")
    (ancient,) = compat_preview_check(manifest, _cluster("old", "v1.12.0"))
    assert ancient.startswith("Cannot verify on old (v1.12.0)") and "outside the schemas' range" in ancient


def test_a_deprecated_api_still_served_is_a_warning_naming_its_removal(sim_fleet, operator, make_cluster):
    """Served, so compatible; the apiserver answers with a deprecation Warning and a later minor
    refuses it: the preflight says so (it said nothing: a reviewer's finding)."""
    from federation.services import create_type

    flowschema = create_type(
        group="flowcontrol.apiserver.k8s.io",
        version="v1beta3",
        kind="FlowSchema",
        plural="flowschemas",
        scope="Cluster",
    )
    resource = create_resource(
        flowschema,
        namespace="",
        name="fs",
        template={"spec": {"priorityLevelConfiguration": {"name": "global-default"}}},
        placement={"clusters": ["m28", "m30"]},
    )
    cr = approvals.create_change_request(resource, actor=operator)
    by_cluster = {p["cluster_name"]: p for p in cr.preflight}
    assert "m28" not in by_cluster  # served and not yet deprecated at v1.28
    assert by_cluster["m30"]["severity"] == "warning"
    assert by_cluster["m30"]["message"] == (
        "Deprecated on m30 (v1.30.1): flowcontrol.apiserver.k8s.io/v1beta3 FlowSchema is deprecated in v1.29+, "
        "unavailable in v1.32+; use flowcontrol.apiserver.k8s.io/v1 FlowSchema."
    )


def test_a_custom_resource_a_targets_discovery_does_not_list_is_a_warning_there(sim_fleet, operator):
    """No CRD serves it on m29 as of its last discovery read (the apply would be answered 404): said,
    as a warning, since a CRD installed since then serves it already; m30 lists it, m28's discovery
    is not read yet (unverifiable as before)."""
    from clusters import served_apis
    from clusters.models import Cluster
    from federation.services import create_type

    widget = create_type(group="example.com", version="v1", kind="Widget", plural="widgets", scope="Cluster")
    Cluster.objects.filter(name="m29").update(served_apis=sorted(served_apis.served_group_versions(29)))
    Cluster.objects.filter(name="m30").update(
        served_apis=sorted([*served_apis.served_group_versions(30), "example.com/v1"])
    )
    resource = create_resource(
        widget, namespace="", name="w", template={"spec": {"size": 1}}, placement={"clusters": ["m28", "m29", "m30"]}
    )
    cr = approvals.create_change_request(resource, actor=operator)
    by_cluster = {p["cluster_name"]: p for p in cr.preflight if p["message"].startswith(("Incompatible", "Cannot"))}
    assert by_cluster["m29"]["severity"] == "warning"
    assert by_cluster["m29"]["message"].startswith(
        "Incompatible with m29 (v1.29.1): example.com/v1 Widget is not served"
    )
    assert by_cluster["m28"]["message"].startswith("Cannot verify on m28")
    assert by_cluster["m30"]["message"].startswith("Cannot verify on m30")
