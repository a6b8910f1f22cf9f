"""Cluster API upgrades through the approval workflow (drift.upgrades): the rules, the preflight,
the two-role guards, fedctl, and the whole roll with a real worker against the simulator."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from clusters import kube, lifecycle
from clusters.models import Cluster, ManagedCluster
from clusters.probing import probe_cluster
from clusters.services import register_cluster
from clusters.services.connections import connection_for
from drift import selectors, upgrades
from federation.approvals import services as approvals
from federation.approvals.choices import ChangeKind, ChangeState
from federation.approvals.models import ChangeRequest
from federation.models import PropagatedVersion
from federation.services import create_resource, create_type
from fedportal.models import AuditEvent
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import ftype
from tests.utils import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def capi_managed(member: Cluster, cp: str, mds: dict[str, str], management: Cluster | None = None) -> ManagedCluster:
    """A ManagedCluster as a poll would have stored it (no network needed to refuse a request)."""
    management = management or ClusterFactory(name=f"mgmt-{member.name}")
    return ManagedCluster.objects.create(
        management=management,
        namespace="default",
        name=member.name,
        member=member,
        link_source="name",
        control_plane={
            "name": f"{member.name}-control-plane",
            "version": cp,
            "replicas": 1,
            "statusReplicas": 1,
            "updatedReplicas": 1,
            "readyReplicas": 1,
        },
        machine_deployments=[
            {
                "name": name,
                "version": version,
                "replicas": 1,
                "statusReplicas": 1,
                "updatedReplicas": 1,
                "readyReplicas": 1,
                "availableReplicas": 1,
                "phase": "Running",
            }
            for name, version in mds.items()
        ],
        machines=[],
    )


@pytest.fixture
def member():
    cluster = ClusterFactory(name="w1", labels={"env": "dev"}, server_version="v1.28.5")
    capi_managed(cluster, "v1.28.5", {"w1-md-0": "v1.28.5"})
    return cluster


@pytest.mark.parametrize(
    "to, scope, reason",
    [
        ("v1.30.1", "all", "upgrade one minor at a time, 1.28 → 1.29 → 1.30"),
        ("v1.29.2", "workers", "Workers are never newer than the control plane"),
        ("v1.27.9", "all", "never downgraded"),
        ("banana", "all", "is not a Kubernetes version: give a full version like v1.30.4"),
        ("v1.29", "all", "give a full version"),
        ("v1.40.0", "all", "not a Kubernetes version FedPortal's schemas know (v1.25–v1.37)"),
        ("v2.1.0", "all", "is not a Kubernetes version"),
        ("v1.28.5", "all", "nothing to upgrade"),
        ("v1.29.0", "sideways", "Unknown scope"),
    ],
)
def test_refused_requests_say_why_and_change_nothing(member, operator, to, scope, reason):
    events = AuditEvent.objects.count()
    with pytest.raises(upgrades.UpgradeRefused, match=re.escape(reason)):
        upgrades.request_upgrade(member, to, actor=operator, scope=scope)
    assert not ChangeRequest.objects.exists() and AuditEvent.objects.count() == events


def test_kubelet_skew_of_the_target_is_enforced(operator):
    cluster = ClusterFactory(name="old-workers")
    capi_managed(cluster, "v1.29.1", {"md-0": "v1.26.3"})  # 1.30 control plane, kubelets 4 minors behind
    with pytest.raises(upgrades.UpgradeRefused, match="4 minors behind a 1.30 control plane; the skew policy allows 3"):
        upgrades.request_upgrade(cluster, "v1.30.0", actor=operator)


def test_an_upgrade_that_takes_a_member_past_the_host_warns_and_further_blocks(operator):
    """The preflight checked manifests and kubelets, not the host/member rule the skew matrix shows:
    a member taken ahead of the host was accepted and approvable, and the matrix raised P1, then P0
    ("resource sync fails") once it had rolled (a reviewer's finding)."""
    ClusterFactory(name="hub", role="host", server_version="v1.29.4")
    level = ClusterFactory(name="w129", labels={"env": "dev"}, server_version="v1.29.4")
    capi_managed(level, "v1.29.4", {"w129-md-0": "v1.29.4"})
    ahead = ClusterFactory(name="w130", labels={"env": "dev"}, server_version="v1.30.2")
    capi_managed(ahead, "v1.30.2", {"w130-md-0": "v1.30.2"})
    behind = ClusterFactory(name="w127", labels={"env": "dev"}, server_version="v1.27.3")
    capi_managed(behind, "v1.27.3", {"w127-md-0": "v1.27.3"})

    warned = upgrades.request_upgrade(level, "v1.30.2", actor=operator)
    [warning] = [f for f in warned.upgrade_plan.findings if f["resource"] == "host hub"]
    assert warning["severity"] == "P1" and "Host hub (v1.29) is older than member w129 (v1.30)" in warning["message"]
    assert not any(p["severity"] == "blocking" for p in warned.preflight)

    blocked = upgrades.request_upgrade(ahead, "v1.31.0", actor=operator)
    [block] = [f for f in blocked.upgrade_plan.findings if f["resource"] == "host hub"]
    assert block["severity"] == "P0" and "2 minors behind member w130" in block["message"]
    assert any(p["severity"] == "blocking" and "host hub" in p["message"] for p in blocked.preflight)

    closer = upgrades.request_upgrade(behind, "v1.28.9", actor=operator)  # still behind the host: nothing to say
    assert not [f for f in closer.upgrade_plan.findings if f["resource"] == "host hub"]


def test_kubelet_skew_counts_the_nodes_the_probe_saw_too(operator):
    """Only the Machines of a MachineDeployment were read: a node none owns, or a kubelet changed
    after its Machine reported, passed the skew rule unseen (a reviewer's finding)."""
    cluster = ClusterFactory(
        name="pooled", server_version="v1.28.5", kubelet_versions={"cp-0": "v1.28.5", "pool-7": "v1.25.4"}
    )
    capi_managed(cluster, "v1.28.5", {"pooled-md-0": "v1.28.5"})
    with pytest.raises(upgrades.UpgradeRefused, match="Node pool-7 of pooled runs kubelet v1.25.4, 4 minors behind"):
        upgrades.request_upgrade(cluster, "v1.29.0", actor=operator)
    assert not ChangeRequest.objects.exists()
    with pytest.raises(upgrades.UpgradeRefused, match="nothing to upgrade"):  # the workers alone: not refused for it
        upgrades.request_upgrade(cluster, "v1.28.5", actor=operator, scope="workers")


def test_a_cluster_not_managed_by_cluster_api_is_refused(operator, client):
    plain = ClusterFactory(name="plain")
    with pytest.raises(upgrades.UpgradeRefused, match="not managed by Cluster API"):
        upgrades.request_upgrade(plain, "v1.30.0", actor=operator)
    client.force_login(operator)
    response = client.post(reverse("drift:upgrade_request", args=["plain"]), {"to": "v1.30.0"})
    assert response.status_code == 400 and "not managed by Cluster API" in response.content.decode()
    with pytest.raises(CommandError, match="Refused: plain is not managed by Cluster API"):
        call_command("fedctl", "upgrade", "plain", "--to", "v1.30.0", "--as", operator.username)
    assert not ChangeRequest.objects.exists()


def test_viewer_cannot_request_and_author_cannot_approve_their_own(member, viewer, make_user, client, approver):
    with pytest.raises(PermissionDenied):
        upgrades.request_upgrade(member, "v1.29.2", actor=viewer)
    client.force_login(viewer)
    assert client.post(reverse("drift:upgrade_request", args=["w1"]), {"to": "v1.29.2"}).status_code == 403
    assert not ChangeRequest.objects.exists()
    both = make_user("both", "operator", "approver")
    cr = upgrades.request_upgrade(member, "v1.29.2", actor=both)
    assert cr.kind == ChangeKind.UPGRADE and cr.state == ChangeState.SUBMITTED
    assert [(s["kind"], s["name"]) for s in cr.upgrade_plan.steps] == [
        ("controlPlane", "w1-control-plane"),
        ("machineDeployment", "w1-md-0"),
    ]
    with pytest.raises(PermissionDenied, match="another approver"):
        approvals.approve(cr, actor=both)
    # a second request for the same cluster while this one is open is refused
    with pytest.raises(upgrades.UpgradeRefused, match=f"CR-{cr.pk} already upgrades w1"):
        upgrades.request_upgrade(member, "v1.29.2", actor=both)


def applied_on_a_capi_member(cluster_name, version, federated_type, name, template):
    """A Cluster API-managed dev member at ``version`` holding one resource (shop/``name``) as applied."""
    cluster = ClusterFactory(name=cluster_name, labels={"env": "dev"}, server_version=version)
    capi_managed(cluster, version, {f"{cluster_name}-md-0": version})
    resource = create_resource(
        federated_type, namespace="shop", name=name, template=template, placement={"clusters": [cluster_name]}
    )
    manifest = {
        "apiVersion": federated_type.api_version,
        "kind": federated_type.kind,
        "metadata": {"name": name, "namespace": "shop"},
        **template,
    }
    PropagatedVersion.objects.create(resource=resource, cluster=cluster, applied_manifest=manifest)
    return cluster, resource


def test_p0_preflight_blocks_until_an_admin_overrides(operator, approver, admin_user, client, settings):
    settings.FEDPORTAL_APPROVALS_AUTO_APPLY = False
    hpa_type = create_type(
        group="autoscaling", version="v2beta2", kind="HorizontalPodAutoscaler", plural="horizontalpodautoscalers"
    )
    template = {
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5}
    }
    cluster, resource = applied_on_a_capi_member("w125", "v1.25.9", hpa_type, "web", template)
    cr = upgrades.request_upgrade(cluster, "v1.26.4", actor=operator)
    p0 = [f for f in cr.upgrade_plan.findings if f["severity"] == "P0"]
    assert p0 and p0[0]["resource"] == str(resource) and "autoscaling/v2beta2" in p0[0]["message"]
    assert any(p["severity"] == "blocking" and "shop/web" in p["message"] for p in cr.preflight)
    with pytest.raises(approvals.TransitionError, match="Preflight found blocking problems"):
        approvals.approve(cr, actor=approver)
    client.force_login(approver)
    page = client.get(reverse("approvals:change_detail", args=[cr.pk])).content.decode()
    assert "P0" in page and "autoscaling/v2beta2" in page and "Upgrade plan" in page
    # an upgrade has no resource and no federated object to diff (a reviewer found the page saying so wrongly)
    assert "drafted before the resource was first propagated" not in page and "No target cluster." not in page
    assert "the upgrade plan above is the change" in page
    approvals.override_preflight(cr, actor=admin_user, reason="HPA is migrated right after the upgrade")
    cr = approvals.approve(cr, actor=approver)
    assert cr.state == ChangeState.APPROVED
    assert AuditEvent.objects.filter(action="approvals.change.preflight_override").count() == 1


