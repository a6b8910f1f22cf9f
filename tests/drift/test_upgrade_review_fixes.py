"""Review fixes of drift.upgrades / clusters.lifecycle: the rules read what runs (not only what is
declared), a failure mid-roll ends the request, over-long versions are refused, and an ambiguous
Cluster API name links no member automatically."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from clusters import kube, lifecycle
from clusters.models import ManagedCluster
from drift import upgrades
from drift.models import UpgradePlan
from federation.approvals import services as approvals
from federation.approvals.choices import ChangeState
from federation.approvals.models import ChangeRequest
from fedportal.models import AuditEvent
from fedportal.roles import Role
from tests.clusters.factories import ClusterFactory
from tests.drift.test_upgrades import capi_managed

pytestmark = pytest.mark.django_db(transaction=True)


def _machine(name, role, owner, version, kubelet=None):
    return {
        "name": name,
        "phase": "Running",
        "version": version,
        "kubelet": kubelet if kubelet is not None else version,
        "role": role,
        "owner": owner,
        "nodeName": name,
    }


def _stale_spec(member, *, status_version="v1.28.5", generation=2, observed=2, cp_machine="v1.28.5"):
    """The failed 1.28 -> 1.29 upgrade: the spec was patched to 1.29, the controller never acted."""
    row = capi_managed(member, "v1.29.0", {f"{member.name}-md-0": "v1.28.5"})
    row.control_plane.update(generation=generation, observedGeneration=observed)
    if status_version is not None:
        row.control_plane["statusVersion"] = status_version
    row.machines = [
        _machine(f"{member.name}-cp-0", "control-plane", "control-plane", cp_machine),
        _machine(f"{member.name}-md-0-a", "worker", f"{member.name}-md-0", "v1.28.5"),
    ]
    row.save()
    assert not row.rolling
    return row


# --- 1. the one-minor and kubelet-skew rules read what runs ------------------------------------------


def test_a_patched_but_never_rolled_control_plane_refuses_a_new_request(operator):
    member = ClusterFactory(name="stale", labels={"env": "dev"})
    _stale_spec(member)
    with pytest.raises(upgrades.UpgradeRefused, match="still upgrading: it declares v1.29.0 but reports v1.28.5"):
        upgrades.request_upgrade(member, "v1.30.0", actor=operator)
    assert not ChangeRequest.objects.exists()


def test_the_control_plane_version_is_the_lowest_of_spec_status_and_machines(operator):
    member = ClusterFactory(name="stale2", labels={"env": "dev"})
    _stale_spec(member, status_version=None)  # status not reported: the Machines still say 1.28.5
    with pytest.raises(upgrades.UpgradeRefused, match="upgrade one minor at a time, 1.28 → 1.29 → 1.30"):
        upgrades.request_upgrade(member, "v1.30.0", actor=operator)
    assert upgrades.current_control_plane(ManagedCluster.objects.get(member=member))[0] == "v1.28.5"


def test_an_unobserved_control_plane_generation_refuses_a_new_request(operator):
    member = ClusterFactory(name="unobserved", labels={"env": "dev"})
    row = capi_managed(member, "v1.28.5", {"unobserved-md-0": "v1.28.5"})
    row.control_plane.update(statusVersion="v1.28.5", generation=3, observedGeneration=2)
    row.save()
    with pytest.raises(upgrades.UpgradeRefused, match="has not yet acted on its latest spec"):
        upgrades.request_upgrade(member, "v1.29.1", actor=operator)


def test_kubelet_skew_reads_the_machines_not_only_the_template(operator):
    member = ClusterFactory(name="old-kubelets", labels={"env": "dev"})
    row = capi_managed(member, "v1.29.1", {"md-0": "v1.29.1"})
    row.machines = [
        _machine("cp-0", "control-plane", "control-plane", "v1.29.1"),
        _machine("md-0-a", "worker", "md-0", "v1.29.1"),
        _machine("md-0-b", "worker", "md-0", "v1.29.1", kubelet="v1.26.3"),  # the oldest kubelet of md-0
    ]
    row.save()
    with pytest.raises(upgrades.UpgradeRefused, match="md-0 runs kubelet v1.26.3, 4 minors behind a 1.30"):
        upgrades.request_upgrade(member, "v1.30.0", actor=operator)


def test_approval_rechecks_what_runs(operator, approver, settings):
    settings.FEDPORTAL_APPROVALS_AUTO_APPLY = False
    member = ClusterFactory(name="later", labels={"env": "dev"})
    row = capi_managed(member, "v1.28.5", {"later-md-0": "v1.28.5"})
    cr = upgrades.request_upgrade(member, "v1.29.2", actor=operator)
    # someone patched the spec out of band meanwhile; the controller has not rolled it out
    row.control_plane.update(version="v1.29.0", statusVersion="v1.28.5")
    row.save()
    with pytest.raises(upgrades.UpgradeRefused, match="still upgrading"):
        upgrades.HANDLER.check(cr)
    with pytest.raises(approvals.TransitionError, match="still upgrading"):
        approvals.approve(cr, actor=approver)


# --- 2. a failure mid-roll ends the request Failed ---------------------------------------------------


def _applying(member, operator, monkeypatch):
    capi_managed(member, "v1.28.5", {f"{member.name}-md-0": "v1.28.5"})
    cr = upgrades.request_upgrade(member, "v1.29.2", actor=operator)
    ChangeRequest.objects.filter(pk=cr.pk).update(state=ChangeState.APPLYING)
    monkeypatch.setattr(upgrades.lifecycle, "refresh", lambda management, timeout=None: [])
    monkeypatch.setattr(upgrades, "connection_for", lambda cluster: None)
    return cr


def test_a_patch_that_fails_mid_roll_fails_the_request(operator, monkeypatch):
    member = ClusterFactory(name="patchfail", labels={"env": "dev"})
    cr = _applying(member, operator, monkeypatch)

    def refuse(*args, **kwargs):
        raise kube.KubeError("admission webhook denied the request", kind="forbidden", status=403)

    monkeypatch.setattr(upgrades.kube, "json_patch_object", refuse)
    cr = approvals.sync_change_request(cr.pk)
    assert cr.state == ChangeState.FAILED
    assert "admission webhook denied the request" in cr.apply_error and "halted" in cr.apply_error
    plan = UpgradePlan.objects.get(change_request=cr)
    assert plan.steps[0]["state"] == "failed" and "admission webhook" in plan.steps[0]["message"]
    assert AuditEvent.objects.filter(action="lifecycle.upgrade.step_failed", object_id=str(cr.pk)).exists()


def test_the_management_cluster_deleted_mid_roll_fails_the_request(operator, monkeypatch):
    member = ClusterFactory(name="orphan", labels={"env": "dev"})
    cr = _applying(member, operator, monkeypatch)
    ManagedCluster.objects.get(member=member).management.delete()  # the ManagedCluster row goes with it
    cr = approvals.sync_change_request(cr.pk)
    assert cr.state == ChangeState.FAILED and "no longer registered" in cr.apply_error
    assert UpgradePlan.objects.get(change_request=cr).steps[0]["state"] == "failed"


# --- 3. an over-long target version is refused -------------------------------------------------------


def test_an_overlong_target_version_is_refused_with_a_400(member, operator, client):
    long_version = "v1.30.0-" + "a" * 60
    with pytest.raises(upgrades.UpgradeRefused, match="at most 64 characters"):
        upgrades.request_upgrade(member, long_version, actor=operator)
    client.force_login(operator)
    response = client.post(reverse("drift:upgrade_request", args=[member.name]), {"to": long_version})
    assert response.status_code == 400 and "at most 64 characters" in response.content.decode()
    assert not ChangeRequest.objects.exists()


@pytest.fixture
def member():
    cluster = ClusterFactory(name="w1", labels={"env": "dev"}, server_version="v1.28.5")
    capi_managed(cluster, "v1.28.5", {"w1-md-0": "v1.28.5"})
    return cluster


# --- 4. an ambiguous Cluster API name links no member ------------------------------------------------


def _capi_cluster(namespace, name):
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {}, "status": {"phase": "Provisioned"}}


def _serve(monkeypatch, by_management):
    def read_objects(conn, timeout=None):
        return {"clusters": by_management[conn], "kubeadmcontrolplanes": [], "machinedeployments": [], "machines": []}

    monkeypatch.setattr(lifecycle, "connection_for", lambda cluster: cluster.name)
    monkeypatch.setattr(lifecycle, "read_objects", read_objects)


def test_the_same_name_in_two_namespaces_links_neither(monkeypatch):
    w1 = ClusterFactory(name="dup")
    mgmt = ClusterFactory(name="mgmt-a")
    _serve(monkeypatch, {"mgmt-a": [_capi_cluster("team-a", "dup"), _capi_cluster("team-b", "dup")]})
    lifecycle.refresh(mgmt)
    assert ManagedCluster.objects.filter(name="dup").count() == 2
    assert not ManagedCluster.objects.filter(member=w1).exists()


def test_the_same_name_on_another_management_cluster_is_not_linked(monkeypatch):
    w1 = ClusterFactory(name="dup2")
    mgmt_a, mgmt_b = ClusterFactory(name="mgmt-a"), ClusterFactory(name="mgmt-b")
    _serve(monkeypatch, {"mgmt-a": [_capi_cluster("default", "dup2")], "mgmt-b": [_capi_cluster("default", "dup2")]})
    lifecycle.refresh(mgmt_a)
    assert ManagedCluster.objects.get(management=mgmt_a).member_id == w1.pk
    lifecycle.refresh(mgmt_b)  # the member is already linked to mgmt-a's row
    assert ManagedCluster.objects.get(management=mgmt_b).member_id is None
    lifecycle.refresh(mgmt_a)  # now ambiguous: mgmt-a's row is unlinked too, an admin links by hand
    assert not ManagedCluster.objects.filter(member=w1).exists()


def _capi_at(namespace, name, host, port=6443):
    cluster = _capi_cluster(namespace, name)
    cluster["spec"]["controlPlaneEndpoint"] = {"host": host, "port": port}
    return cluster


def _lookups(captured) -> list[str]:
    """The SELECTs a refresh made to decide links: not its row locks (FOR UPDATE; on SQLite, the lock of
    a linked member by primary key, where recording its kubelets starts), which are per-row writes."""
    lock = re.compile(r'WHERE "clusters_cluster"\."id" = \d+ LIMIT 21$')
    return [
        q["sql"]
        for q in captured
        if q["sql"].startswith("SELECT") and "FOR UPDATE" not in q["sql"] and not lock.search(q["sql"])
    ]


def test_linking_reads_the_fleet_with_a_fixed_number_of_queries(monkeypatch):
    """Automatic linking reads every registered cluster and every link once per refresh, not once per
    Cluster API cluster: 12 CAPI clusters and their members take the same lookups as 3."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    lookups = {}
    for size, subnet in ((3, 5), (12, 6)):
        mgmt = ClusterFactory(name=f"mgmt-{size}")
        for i in range(size):
            ClusterFactory(name=f"member-{size}-{i}", api_server=f"https://10.{subnet}.0.{i + 1}:6443")
        capi = [_capi_at("default", f"member-{size}-{i}", f"10.{subnet}.0.{i + 1}") for i in range(size)]
        capi += [_capi_at("default", f"orphan-{size}-{i}", f"10.{subnet}.1.{i + 1}") for i in range(size)]
        _serve(monkeypatch, {mgmt.name: capi})
        with CaptureQueriesContext(connection) as captured:
            lifecycle.refresh(mgmt)
        assert ManagedCluster.objects.filter(management=mgmt, member__isnull=False).count() == size
        lookups[size] = _lookups(captured.captured_queries)
    assert len(lookups[12]) == len(lookups[3]) <= 4, lookups[12]


