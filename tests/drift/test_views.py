"""Drift pages: full page, htmx fragment, no-permission, bad input, query counts, caching, CSV."""

import csv
import io
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from drift import selectors
from drift.choices import Severity
from drift.models import VersionPolicy
from fedportal.models import AuditEvent
from tests.utils import EXTERNAL_ASSET

MATRIX = reverse("drift:skew_matrix")
HISTORY = reverse("drift:version_history")
EXPORT = reverse("drift:skew_export")
POLICY = reverse("drift:policy_edit")

pytestmark = pytest.mark.django_db


def pair_url(a, b):
    return reverse("drift:skew_pair", args=[a, b])


# --- matrix --------------------------------------------------------------------------------------


def test_matrix_page_shows_heatmap_table_and_exact_policy_violations(viewer_client, sim_fleet):
    response = viewer_client.get(MATRIX)
    assert response.status_code == 200
    body = response.content.decode()
    assert "plotly/plotly.min.js" in body and not EXTERNAL_ASSET.search(body)
    assert 'id="skew-heatmap"' in body and "skew-heatmap-data" in body
    overview = response.context["overview"]
    severities = {row.name: row.severity for row in overview.member_rows}
    assert severities == {
        "m25": Severity.P0,
        "m26": Severity.P0,
        "m27": Severity.P0,
        "m28": Severity.P2,  # in policy with the host, 3 from m31 (member–member): the older answers
        # m29 runs the host's version; the member–member skew of m25-m27 with it is theirs to fix
        "m29": None,
        # m30/m31 are newer than the host: those findings (P1/P0) are the host's to fix, listed on
        # their rows but not rating them, as in the compliance report (issue 23 item 7)
        "m30": None,
        "m31": None,
    }
    assert pair_url("host", "m27") in body
    assert 'href="/drift/"' in body or "Drift" in body  # nav link


def test_skew_page_and_compliance_report_rate_every_cluster_alike(viewer_client, sim_fleet):
    skew_page = {row.name: row.severity for row in viewer_client.get(MATRIX).context["overview"].member_rows}
    report, _counts = selectors.fleet_compliance()
    compliance = {c.name: c.skew_severity for c in report.clusters if c.name in skew_page}
    assert skew_page == compliance
    assert compliance["m31"] is None  # newer than the host and than m28: theirs to fix
    body = viewer_client.get(MATRIX).content.decode()
    assert "(for host to fix)" in body