def test_a_field_the_target_version_refuses_is_p0_as_in_a_change_requests_preflight(operator):
    """The next apply of the object would fail with 400 (fieldValidation=Strict): the upgrade must not
    go out with a warning only (it was P1; a reviewer's finding)."""
    pod = {
        "containers": [{"name": "app", "image": "nginx"}],
        "resourceClaims": [{"name": "gpu", "source": {"resourceClaimName": "gpu"}}],  # gone in v1.31
    }
    template = {
        "spec": {
            "selector": {"matchLabels": {"app": "w"}},
            "template": {"metadata": {"labels": {"app": "w"}}, "spec": pod},
        }
    }
    cluster, resource = applied_on_a_capi_member("w130", "v1.30.2", ftype("Deployment"), "gpu", template)
    cr = upgrades.request_upgrade(cluster, "v1.31.1", actor=operator)
    (finding,) = [f for f in cr.upgrade_plan.findings if f["resource"] == str(resource)]
    assert finding["severity"] == "P0" and "resourceClaims" in finding["message"]
    assert any(p["severity"] == "blocking" and "shop/gpu" in p["message"] for p in cr.preflight)


# --- the whole roll: real worker, simulator with a management cluster and two CAPI members -------------

CAPI_FLEET = {
    "defaults": {"machineSeconds": 0.6},
    "clusters": [
        {"name": "mgmt", "role": "host", "version": "v1.30.2", "capi": True, "labels": {"env": "dev"}},
        {
            "name": "w1",
            "version": "v1.29.4",
            "managedBy": "mgmt",
            "labels": {"env": "dev"},
            "controlPlane": {"replicas": 1},
            "machineDeployments": [{"name": "md-0", "replicas": 2}, {"name": "md-1", "replicas": 1}],
        },
        {"name": "w2", "version": "v1.29.4", "managedBy": "mgmt", "labels": {"env": "dev"}},
    ],
}