def test_a_link_given_up_earlier_in_the_same_refresh_frees_the_member(monkeypatch):
    """Row (ns, "alpha") was linked to m by its endpoint; m moved, so alpha lets it go. Row (ns, "m")
    names m: it links in the same refresh, as the link given up was saved before it was judged."""
    m = ClusterFactory(name="m", api_server="https://10.7.0.1:6443")
    mgmt = ClusterFactory(name="mgmt-r")
    _serve(monkeypatch, {"mgmt-r": [_capi_at("ns", "alpha", "10.7.0.1")]})
    lifecycle.refresh(mgmt)
    assert ManagedCluster.objects.get(name="alpha").member_id == m.pk
    m.api_server = "https://10.7.0.2:6443"
    m.save(update_fields=["api_server"])
    _serve(monkeypatch, {"mgmt-r": [_capi_at("ns", "alpha", "10.7.0.1"), _capi_at("ns", "m", "10.7.0.2")]})
    lifecycle.refresh(mgmt)
    assert ManagedCluster.objects.get(name="alpha").member_id is None
    assert ManagedCluster.objects.get(name="m").member_id == m.pk


def test_check_refuses_when_the_member_is_now_linked_to_another_capi_cluster(member, operator):
    cr = upgrades.request_upgrade(member, "v1.29.2", actor=operator)
    ManagedCluster.objects.filter(member=member).update(gone=True)
    capi_managed(member, "v1.28.5", {"w1-md-0": "v1.28.5"}, management=ClusterFactory(name="mgmt-other"))
    with pytest.raises(upgrades.UpgradeRefused, match="now linked to another Cluster API cluster"):
        upgrades.HANDLER.check(cr)


