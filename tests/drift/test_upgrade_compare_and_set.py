"""An upgrade step's patch is a compare-and-set (a JSON patch whose ``test`` holds the version the
rules judged): a control plane or MachineDeployment someone changed with kubectl after the request
was drafted is never patched back (Cluster API's webhook does not refuse a downgrade), and the
request fails saying why. Real simulator serving Cluster API's objects."""

from __future__ import annotations

import time

import pytest

from clusters import kube, lifecycle
from clusters.models import Cluster, ManagedCluster
from clusters.probing import probe_cluster
from clusters.services import register_cluster
from clusters.services.connections import connection_for
from drift import upgrades
from drift.models import UpgradePlan
from federation.approvals import services as approvals
from federation.approvals.choices import ChangeState
from federation.approvals.models import ChangeRequest

pytestmark = pytest.mark.django_db(transaction=True)

FLEET = {
    "defaults": {"machineSeconds": 0.2},
    "clusters": [
        {"name": "host", "role": "host", "version": "v1.30.2", "capi": True},
        {
            "name": "w2",
            "version": "v1.29.4",
            "managedBy": "host",
            "controlPlane": {"replicas": 1},
            "machineDeployments": [{"name": "md-0", "replicas": 1}],
        },
    ],
}


@pytest.fixture
def capi(fleet_factory):
    fleet = fleet_factory(FLEET)
    rows = {}
    for name in ("host", "w2"):
        rows[name] = register_cluster(
            name=name,
            api_server=fleet.url(name),
            role="host" if name == "host" else "member",
            token=fleet.token(name),
            verify=False,
            probe=False,
        )
    for row in rows.values():  # the host's poll links its Cluster API clusters to the members registered
        probe_cluster(row)
    return fleet, {name: Cluster.objects.get(pk=row.pk) for name, row in rows.items()}


def kubectl_patch(host: Cluster, plural: str, name: str, patch: dict) -> None:
    api_version = lifecycle.CP_GV if plural == "kubeadmcontrolplanes" else lifecycle.CAPI_GV
    kube.merge_patch_object(
        connection_for(host), api_version=api_version, plural=plural, namespace="default", name=name, patch=patch
    )


def live_versions(host: Cluster) -> tuple[str, str]:
    conn = connection_for(host)
    cp = kube.get_object(
        conn, api_version=lifecycle.CP_GV, plural="kubeadmcontrolplanes", namespace="default", name="w2-control-plane"
    )
    md = kube.get_object(
        conn, api_version=lifecycle.CAPI_GV, plural="machinedeployments", namespace="default", name="w2-md-0"
    )
    return cp["spec"]["version"], md["spec"]["template"]["spec"]["version"]


def applying(cr: ChangeRequest) -> ChangeRequest:
    """The request as approved (the approval flow is tested elsewhere): its steps start at the next sync."""
    ChangeRequest.objects.filter(pk=cr.pk).update(state=ChangeState.APPLYING)
    return approvals.sync_change_request(cr.pk)


def synced_until_done(cr: ChangeRequest) -> ChangeRequest:
    """Sync passes (as the worker's chain makes them) until the request leaves Applying."""
    for _ in range(300):
        cr = approvals.sync_change_request(cr.pk)
        if cr.state != ChangeState.APPLYING:
            return cr
        UpgradePlan.objects.filter(change_request=cr).update(synced_at=None)
        time.sleep(0.1)
    return cr


def test_a_control_plane_changed_with_kubectl_after_drafting_is_not_patched_back(capi, operator):
    fleet, rows = capi
    cr = upgrades.request_upgrade(rows["w2"], "v1.30.2", actor=operator)
    # someone upgrades it by hand to a newer patch before the request is applied
    kubectl_patch(rows["host"], "kubeadmcontrolplanes", "w2-control-plane", {"spec": {"version": "v1.30.5"}})
    cr = applying(cr)
    assert cr.state == ChangeState.FAILED
    assert "it is changed only while it still declares v1.29.4: was it changed outside FedPortal?" in cr.apply_error
    assert live_versions(rows["host"])[0] == "v1.30.5"  # not downgraded to v1.30.2
    assert UpgradePlan.objects.get(change_request=cr).steps[0]["state"] == "failed"


def test_a_machine_deployment_changed_with_kubectl_mid_roll_is_not_patched_back(capi, operator):
    fleet, rows = capi
    cr = upgrades.request_upgrade(rows["w2"], "v1.29.6", actor=operator)
    plan = UpgradePlan.objects.get(change_request=cr)
    assert [(s["kind"], s["from"], s["to"]) for s in plan.steps] == [
        ("controlPlane", "v1.29.4", "v1.29.6"),
        ("machineDeployment", "v1.29.4", "v1.29.6"),
    ]
    cr = applying(cr)
    assert cr.state == ChangeState.APPLYING
    # while the control plane rolls, someone moves the workers on by hand
    kubectl_patch(
        rows["host"], "machinedeployments", "w2-md-0", {"spec": {"template": {"spec": {"version": "v1.29.7"}}}}
    )
    cr = synced_until_done(cr)
    assert cr.state == ChangeState.FAILED, cr.apply_error
    assert "still declares v1.29.4" in cr.apply_error
    assert live_versions(rows["host"]) == ("v1.29.6", "v1.29.7")  # the workers were not patched back
    assert ManagedCluster.objects.get(name="w2").member_id == rows["w2"].pk