def _register(fleet, names):
    rows = []
    for name in names:
        row = register_cluster(
            name=name,
            api_server=fleet.url(name),
            role="host" if name == "mgmt" else "member",
            labels=fleet.labels(name),
            token=fleet.token(name),
            verify=False,
            probe=False,
        )
        rows.append(row)
    for row in rows:  # the management cluster's poll links the members registered by then
        probe_cluster(row)
    return {r.name: Cluster.objects.get(pk=r.pk) for r in rows}


@pytest.mark.worker
def test_approved_upgrade_rolls_control_plane_then_workers(fleet_factory, celery_worker, operator, approver):
    fleet = fleet_factory(CAPI_FLEET)
    rows = _register(fleet, ["mgmt", "w1", "w2"])
    assert ManagedCluster.objects.filter(member__isnull=False).count() == 2
    out = StringIO()
    call_command("fedctl", "lifecycle", "w1", "-o", "json", stdout=out)
    shape = json.loads(out.getvalue())
    assert set(shape) == {"controlPlane", "machineDeployments", "machines"}
    assert set(shape["controlPlane"]) == {"version", "replicas", "updatedReplicas", "readyReplicas"}
    assert set(shape["machineDeployments"][0]) == {"name", "version", "replicas", "updatedReplicas", "readyReplicas"}
    out = StringIO()
    call_command("fedctl", "upgrade", "w1", "--to", "v1.30.2", "--as", operator.username, stdout=out)
    cr = ChangeRequest.objects.get(pk=int(out.getvalue().strip().splitlines()[-1]))
    assert cr.state == ChangeState.SUBMITTED and cr.required_approvals == 1
    assert [s["kind"] for s in cr.upgrade_plan.steps] == ["controlPlane", "machineDeployment", "machineDeployment"]
    cr = approvals.approve(cr, actor=approver)
    assert cr.state == ChangeState.APPLYING
    mixed, phases, versions_seen = False, set(), set()

    def finished():
        nonlocal mixed
        member = Cluster.objects.get(pk=rows["w1"].pk)
        kubelets = set((member.kubelet_versions or {}).values())
        if len(kubelets) > 1:
            mixed = True
            skew = {r.name: r for r in selectors.skew_overview().member_rows}["w1"].kubelets
            versions_seen.add((skew.oldest.minor, skew.newest.minor))
        managed = ManagedCluster.objects.get(name="w1")
        phases.update(m["phase"] for m in managed.machines)
        found = ChangeRequest.objects.get(pk=cr.pk)
        return found if found.state != ChangeState.APPLYING else None

    cr = wait_for(finished, timeout=120, interval=0.3, message="upgrade finished")
    assert cr.state == ChangeState.APPLIED, cr.apply_error
    assert mixed and (29, 30) in versions_seen  # the skew matrix saw 1.29 and 1.30 kubelets side by side
    assert "Running" in phases and phases & {"Provisioning", "Deleting"}  # machines caught mid-roll
    plan = cr.upgrade_plan
    assert [s["state"] for s in plan.steps] == ["done", "done", "done"]
    assert fleet.version("w1") == "v1.30.2"
    nodes = kube.list_nodes(connection_for(rows["w1"]))
    assert nodes and {n.kubelet_version for n in nodes} == {"v1.30.2"}
    assert fleet.version("w2") == "v1.29.4"  # the other member was left alone
    events = AuditEvent.objects.filter(object_id=str(cr.pk))
    assert events.filter(action="lifecycle.upgrade.step_started").count() == 3
    assert events.filter(action="lifecycle.upgrade.step_done").count() == 3