# --- 5. two requests at once ----------------------------------------------------------------------------


def test_a_request_refused_at_submit_leaves_no_draft(monkeypatch, operator, make_user):
    """Two requests racing past the open-upgrade check: the later one's submit refuses it, and its
    draft goes with it (it stayed behind as a Draft nobody would cancel)."""
    member = ClusterFactory(name="race", labels={"env": "dev"})
    capi_managed(member, "v1.28.5", {"race-md-0": "v1.28.5"})
    real = upgrades.open_upgrade
    # the race: the check before drafting sees nothing (the other request commits right after it)
    monkeypatch.setattr(upgrades, "open_upgrade", lambda m, exclude=None: None if exclude is None else real(m, exclude))
    upgrades.request_upgrade(member, "v1.29.0", actor=operator)
    other = make_user("operator-2", Role.OPERATOR)
    with pytest.raises(approvals.TransitionError, match="already upgrades"):
        upgrades.request_upgrade(member, "v1.29.1", actor=other)
    assert list(ChangeRequest.objects.values_list("state", flat=True)) == [ChangeState.SUBMITTED]


# --- 5. an upgrade targets a plain release (Cluster API's KubeSemver, no suffix) ------------------------


@pytest.mark.parametrize(
    "target",
    ["v1.029.0", "v01.29.0", "v1.29.00", "v1.29.0--", "v1.29.0-rc.1", "v1.29.0+build.1", "v1.29.0-eks-1"],
)
def test_a_target_cluster_api_refuses_or_that_hides_its_order_is_a_400_that_writes_nothing(
    member, operator, client, target
):
    with pytest.raises(upgrades.UpgradeRefused, match="is not a Kubernetes release an upgrade can target"):
        upgrades.request_upgrade(member, target, actor=operator)
    client.force_login(operator)
    response = client.post(reverse("drift:upgrade_request", args=[member.name]), {"to": target})
    assert response.status_code == 400
    assert "without leading zeros, like v1.30.4" in response.content.decode()
    assert not ChangeRequest.objects.exists() and not UpgradePlan.objects.exists()


def test_a_plain_release_with_surrounding_space_is_still_taken(member, operator):
    cr = upgrades.request_upgrade(member, "  v1.29.2\t", actor=operator)
    assert UpgradePlan.objects.get(change_request=cr).target_version == "v1.29.2"