def test_matrix_htmx_request_renders_only_the_results_fragment(viewer_client, sim_fleet):
    response = viewer_client.get(MATRIX, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    body = response.content.decode()
    assert "<html" not in body and 'id="skew-heatmap"' in body
    assert "HX-Request" in response.headers.get("Vary", "")


def test_matrix_label_filter_keeps_the_host_and_matching_members(viewer_client, sim_fleet):
    response = viewer_client.get(MATRIX, {"labels": "env=prod"})
    names = [row.name for row in response.context["overview"].rows]
    assert names == ["host", "m25", "m27", "m29", "m31"]


def test_matrix_severity_filter_lists_the_members_with_a_finding_of_that_severity(viewer_client, sim_fleet):
    def names(severity):
        return [obj.name for obj, _ in viewer_client.get(MATRIX, {"severity": severity}).context["rows"]]

    # every member is more than two minors from another one (member–member, P2), m25–m27 rated P0 too
    assert names("P2") == ["m25", "m26", "m27", "m28", "m29", "m30", "m31"]
    # the host's findings are found on their members' rows: m30's P1 and m31's P0 are the host's to fix
    assert names("P1") == ["m30"]
    assert names("P0") == ["m25", "m26", "m27", "m31"]
    assert names("P3") == []
    # nothing of their own to act on: the newer side of a member-member skew, the host's findings
    assert names("ok") == ["m29", "m30", "m31"]


@pytest.fixture
def host_older_fleet(make_cluster):
    """Host v1.28 behind three members (m29 by one minor: P1; m30, m31 by more: P0, the host's to fix),
    m26 too far behind it (P0, its own), a kubelet newer than m28's apiserver (P1, m28's) and one too
    old on the host (P1, the host's alone)."""
    make_cluster("host", "v1.28.2", role="host", kubelets={"h-n1": "v1.24.0"})
    make_cluster("m26", "v1.26.1")
    make_cluster("m28", "v1.28.1", kubelets={"m28-n1": "v1.29.0"})
    for minor in (29, 30, 31):
        make_cluster(f"m{minor}", f"v1.{minor}.1")


def _listed(findings, severity) -> set[str]:
    return {f.message for f in findings if f.severity == severity}


@pytest.mark.parametrize("severity, count, members", [("P0", 3, ["m26", "m30", "m31"]), ("P1", 3, ["m28", "m29"])])
def test_every_finding_the_badge_counts_is_listed_under_its_severity(
    viewer_client, host_older_fleet, severity, count, members
):
    response = viewer_client.get(MATRIX, {"severity": severity})
    overview = response.context["overview"]
    body = response.content.decode()
    assert overview.report.counts[severity] == count
    assert f'<span class="state sev-{severity}">{severity} {count}</span>' in body
    rows = [obj for obj, _ in response.context["rows"]]
    assert [row.name for row in rows] == members
    on_rows = set().union(*(_listed(row.findings, severity) for row in rows))
    listed = on_rows | _listed(overview.fleet_findings, severity)
    assert listed == _listed(overview.report.findings, severity)
    assert len(listed) == count
    for message in listed:
        assert escape(message) in body
    # the CSV lists the same members, with the same findings of that severity
    text = b"".join(viewer_client.get(EXPORT, {"severity": severity}).streaming_content).decode("utf-8-sig")
    header, *csv_rows = list(csv.reader(io.StringIO(text)))
    assert [r[0] for r in csv_rows] == members
    in_csv = {
        entry.removeprefix(f"{severity}: ").removesuffix(" (for host to fix)")
        for r in csv_rows
        for entry in r[header.index("Findings")].split(" | ")
        if entry.startswith(f"{severity}: ")
    }
    assert in_csv == on_rows


def test_a_host_side_finding_is_on_its_members_row_charged_to_the_host(viewer_client, host_older_fleet):
    row = {row.name: row for row in viewer_client.get(MATRIX).context["overview"].member_rows}["m29"]
    assert row.severity is None  # three minors from m26 is m26's to fix, the P1 the host's
    assert row.finding_severities == {Severity.P1, Severity.P2}
    assert row.messages.split(" | ") == [
        "P1: Host host (v1.28) is older than member m29 (v1.29); the host must not be older than any member "
        "(status write-back may fail). (for host to fix)",
        "P2: Members on v1.26 (m26) and on v1.29 (m29) are 3 minors apart; the policy allows 2. (for m26 to fix)",
    ]


@pytest.mark.parametrize("query", [{"labels": "env=pr od"}, {"labels": "=x"}, {"severity": "P9"}])
def test_matrix_bad_filters_are_form_errors_not_500(viewer_client, sim_fleet, query):
    response = viewer_client.get(MATRIX, query)
    assert response.status_code == 200
    assert response.context["form"].errors
    assert "Fix the filter above" in response.content.decode()


def test_matrix_and_pairs_refuse_users_without_a_role(nobody_client, sim_fleet):
    assert nobody_client.get(MATRIX).status_code == 403
    assert nobody_client.get(pair_url("host", "m25")).status_code == 403
    assert nobody_client.get(EXPORT).status_code == 403
    assert nobody_client.get(HISTORY).status_code == 403


def test_matrix_query_count_does_not_grow_with_the_fleet(viewer_client, make_cluster, django_assert_max_num_queries):
    make_cluster("host", "v1.29.0", role="host")
    for i in range(5):
        make_cluster(f"a{i}", f"v1.{25 + i}.0")
    with django_assert_max_num_queries(8):
        assert viewer_client.get(MATRIX).status_code == 200
    for i in range(120):
        make_cluster(f"b{i}", f"v1.{25 + i % 7}.0", kubelets={"n": "v1.20.0"})
    with django_assert_max_num_queries(8):
        response = viewer_client.get(MATRIX)
    assert response.status_code == 200
    assert response.context["page"].paginator.count == 125


def test_heavy_skew_cells_are_cached_until_inputs_change(viewer_client, sim_fleet, monkeypatch):
    calls = []
    original = selectors.compute_skew

    def counting(rows, policy):
        calls.append(len(rows))
        return original(rows, policy)

    monkeypatch.setattr(selectors, "compute_skew", counting)
    viewer_client.get(MATRIX)
    viewer_client.get(MATRIX)
    assert len(calls) == 1
    host, members = sim_fleet
    members[0].server_version = "v1.28.0"
    members[0].save()
    viewer_client.get(MATRIX)
    assert len(calls) == 2  # a version changed
    VersionPolicy.objects.create(pk=1, member_member_max_minor_skew=4)
    viewer_client.get(MATRIX)
    assert len(calls) == 3  # the policy changed


def test_big_fleet_heatmap_collapses_to_versions_and_grid_is_hidden(viewer_client, make_cluster):
    make_cluster("host", "v1.29.0", role="host")
    for i in range(160):
        make_cluster(f"c{i}", f"v1.{25 + i % 7}.0")
    response = viewer_client.get(MATRIX)
    overview = response.context["overview"]
    assert overview.grid is None
    assert len(overview.heatmap["data"][0]["x"]) == 7
    assert response.context["clickable_heatmap"] is False


def test_unknown_versions_render_without_crashing(viewer_client, make_cluster):
    make_cluster("host", "", role="host")
    make_cluster("m1", "banana", kubelets={"n": "??"})
    response = viewer_client.get(MATRIX)
    assert response.status_code == 200
    assert "is unknown" in response.content.decode()


# --- pair ------------------------------------------------------------------------------------------


def test_pair_page_explains_the_policy(viewer_client, sim_fleet):
    response = viewer_client.get(pair_url("host", "m27"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "What the policy says" in body and "<html" in body
    assert "P0" in body and "2 minors behind host" in body


def test_pair_fragment_for_htmx(viewer_client, sim_fleet):
    response = viewer_client.get(pair_url("m28", "host"), HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body
    assert "within policy" in body


def test_pair_of_unknown_clusters_is_404(viewer_client, sim_fleet):
    assert viewer_client.get(pair_url("host", "nope")).status_code == 404


NUL_NAME_URLS = [
    ("get", "/drift/pair/%00/host/"),
    ("get", "/drift/pair/host/m%0028/"),
    ("get", "/drift/compat/1/%00/"),
    ("get", "/drift/isolation/m%0028/isolate/"),
    ("post", "/drift/isolation/%00/restore/"),
    ("post", "/drift/upgrade/%00/"),
]


@pytest.mark.parametrize("method,url", NUL_NAME_URLS)
def test_a_cluster_name_with_a_null_character_is_404(admin_client_, sim_fleet, method, url):
    # the name went straight into filter(name=...), which PostgreSQL refuses (a 500 there)
    assert getattr(admin_client_, method)(url).status_code == 404


@pytest.mark.parametrize("url", [url for _, url in NUL_NAME_URLS])
def test_cluster_name_segments_do_not_match_a_null_character(url):
    from urllib.parse import unquote

    from django.urls import Resolver404, resolve

    with pytest.raises(Resolver404):
        resolve(unquote(url))
    assert resolve(unquote(url).replace("\x00", "x")).url_name  # the same URL with a plain name matches


# --- export --------------------------------------------------------------------------------------


def test_export_streams_csv_of_members_and_is_audited(viewer_client, sim_fleet):
    response = viewer_client.get(EXPORT, {"labels": "env=prod"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    text = b"".join(response.streaming_content).decode("utf-8-sig")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][:3] == ["Cluster", "Version", "gitVersion"]
    assert [r[0] for r in rows[1:]] == ["m25", "m27", "m29", "m31"]
    assert rows[1][rows[0].index("Severity")] == "P0"
    assert AuditEvent.objects.filter(action="drift.skew.export").count() == 1


def test_export_rejects_bad_filters_with_400(viewer_client, sim_fleet):
    response = viewer_client.get(EXPORT, {"labels": "a=b=c"})
    assert response.status_code == 400
    assert b"Bad filter" in response.content


def test_export_neutralises_formula_labels(viewer_client, make_cluster):
    make_cluster("host", "v1.29.0", role="host")
    make_cluster("m1", "v1.29.0", labels={"team": "x"})
    from clusters.models import Cluster

    Cluster.objects.filter(name="m1").update(labels={"=cmd": "=1+1"})  # bypasses validation on purpose
    text = b"".join(viewer_client.get(EXPORT).streaming_content).decode("utf-8-sig")
    assert "'=cmd" in text


# --- history -------------------------------------------------------------------------------------


def test_version_history_page_and_fragment(viewer_client, sim_fleet, django_assert_max_num_queries):
    from clusters.models import VersionSample

    host, members = sim_fleet
    now = timezone.now()
    VersionSample.objects.create(cluster=members[0], sampled_at=now - timedelta(days=40), git_version="v1.24.0")
    VersionSample.objects.create(cluster=members[0], sampled_at=now - timedelta(days=3), git_version="v1.25.1")
    VersionSample.objects.create(cluster=host, sampled_at=now - timedelta(days=10), git_version="v1.29.2")
    with django_assert_max_num_queries(12):
        response = viewer_client.get(HISTORY)
    assert response.status_code == 200
    body = response.content.decode()
    assert "plotly/plotly.min.js" in body and "version-timeline-data" in body
    timeline = {t["name"]: t for t in response.context["timeline"]["data"]}
    assert timeline["m25"]["text"][:2] == ["v1.24.0", "v1.25.1"]
    dist = response.context["distribution"]
    assert {t["name"] for t in dist["data"]} == {"v1.24", "v1.25", "v1.29"}
    fragment = viewer_client.get(HISTORY, {"days": 7}, HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and "<html" not in fragment.content.decode()


def test_version_history_bad_window_is_a_form_error(viewer_client, sim_fleet):
    response = viewer_client.get(HISTORY, {"days": "9999"})
    assert response.status_code == 200
    assert response.context["form"].errors


# --- policy --------------------------------------------------------------------------------------


def test_admin_edits_policy_and_it_is_audited_and_used(admin_client_, sim_fleet):
    assert admin_client_.get(POLICY).status_code == 200
    data = {
        "host_member_max_minor_skew": 4,
        "member_member_max_minor_skew": 6,
        "kubelet_max_older_minors": 3,
        "kubelet_max_older_minors_before_1_28": 2,
    }
    response = admin_client_.post(POLICY, data)
    assert response.status_code == 302
    policy = VersionPolicy.load()
    assert policy.host_member_max_minor_skew == 4 and policy.auto_isolate_on_p0 is False
    event = AuditEvent.objects.get(action="drift.policy.update")
    assert event.before["host_member_max_minor_skew"] == 1 and event.after["host_member_max_minor_skew"] == 4
    rows = admin_client_.get(MATRIX).context["overview"].member_rows
    assert {r.name: r.severity for r in rows}["m25"] is None


def test_policy_rejects_bad_values_without_saving(admin_client_, sim_fleet):
    response = admin_client_.post(
        POLICY,
        {
            "host_member_max_minor_skew": -1,
            "member_member_max_minor_skew": 99,
            "kubelet_max_older_minors": "x",
            "kubelet_max_older_minors_before_1_28": 2,
        },
    )
    assert response.status_code == 400
    assert not VersionPolicy.objects.exists()
    assert not AuditEvent.objects.filter(action="drift.policy.update").exists()


def test_viewer_cannot_edit_policy(viewer_client):
    assert viewer_client.get(POLICY).status_code == 403
    assert viewer_client.post(POLICY, {"host_member_max_minor_skew": 3}).status_code == 403
    assert not VersionPolicy.objects.exists()


def test_policy_service_refuses_non_admins(viewer):
    from django.core.exceptions import PermissionDenied

    from drift.services import update_version_policy

    with pytest.raises(PermissionDenied):
        update_version_policy(actor=viewer, host_member_max_minor_skew=3)


def test_dashboard_panel_fragment(viewer_client, nobody_client, sim_fleet):
    response = viewer_client.get(reverse("drift:summary"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "P0 4" in body and "No compliance snapshot yet" in body
    assert nobody_client.get(reverse("drift:summary")).status_code == 403
    home = viewer_client.get(reverse("home")).content.decode()
    assert reverse("drift:summary") in home


def test_matrix_without_a_host_says_host_rules_are_not_checked(viewer_client, make_cluster):
    make_cluster("a", "v1.25.0", labels={"tier": "web"})
    make_cluster("b", "v1.29.0")
    response = viewer_client.get(MATRIX, {"labels": "tier"})
    assert response.status_code == 200
    assert "No host cluster is registered" in response.content.decode()
    assert [r.name for r in response.context["overview"].rows] == ["a"]


def test_compat_matrix_only_findings_hides_clean_clusters_and_resources(viewer_client, sim_fleet):
    """Issue 23 item 14: the switch leaves only the clusters and resources with a finding."""
    from types import SimpleNamespace

    from drift.selectors import CompatCell
    from drift.views import only_findings

    def cell(cluster, status):
        result = None if status is None else SimpleNamespace(status=status, problems=[])
        return CompatCell(1, cluster, status is not None, result)

    clusters = [SimpleNamespace(name=n) for n in ("a", "b", "c", "d")]
    grid = [
        ("web", [cell("a", "compatible"), cell("b", "incompatible"), cell("c", None), cell("d", "compatible")]),
        ("api", [cell("a", "compatible"), cell("b", "compatible"), cell("c", None), cell("d", "unverifiable")]),
        ("db", [cell("a", "compatible"), cell("b", "compatible"), cell("c", None), cell("d", "compatible")]),
    ]
    rows, kept = only_findings(grid, clusters)
    assert [c.name for c in kept] == ["b", "d"]
    assert [(name, [c.status for c in cells]) for name, cells in rows] == [
        ("web", ["incompatible", "compatible"]),
        ("api", ["compatible", "unverifiable"]),
    ]
    response = viewer_client.get(reverse("drift:compat_matrix"), {"findings": "on"})
    assert response.status_code == 200 and 'name="findings"' in response.content.decode()