@pytest.mark.worker
def test_a_stuck_machine_halts_the_upgrade_with_the_reason(fleet_factory, celery_worker, operator, approver):
    fleet = fleet_factory(CAPI_FLEET)
    rows = _register(fleet, ["mgmt", "w2"])
    fleet.admin("POST", "/clusters/w2/capi", {"machinesStuck": True})
    cr = upgrades.request_upgrade(rows["w2"], "v1.30.2", actor=operator)
    cr.upgrade_plan.__class__.objects.filter(pk=cr.upgrade_plan.pk).update(stuck_seconds=3)
    cr = approvals.approve(cr, actor=approver)
    cr = wait_for(
        lambda: ChangeRequest.objects.exclude(state=ChangeState.APPLYING).filter(pk=cr.pk).first(),
        timeout=60,
        message="upgrade halted",
    )
    assert cr.state == ChangeState.FAILED
    assert "no machine changed phase" in cr.apply_error and "Provisioning" in cr.apply_error
    assert cr.upgrade_plan.steps[0]["state"] == "failed"
    # the steps after the failed one never started, and do not read as still to come
    later = cr.upgrade_plan.steps[1:]
    assert later and {s["state"] for s in later} == {"skipped"}
    assert all("halted at controlPlane" in s["message"] for s in later)
    assert fleet.version("w2") == "v1.29.4"
    assert lifecycle.managed_row(rows["w2"]).control_plane["version"] == "v1.30.2"


