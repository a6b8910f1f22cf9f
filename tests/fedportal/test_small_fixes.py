"""Issue 23 item 15, the small ones: each asserts what a user sees."""

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from drift import charts
from drift.models import ComplianceSnapshot
from federation.approvals import services as approvals
from federation.approvals.choices import ChangeKind
from fedportal.models import AuditEvent
from fedportal.templatetags.fedportal_text import ago
from tests.clusters.factories import ClusterFactory

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def test_a_moment_ago_is_just_now_not_zero_minutes(client, viewer):
    assert ago(timezone.now()) == "just now"
    assert ago(timezone.now() - timedelta(minutes=5)) == "5\xa0minutes ago"
    ClusterFactory(name="fresh-one", last_probe_at=timezone.now())
    client.force_login(viewer)
    body = client.get(reverse("clusters:cluster_list")).content.decode()
    assert "just now" in body and "0\xa0minutes ago" not in body


def test_unjoin_request_title_names_the_cluster_once(admin_user):
    cluster = ClusterFactory(name="x")
    cr = approvals.create_change_request(kind=ChangeKind.UNJOIN, cluster=cluster, actor=admin_user)
    assert cr.title == "Unjoin cluster x"


def test_pages_name_an_icon_and_favicon_ico_answers(client, viewer):
    client.force_login(viewer)
    body = client.get(reverse("home")).content.decode()
    assert '<link rel="icon" href="/static/img/favicon.svg" type="image/svg+xml">' in body
    client.logout()
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/img/favicon.svg"


def test_cluster_names_do_not_wrap_at_hyphens(client, viewer):
    ClusterFactory(name="eu-prod-west-1")
    client.force_login(viewer)
    body = client.get(reverse("clusters:cluster_list")).content.decode()
    assert 'class="cluster-name"' in body
    css = (ROOT / "static/css/fedportal.css").read_text()
    assert ".cluster-name," in css and "white-space: nowrap" in css


def test_version_history_window_shows_the_30_days_it_uses(client, viewer):
    client.force_login(viewer)
    body = client.get(reverse("drift:version_history")).content.decode()
    assert "Fleet version distribution (30 days)" in body
    assert '<option value="30" selected>30 days</option>' in body


def test_no_internal_jargon_on_drift_pages(client, viewer):
    ClusterFactory(name="host", role="host")
    ClusterFactory(name="m1")
    client.force_login(viewer)
    for url in (
        reverse("drift:skew_matrix"),
        reverse("drift:skew_pair", args=["host", "m1"]),
        reverse("drift:compliance_report"),
    ):
        body = client.get(url).content.decode()
        assert not re.search(r"\bseed", body, re.IGNORECASE), url  # at a word start: the CSRF token is random
    assert "P0: objects fail to sync to the cluster" in client.get(reverse("drift:skew_matrix")).content.decode()


def test_trend_of_one_snapshot_has_day_ticks_not_milliseconds():
    day_one = datetime(2026, 12, 2, 9, 30, tzinfo=UTC)
    fig = charts.compliance_trend([(day_one, 0.5, 1)])
    xaxis = fig["layout"]["xaxis"]
    assert xaxis["dtick"] == 86_400_000 and xaxis["tickformat"] == "%b %d"
    assert xaxis["range"] == ["2026-12-01T09:30:00+00:00", "2026-12-03T09:30:00+00:00"]
    year = charts.compliance_trend([(day_one - timedelta(days=300), 0.5, 1), (day_one, 0.6, 0)])
    assert "dtick" not in year["layout"]["xaxis"]


def test_admin_takes_a_snapshot_now_and_it_is_audited(client, admin_user, viewer):
    ClusterFactory(name="m1")
    client.force_login(viewer)
    report = client.get(reverse("drift:compliance_report")).content.decode()
    assert "snapshot-now" not in report and 'id="compliance-trend-empty"' in report
    assert client.post(reverse("drift:compliance_snapshot")).status_code == 403
    client.force_login(admin_user)
    assert "snapshot-now" in client.get(reverse("drift:compliance_report")).content.decode()
    response = client.post(reverse("drift:compliance_snapshot"))
    assert response.status_code == 302 and response["Location"] == reverse("drift:compliance_report")
    snapshot = ComplianceSnapshot.objects.get()
    assert snapshot.clusters_total == 1
    event = AuditEvent.objects.get(action="drift.compliance_snapshot")
    assert event.actor_name == admin_user.username
    assert 'id="compliance-trend"' in client.get(reverse("drift:compliance_report")).content.decode()
    assert client.get(reverse("drift:compliance_snapshot")).status_code == 405


def test_first_probe_completing_takes_the_first_compliance_snapshot():
    from celery.signals import task_success

    from clusters.tasks import poll_fleet_task, probe_clusters_task

    ClusterFactory(name="m1", last_probe_at=None)
    task_success.send(sender=probe_clusters_task, result={})
    assert not ComplianceSnapshot.objects.exists()  # nothing probed yet
    Cluster = ClusterFactory._meta.model
    Cluster.objects.update(last_probe_at=timezone.now())
    task_success.send(sender=poll_fleet_task, result=1)
    assert not ComplianceSnapshot.objects.exists()  # not a probe
    task_success.send(sender=probe_clusters_task, result={})
    assert ComplianceSnapshot.objects.get().clusters_total == 1
    task_success.send(sender=probe_clusters_task, result={})
    assert ComplianceSnapshot.objects.count() == 1  # only the first; the daily job does the rest


def test_every_resource_condition_badge_has_a_colour():
    """'Propagated' and 'NotPropagated' had no rule and showed as plain text beside coloured pills."""
    from federation.choices import Condition

    css = (ROOT / "static/css/fedportal.css").read_text()
    styled = set(re.findall(r"\.state-([a-z]+)\b", css))
    assert {c.lower() for c in Condition.values} <= styled, {c.lower() for c in Condition.values} - styled
