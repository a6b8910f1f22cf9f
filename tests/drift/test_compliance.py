"""Compliance report, snapshots, drift_report, isolation (manual and automatic) and the banner."""

import csv
import io
import json
from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster
from drift import selectors, services
from drift.compliance import evaluate_cluster
from drift.models import VersionPolicy
from federation.choices import PropagationReason, SyncState
from federation.models import PropagatedVersion
from federation.services import create_resource
from fedportal.models import AuditEvent
from tests.drift.conftest import deployment_type

REPORT = reverse("drift:compliance_report")
EXPORT = reverse("drift:compliance_export")
BANNER = reverse("drift:isolation_banner")

pytestmark = pytest.mark.django_db


def sidecar_template(app="web"):
    pod = {
        "containers": [{"name": "app", "image": "nginx"}],
        "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}],
    }
    return {
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}}, "spec": pod},
        }
    }


@pytest.fixture
def governed_fleet(sim_fleet):
    host, members = sim_fleet
    ftype = deployment_type()
    resource = create_resource(
        ftype, namespace="default", name="web", template=sidecar_template(), placement={"clusterSelector": {}}
    )
    by_name = {m.name: m for m in members}
    PropagatedVersion.objects.create(
        resource=resource, cluster=by_name["m29"], status=PropagationReason.OK, sync_state=SyncState.OUT_OF_SYNC
    )
    PropagatedVersion.objects.create(
        resource=resource, cluster=by_name["m28"], status=PropagationReason.OK, sync_state=SyncState.IN_SYNC
    )
    PropagatedVersion.objects.create(
        resource=resource, cluster=by_name["m26"], status=PropagationReason.FIELD_NOT_SUPPORTED
    )
    return host, by_name, resource


# --- scoring ---------------------------------------------------------------------------------------


def test_clean_cluster_scores_100_and_is_compliant():
    result = evaluate_cluster(
        name="a",
        role="member",
        version="v1.29.0",
        isolated=False,
        skew_severity=None,
        skew_messages=[],
        compat={"compatible": 3},
        propagation={"in_sync": 3},
    )
    assert result.compliant and result.score == 100


def test_p3_and_unverifiable_are_reported_but_not_violations():
    result = evaluate_cluster(
        name="a",
        role="member",
        version="",
        isolated=False,
        skew_severity="P3",
        skew_messages=["unknown"],
        compat={"unverifiable": 2},
        propagation={},
    )
    assert result.compliant and result.score == 100
    assert (
        result.rules[1].explanation
        == "None of the 2 targeting resources can be verified against this cluster's version."
    )


def test_each_failing_rule_costs_its_points():
    result = evaluate_cluster(
        name="a",
        role="member",
        version="v1.25.0",
        isolated=True,
        skew_severity="P0",
        skew_messages=["far behind"],
        compat={"incompatible": 1, "compatible": 1},
        propagation={"failed": 1, "out_of_sync": 1, "in_sync": 2},
    )
    assert not result.compliant
    assert result.failed_rules == ["version_policy", "api_compat", "propagation", "resource_drift", "isolation"]
    assert result.score == round(100 - 50 - 15 - 5 - 2.5 - 10)


def test_fleet_report_combines_skew_compat_propagation_and_drift(governed_fleet, django_assert_max_num_queries):
    with django_assert_max_num_queries(8):
        report, skew_counts = selectors.fleet_compliance()
    by_name = {c.name: c for c in report.clusters}
    assert by_name["m25"].compat["incompatible"] == 1 and "api_compat" in by_name["m25"].failed_rules
    assert by_name["m26"].propagation["failed"] == 1
    # m29 runs the host's version: the members far behind it (m25, m26) answer for their skew with it
    assert by_name["m29"].propagation["out_of_sync"] == 1 and by_name["m29"].failed_rules == ["resource_drift"]
    assert by_name["m28"].failed_rules == ["version_policy"]  # P2 member skew with m31, m28 the older
    assert by_name["host"].compat["compatible"] == 1
    # the host answers for members newer than it (m30, m31), not for members behind it
    assert by_name["host"].skew_severity == "P0" and "m31" in by_name["host"].skew_messages[0]
    assert by_name["m31"].skew_severity is None and by_name["m25"].skew_severity == "P0"
    assert report.open_drift == 1 and report.incompatible_cells == 3
    assert skew_counts["P0"] == 4