def test_compliance_report_lists_clusters_behind_and_upgrades_in_progress(operator, viewer, client):
    old = ClusterFactory(name="w-old", labels={"env": "dev"})
    new = ClusterFactory(name="w-new", labels={"env": "dev"})
    capi_managed(old, "v1.29.4", {"w-old-md-0": "v1.29.4"})
    capi_managed(new, "v1.30.2", {"w-new-md-0": "v1.30.2"})
    cr = upgrades.request_upgrade(old, "v1.30.2", actor=operator)
    ChangeRequest.objects.filter(pk=cr.pk).update(state=ChangeState.APPLYING)
    data = upgrades.lifecycle_compliance()
    assert data["target"] == "v1.30.2"
    assert [(r["cluster"], r["minors_behind"]) for r in data["behind"]] == [("w-old", 1)]
    assert [(r["cluster"], r["done"], r["steps"]) for r in data["in_progress"]] == [("w-old", 0, 2)]
    with CaptureQueriesContext(connection) as one_upgrade:
        upgrades.lifecycle_compliance()
    for name in ("w-a", "w-b"):  # more upgrades in progress cost no query each (a reviewer counted 1 each)
        member = ClusterFactory(name=name, labels={"env": "dev"})
        capi_managed(member, "v1.29.4", {f"{name}-md-0": "v1.29.4"})
        started = upgrades.request_upgrade(member, "v1.30.2", actor=operator)
        ChangeRequest.objects.filter(pk=started.pk).update(state=ChangeState.APPLYING)
    with CaptureQueriesContext(connection) as three_upgrades:
        assert len(upgrades.lifecycle_compliance()["in_progress"]) == 3
    assert len(three_upgrades) == len(one_upgrade)
    client.force_login(viewer)
    page = client.get(reverse("drift:compliance_report")).content.decode()
    assert "Clusters behind the fleet" in page and "w-old" in page and f"CR-{cr.pk}" in page
    csv = b"".join(client.get(reverse("drift:lifecycle_export")).streaming_content).decode()
    assert "behind target,w-old,v1.29.4,v1.30.2" in csv and "upgrade in progress,w-old" in csv
