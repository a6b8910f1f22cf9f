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
    return {"spec": {"selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": "a", "image": "nginx"}]}}}}


def test_drift_check_is_registered():
    assert compat_preflight in registered_checks()


def test_v1_28_field_blocks_approval_for_v1_25_to_v1_27_targets(sim_fleet, operator, approver, admin_user, make_cluster):
    make_cluster("unknown-v", "", labels={})
    resource = create_resource(deployment_type(), namespace="default", name="web", template=sidecar_template(),
                               placement={"clusterSelector": {}})
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
    resource = create_resource(deployment_type(), namespace="default", name="web", template=plain_template(),
                               placement={"clusterSelector": {}})
    cr = approvals.create_change_request(resource, actor=operator)
    assert [p for p in cr.preflight if p["severity"] == "blocking"] == []
    isolate_cluster(members[0], actor=admin_user, reason="upgrading")
    resource2 = create_resource(deployment_type(), namespace="default", name="side", template=sidecar_template(),
                                placement={"clusters": ["m25", "m28"]})
    cr2 = approvals.create_change_request(resource2, actor=operator)
    assert [(p["cluster_name"], p["severity"]) for p in cr2.preflight] == [("m25", "warning")]