# --- page, export, command -----------------------------------------------------------------------------


def test_compliance_page_full_fragment_and_no_role(viewer_client, governed_fleet, client, nobody):
    response = viewer_client.get(REPORT)
    assert response.status_code == 200
    body = response.content.decode()
    assert "Fleet compliance report" in body and "plotly/plotly.min.js" in body and "data-print" in body
    assert "api_compat" in body
    fragment = viewer_client.get(REPORT, {"only": "noncompliant"}, HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and "<html" not in fragment.content.decode()
    filtered = viewer_client.get(REPORT, {"only": "noncompliant"})
    assert filtered.context["rows"] and all(not c.compliant for c, _ in filtered.context["rows"])
    client.force_login(nobody)
    assert client.get(REPORT).status_code == 403
    assert client.get(EXPORT).status_code == 403


def test_compliance_bad_filter(viewer_client, governed_fleet):
    assert viewer_client.get(REPORT, {"only": "everything"}).context["form"].errors
    assert viewer_client.get(EXPORT, {"labels": "=="}).status_code == 400


def test_compliance_export_csv(viewer_client, governed_fleet):
    response = viewer_client.get(EXPORT)
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))
    assert [r["Cluster"] for r in rows][:2] == ["host", "m25"]
    m25 = next(r for r in rows if r["Cluster"] == "m25")
    assert m25["Compliant"] == "false" and m25["Incompatible resources"] == "1"
    assert "api_compat" in m25["Explanations"]
    assert AuditEvent.objects.filter(action="drift.compliance.export").exists()


def test_drift_report_command_json_and_csv(governed_fleet, tmp_path):
    out = io.StringIO()
    call_command("drift_report", "-o", "json", stdout=out)
    payload = json.loads(out.getvalue())
    assert payload["summary"]["clusters"] == 8 and payload["summary"]["open_drift"] == 1
    assert {c["name"] for c in payload["clusters"]} >= {"host", "m25"}
    assert any(f["rule"] == "host_member_skew" for f in payload["skew_findings"])
    target = tmp_path / "report.csv"
    call_command("drift_report", "-o", "csv", "--labels", "env=prod", "--file", str(target))
    rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8-sig"))))
    assert [r["Cluster"] for r in rows] == ["host", "m25", "m27", "m29", "m31"]
    with pytest.raises(CommandError):
        call_command("drift_report", "--labels", "bad key=1")


# --- snapshots --------------------------------------------------------------------------------------


def test_snapshot_records_the_report_and_feeds_the_trend(viewer_client, governed_fleet):
    old = services.take_compliance_snapshot(at=timezone.now() - timedelta(days=2))
    assert old.clusters_total == 8 and old.open_drift == 1 and old.findings_p0 == 4
    services.take_compliance_snapshot()
    trend = viewer_client.get(REPORT).context["trend"]
    assert len(trend["data"][0]["x"]) == 2
    assert trend["data"][1]["y"] == [1, 1]


# --- isolation -----------------------------------------------------------------------------------------


def test_admin_isolates_and_restores_with_audit_and_propagation_skips_it(admin_user, governed_fleet):
    from clusters.choices import ClusterState
    from clusters.selectors import ready_members
    from federation.propagation import plan_targets
    from tests.federation.factories import namespace_everywhere

    host, members, resource = governed_fleet
    namespace_everywhere("default")  # KubeFed places a namespaced resource only where its namespace is federated
    cluster = members["m25"]
    Cluster.objects.filter(pk=cluster.pk).update(state=ClusterState.READY)
    assert cluster in ready_members()
    services.isolate_cluster(cluster, actor=admin_user, reason="P0 skew, upgrading")
    cluster.refresh_from_db()
    assert cluster.isolated and cluster.isolated_reason == "P0 skew, upgrading"
    assert cluster not in ready_members()  # what propagation and scheduling draw from
    plans = {p.cluster.name: p for p in plan_targets(resource, resource.current_revision)}
    assert plans["m25"].reason == PropagationReason.CLUSTER_ISOLATED
    with pytest.raises(services.IsolationError, match="already isolated"):
        services.isolate_cluster(cluster, actor=admin_user, reason="again")
    services.restore_cluster(cluster, actor=admin_user, note="upgraded to v1.28")
    cluster.refresh_from_db()
    assert not cluster.isolated
    actions = list(
        AuditEvent.objects.filter(action__in=["cluster.isolate", "cluster.restore"]).values_list("action", flat=True)
    )
    assert sorted(actions) == ["cluster.isolate", "cluster.restore"]
    with pytest.raises(services.IsolationError, match="not isolated"):
        services.restore_cluster(cluster, actor=admin_user)