def test_a_control_plane_only_upgrade_does_not_claim_the_workers(capi, operator):
    fleet, rows = capi
    cr = upgrades.request_upgrade(rows["w2"], "v1.29.6", actor=operator, scope="control-plane")
    cr = applying(cr)
    cr = synced_until_done(cr)
    assert cr.state == ChangeState.APPLIED, cr.apply_error
    assert live_versions(rows["host"]) == ("v1.29.6", "v1.29.4")
    outcome = str(cr.outcome) + cr.apply_error
    assert "(control plane and workers)" not in outcome


def test_a_management_cluster_that_cannot_be_read_mid_roll_is_named_as_the_reason(capi, operator):
    fleet, rows = capi
    cr = upgrades.request_upgrade(rows["w2"], "v1.29.6", actor=operator, scope="control-plane")
    UpgradePlan.objects.filter(change_request=cr).update(stuck_seconds=1)
    cr = applying(cr)
    assert cr.state == ChangeState.APPLYING
    fleet.set_down("host", mode="refused")
    cr = synced_until_done(cr)
    assert cr.state == ChangeState.FAILED
    assert "cannot read the Cluster API objects on host" in cr.apply_error
    assert "Cluster API may still be rolling it" in cr.apply_error
    assert "fix the machines" not in cr.apply_error


def test_a_step_whose_patch_landed_but_was_not_recorded_is_taken_as_started(capi, operator):
    """The patch reached the management cluster and the step's start was not saved (a worker killed in
    between): the next sync's compare-and-set fails on the target it finds, which is this step's own
    work, so the step goes on instead of failing as changed outside FedPortal."""
    fleet, rows = capi
    cr = upgrades.request_upgrade(rows["w2"], "v1.29.6", actor=operator, scope="control-plane")
    kubectl_patch(rows["host"], "kubeadmcontrolplanes", "w2-control-plane", {"spec": {"version": "v1.29.6"}})
    cr = applying(cr)  # its first step finds v1.29.6 declared: started, not failed
    assert cr.state == ChangeState.APPLYING, cr.apply_error
    cr = synced_until_done(cr)
    assert cr.state == ChangeState.APPLIED, cr.apply_error


def test_a_step_whose_object_is_changed_after_its_patch_fails_at_once_saying_so(capi, operator):
    """The workers were set back by hand after the step set them: the step waited for a roll to the
    target that would never come, for its whole stuck period, and then blamed the machines (a
    reviewer's finding). It fails at the next look, naming the version found."""
    fleet, rows = capi
    cr = upgrades.request_upgrade(rows["w2"], "v1.29.6", actor=operator, scope="control-plane")
    UpgradePlan.objects.filter(change_request=cr).update(stuck_seconds=3600)
    cr = applying(cr)
    assert cr.state == ChangeState.APPLYING
    assert UpgradePlan.objects.get(change_request=cr).steps[0]["state"] == "running"
    kubectl_patch(rows["host"], "kubeadmcontrolplanes", "w2-control-plane", {"spec": {"version": "v1.29.5"}})
    UpgradePlan.objects.filter(change_request=cr).update(synced_at=None)  # the next pass, without its wait
    cr = approvals.sync_change_request(cr.pk)
    assert cr.state == ChangeState.FAILED, cr.apply_error
    assert "w2-control-plane now declares v1.29.5, not v1.29.6" in cr.apply_error
    assert "changed outside FedPortal" in cr.apply_error and "fix the machines" not in cr.apply_error


def test_approving_sends_nothing_and_the_first_sync_starts_the_first_step(capi, operator, approver, make_user):
    """The first step's patch was sent from inside the approval's transaction (its write lock held
    while the management cluster answered; a worker killed after the patch left the request Approved
    with the roll going on unwatched, a reviewer's finding). The approval commits Applying; the
    first sync patches."""
    fleet, rows = capi
    cr = upgrades.request_upgrade(rows["w2"], "v1.29.6", actor=operator, scope="control-plane")
    from fedportal.roles import Role

    for approver_ in (approver, make_user("second-approver", Role.APPROVER)):
        if cr.state == ChangeState.SUBMITTED:
            cr = approvals.approve(cr, actor=approver_)
    assert cr.state == ChangeState.APPLYING, cr.apply_error
    assert live_versions(rows["host"])[0] == "v1.29.4"
    assert UpgradePlan.objects.get(change_request=cr).steps[0]["state"] == "pending"
    cr = approvals.sync_change_request(cr.pk)
    assert cr.state == ChangeState.APPLYING, cr.apply_error
    assert live_versions(rows["host"])[0] == "v1.29.6"
    assert UpgradePlan.objects.get(change_request=cr).steps[0]["state"] == "running"
