"""The version-skew policy engine over plain inputs."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drift.choices import Severity, SkewRule
from drift.skew import (
    ClusterVersion,
    KubeVersion,
    SkewPolicy,
    evaluate_fleet,
    evaluate_kubelets,
    evaluate_pair,
    minor_matrix,
    parse_version,
)


def host(version="v1.29.2", name="host", kubelets=None):
    return ClusterVersion(name, "host", version, kubelets or {})


def member(name, version, kubelets=None):
    return ClusterVersion(name, "member", version, kubelets or {})


def rules(report):
    return sorted((str(f.rule), str(f.severity), f.clusters) for f in report.findings)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("v1.27.3", KubeVersion(1, 27, 3)),
        ("1.28", KubeVersion(1, 28, 0)),
        ("v1.27.3-eks-4f4795d", KubeVersion(1, 27, 3)),
        ("v1.28.2+k3s1", KubeVersion(1, 28, 2)),
        ("v1.30.0-gke.1200", KubeVersion(1, 30, 0)),
        ("", None),
        ("latest", None),
        ("v2.0.0", None),
        (None, None),
        (127, None),
        ("v1", None),
    ],
)
def test_parse_version_reads_git_versions_and_calls_the_rest_unknown(text, expected):
    assert parse_version(text) == expected


def test_member_two_minors_behind_host_is_blocking_p0():
    report = evaluate_fleet([host("v1.29.0"), member("old", "v1.27.5")])
    assert rules(report) == [(SkewRule.HOST_MEMBER_SKEW, Severity.P0, ("host", "old"))]
    assert report.worst_by_cluster == {"host": Severity.P0, "old": Severity.P0}


def test_member_one_minor_behind_host_is_within_policy():
    report = evaluate_fleet([host("v1.29.0"), member("m", "v1.28.1")])
    assert report.findings == ()
    assert report.worst_by_cluster == {"host": None, "m": None}


def test_host_one_minor_older_than_member_is_p1_status_write_back():
    report = evaluate_fleet([host("v1.29.0"), member("new", "v1.30.0")])
    assert rules(report) == [(SkewRule.HOST_OLDER_THAN_MEMBER, Severity.P1, ("host", "new"))]


def test_host_two_minors_older_than_member_is_p0():
    report = evaluate_fleet([host("v1.29.0"), member("new", "v1.31.0")])
    assert rules(report) == [(SkewRule.HOST_MEMBER_SKEW, Severity.P0, ("host", "new"))]


def test_members_further_apart_than_allowed_are_p2_grouped_by_minor():
    clusters = [host("v1.27.0"), member("a", "v1.26.0"), member("b", "v1.26.3"), member("c", "v1.29.0")]
    report = evaluate_fleet(clusters, SkewPolicy(member_member_max_minor_skew=2))
    mm = [f for f in report.findings if f.rule == SkewRule.MEMBER_MEMBER_SKEW]
    assert len(mm) == 1
    assert mm[0].severity == Severity.P2
    assert mm[0].clusters == ("a", "b", "c")
    assert mm[0].difference == 3
    assert "v1.26" in mm[0].message and "v1.29" in mm[0].message


def test_member_member_skew_is_configurable():
    clusters = [member("a", "v1.25.0"), member("b", "v1.28.0")]
    assert evaluate_fleet(clusters, SkewPolicy(member_member_max_minor_skew=3)).findings == ()
    assert len(evaluate_fleet(clusters, SkewPolicy(member_member_max_minor_skew=2)).findings) == 1


def test_simulator_fleet_shows_exactly_the_policy_violations():
    clusters = [host("v1.29.0")] + [member(f"m{minor}", f"v1.{minor}.0") for minor in range(25, 32)]
    report = evaluate_fleet(clusters)
    host_rules = {f.clusters[1]: (f.rule, f.severity) for f in report.findings if f.clusters[0] == "host"}
    assert host_rules == {
        "m25": (SkewRule.HOST_MEMBER_SKEW, Severity.P0),
        "m26": (SkewRule.HOST_MEMBER_SKEW, Severity.P0),
        "m27": (SkewRule.HOST_MEMBER_SKEW, Severity.P0),
        "m30": (SkewRule.HOST_OLDER_THAN_MEMBER, Severity.P1),
        "m31": (SkewRule.HOST_MEMBER_SKEW, Severity.P0),
    }
    mm = {(f.clusters[0], f.clusters[-1]) for f in report.findings if f.rule == SkewRule.MEMBER_MEMBER_SKEW}
    expected = {(f"m{a}", f"m{b}") for a in range(25, 32) for b in range(25, 32) if b - a > 2}
    assert mm == expected


def test_kubelet_newer_than_apiserver_is_p1():
    skew = evaluate_kubelets(member("m", "v1.28.0", {"n1": "v1.29.1", "n2": "v1.28.0"}), SkewPolicy())
    assert [(f.rule, f.severity, f.nodes) for f in skew.findings] == [(SkewRule.KUBELET_NEWER, Severity.P1, ("n1",))]
    assert skew.ahead == 1 and skew.behind == 0


@pytest.mark.parametrize(
    "api, kubelet, violates",
    [
        ("v1.28.0", "v1.25.0", False),  # 3 older allowed from 1.28
        ("v1.28.0", "v1.24.0", True),
        ("v1.27.0", "v1.25.0", False),  # 2 older allowed before 1.28
        ("v1.27.0", "v1.24.0", True),
    ],
)
def test_kubelet_may_be_three_minors_older_since_1_28_and_two_before(api, kubelet, violates):
    skew = evaluate_kubelets(member("m", api, {"n": kubelet}), SkewPolicy())
    assert [f.rule for f in skew.findings] == ([SkewRule.KUBELET_TOO_OLD] if violates else [])


def test_unknown_versions_are_p3_findings_never_a_crash():
    clusters = [host("garbage"), member("m", ""), member("ok", "v1.29.0", {"n": "???", "n2": None})]
    report = evaluate_fleet(clusters)
    assert (SkewRule.VERSION_UNKNOWN, Severity.P3, ("host",)) in rules(report)
    assert (SkewRule.VERSION_UNKNOWN, Severity.P3, ("m",)) in rules(report)
    assert (SkewRule.KUBELET_VERSION_UNKNOWN, Severity.P3, ("ok",)) in rules(report)
    matrix = minor_matrix(clusters, SkewPolicy())
    assert matrix.versions == ["unknown", "unknown", "v1.29"]
    assert matrix.cells[0][2] is None


def test_matrix_cells_are_row_minus_column_with_pair_severity():
    clusters = [host("v1.29.0"), member("a", "v1.27.0"), member("b", "v1.29.3")]
    matrix = minor_matrix(clusters, SkewPolicy())
    assert matrix.cells == [[0, 2, 0], [-2, 0, -2], [0, 2, 0]]
    assert matrix.severities[0][1] == Severity.P0
    assert matrix.severities[1][2] is None  # members 2 apart: allowed by default
    assert matrix.severities[0][0] is None


def test_pair_verdict_explains_the_rule_even_when_ok():
    verdict = evaluate_pair(host("v1.29.0"), member("a", "v1.28.0"), SkewPolicy())
    assert verdict.ok and verdict.relation == "host-member" and verdict.difference == 1
    assert "at most 1 minor" in verdict.rule_text


@pytest.mark.parametrize("bad", [-1, "2", 1.5, True, 51])
def test_policy_rejects_nonsense_values(bad):
    with pytest.raises(ValueError):
        SkewPolicy(member_member_max_minor_skew=bad)


version_text = st.one_of(
    st.builds(lambda a, b, c: f"v{a}.{b}.{c}", st.integers(0, 3), st.integers(0, 60), st.integers(0, 20)),
    st.text(max_size=12),
)
cluster_lists = st.lists(
    st.tuples(
        st.sampled_from(["host", "member"]),
        version_text,
        st.dictionaries(st.text(max_size=4), version_text, max_size=3),
    ),
    max_size=8,
)


@given(cluster_lists, st.integers(0, 5), st.integers(0, 5))
def test_fleet_evaluation_never_crashes_and_matrix_is_antisymmetric(spec, hm, mm):
    clusters = [ClusterVersion(f"c{i}", role, v, k) for i, (role, v, k) in enumerate(spec)]
    policy = SkewPolicy(host_member_max_minor_skew=hm, member_member_max_minor_skew=mm)
    report = evaluate_fleet(clusters, policy)
    matrix = minor_matrix(clusters, policy)
    n = len(clusters)
    for i in range(n):
        for j in range(n):
            a, b = matrix.cells[i][j], matrix.cells[j][i]
            assert (a is None) == (b is None)
            if a is not None:
                assert a == -b
            assert matrix.severities[i][j] == matrix.severities[j][i]
    for finding in report.findings:
        assert finding.severity in Severity.values
        assert set(finding.clusters) <= {c.name for c in clusters}


@given(st.integers(20, 40), st.integers(20, 40), st.integers(0, 4))
def test_host_member_finding_iff_skew_exceeds_or_host_older(h, m, allowed):
    policy = SkewPolicy(host_member_max_minor_skew=allowed)
    verdict = evaluate_pair(host(f"v1.{h}.0"), member("m", f"v1.{m}.0"), policy)
    if abs(h - m) > allowed:
        assert verdict.severity == Severity.P0
    elif h < m:
        assert verdict.severity == Severity.P1
    else:
        assert verdict.ok


def test_the_cluster_that_must_act_is_accountable():
    report = evaluate_fleet([host("v1.29.0"), member("old", "v1.27.0"), member("new", "v1.30.0")])
    # the member-member skew of old and new is old's to fix (the seeds upgrade the lower member)
    assert report.worst_accountable_by_cluster == {"host": Severity.P1, "old": Severity.P0, "new": None}
    # ... unless old runs the host's version (it cannot go past the host): new is ahead of the host,
    # which answers for both findings
    at_host = evaluate_fleet([host("v1.28.0"), member("old", "v1.28.0"), member("new", "v1.31.0")])
    assert at_host.worst_accountable_by_cluster == {"host": Severity.P0, "old": None, "new": None}
    assert report.worst_by_cluster["new"] == Severity.P1  # involved in the host pair
    assert [f.rule for f in report.findings_accountable("host")] == [SkewRule.HOST_OLDER_THAN_MEMBER]