def test_isolation_needs_admin_a_reason_and_never_the_host(viewer, admin_user, governed_fleet):
    host, members, _ = governed_fleet
    with pytest.raises(PermissionDenied):
        services.isolate_cluster(members["m25"], actor=viewer, reason="x")
    with pytest.raises(services.IsolationError, match="why"):
        services.isolate_cluster(members["m25"], actor=admin_user, reason="  ")
    with pytest.raises(services.IsolationError, match="host"):
        services.isolate_cluster(host, actor=admin_user, reason="x")
    assert not Cluster.objects.filter(isolated=True).exists()


def test_isolate_and_restore_views(admin_client_, viewer_client, governed_fleet):
    url = reverse("drift:cluster_isolate", args=["m25"])
    assert viewer_client.post(url, {"reason": "x"}).status_code == 403
    assert admin_client_.get(url).status_code == 200
    assert admin_client_.post(url, {"reason": ""}).status_code == 400
    assert admin_client_.post(url, {"reason": "blocking skew"}).status_code == 302
    assert Cluster.objects.get(name="m25").isolated
    assert admin_client_.post(url, {"reason": "again"}).status_code == 400
    assert admin_client_.post(reverse("drift:cluster_isolate", args=["host"]), {"reason": "x"}).status_code == 400
    assert admin_client_.get(reverse("drift:cluster_isolate", args=["nope"])).status_code == 404
    banner = viewer_client.get(BANNER).content.decode()
    assert "m25" in banner and "blocking skew" in banner
    restore = reverse("drift:cluster_restore", args=["m25"])
    # a POST with no field at all (a script sending the CSRF token as a header): the note is optional
    assert admin_client_.post(restore).status_code == 302
    assert not Cluster.objects.get(name="m25").isolated
    assert viewer_client.get(BANNER).content.decode().strip() == ""


def test_every_page_loads_the_isolation_banner_slot(viewer_client, governed_fleet):
    body = viewer_client.get(REPORT).content.decode()
    assert f'hx-get="{BANNER}"' in body


def test_auto_isolation_only_when_the_policy_says_so(governed_fleet):
    assert services.enforce_version_policy() == []
    assert not Cluster.objects.filter(isolated=True).exists()
    VersionPolicy.objects.create(pk=1, auto_isolate_on_p0=True)
    isolated = services.enforce_version_policy()
    assert sorted(isolated) == ["m25", "m26", "m27", "m31"]
    assert set(Cluster.objects.filter(isolated=True).values_list("name", flat=True)) == set(isolated)
    event = AuditEvent.objects.filter(action="cluster.isolate").first()
    assert event.actor_name == "system" and event.after["automatic"] is True
    assert services.enforce_version_policy() == []  # safe to run twice


def test_the_compliance_report_follows_an_edit_of_a_resources_type(governed_fleet, admin_user):
    """The type decides the apiVersion a manifest is rendered with: its report was cached on the
    resources' revisions only, and kept the old counts for a day (a reviewer's finding)."""
    from federation.services import update_type

    host, _members, resource = governed_fleet
    before, _ = selectors.fleet_compliance()
    assert {c.name: c for c in before.clusters}["host"].compat["compatible"] == 1
    update_type(resource.type, actor=admin_user, version="v1beta1")
    after, _ = selectors.fleet_compliance()
    assert {c.name: c for c in after.clusters}["host"].compat.get("compatible", 0) == 0
