"""Charts: plain data in, valid plotly figures out."""

import json
from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go

from drift import charts
from drift.skew import ClusterVersion, SkewPolicy, minor_matrix

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def valid(fig: dict) -> dict:
    json.dumps(fig)  # JSON-ready
    go.Figure(fig)  # plotly accepts every property
    return fig


def fleet(n):
    return (
        [ClusterVersion("host", "host", "v1.29.0")]
        + [ClusterVersion(f"m{i}", "member", f"v1.{25 + i % 7}.0") for i in range(n - 1)]
        + [ClusterVersion("odd", "member", "who-knows")]
    )


def test_skew_heatmap_is_clusters_by_clusters_with_severity_text():
    matrix = minor_matrix(fleet(8), SkewPolicy())
    fig = valid(charts.skew_heatmap(matrix))
    trace = fig["data"][0]
    assert trace["x"] == matrix.names and trace["y"] == matrix.names
    m0, m3, m5, m6 = (matrix.names.index(n) for n in ("m0", "m3", "m5", "m6"))
    assert trace["text"][0][m0] == "+4 P0"  # host v1.29 - m0 v1.25
    # colour is the severity (issue 23 item 7): P0 is the top of the scale whatever the gap's sign
    assert trace["z"][0][m0] == charts.SEVERITY_LEVELS["P0"] == 4
    assert trace["text"][0][m6] == "-2 P0" and trace["z"][0][m6] == 4  # host 2 minors behind m6 v1.31
    assert trace["text"][0][m5] == "-1 P1" and trace["z"][0][m5] == 3
    assert trace["text"][0][m3] == "+1" and trace["z"][0][m3] == 0  # within policy: no finding
    assert trace["z"][0][0] is None  # a cluster against itself: a gap
    assert trace["text"][0][-1] == "? P3" and trace["z"][0][-1] == 1  # unknown version


def test_big_fleet_heatmap_collapses_to_versions():
    matrix = minor_matrix(fleet(400), SkewPolicy())
    fig = valid(charts.skew_heatmap(matrix, max_clusters=150))
    trace = fig["data"][0]
    assert len(trace["x"]) == 8  # v1.25..v1.31 and unknown
    assert trace["x"][0].startswith("v1.25 (")
    assert trace["x"][-1].startswith("unknown")


def test_version_timeline_and_distribution():
    samples = {
        "a": [(T0, "v1.27.1"), (T0 + timedelta(days=2), "v1.28.0")],
        "b": [(T0 + timedelta(days=1), "v1.28.3")],
        "c": [(T0, "junk")],
    }
    timeline = valid(charts.version_timeline(samples, until=T0 + timedelta(days=3)))
    assert [t["name"] for t in timeline["data"]] == ["a", "b", "c"]
    assert timeline["data"][0]["y"] == [27, 28, 28]
    points = charts.distribution_over_time(samples, [T0, T0 + timedelta(days=1), T0 + timedelta(days=2)])
    assert points[0][1] == {"v1.27": 1, "unknown": 1}
    assert points[1][1] == {"v1.27": 1, "v1.28": 1, "unknown": 1}
    assert points[2][1] == {"v1.28": 2, "unknown": 1}
    dist = valid(charts.version_distribution(points))
    assert [t["name"] for t in dist["data"]] == ["v1.27", "v1.28", "unknown"]
    assert dist["data"][1]["y"] == [0, 1, 2]


def test_compliance_trend_and_severity_bar():
    fig = valid(charts.compliance_trend([(T0 + timedelta(days=1), 0.5, 3), (T0, 0.25, 7)]))
    assert fig["data"][0]["y"] == [25.0, 50.0]
    assert fig["data"][1]["y"] == [7, 3]
    bar = valid(charts.severity_bar({"P0": 2, "P2": 1}))
    assert bar["data"][0]["y"] == [2, 0, 1, 0]


def test_empty_inputs_give_empty_but_valid_figures():
    valid(charts.skew_heatmap(minor_matrix([], SkewPolicy())))
    valid(charts.version_timeline({}))
    valid(charts.version_distribution([]))
    valid(charts.compliance_trend([]))


def test_big_fleet_version_heatmap_is_coloured_by_severity_too():
    """Issue 23 item 7: past 150 clusters the versions × versions heatmap colours severity as well."""
    from drift.selectors import version_pair_severities

    clusters = fleet(400)
    rows = [type("Row", (), {"version_label": minor_matrix([c], SkewPolicy()).versions[0]})() for c in clusters]
    severities = version_pair_severities(rows, clusters, SkewPolicy())
    matrix = minor_matrix([], SkewPolicy())
    matrix = type(matrix)([c.name for c in clusters], [r.version_label for r in rows], [], [])
    trace = valid(charts.skew_heatmap(matrix, max_clusters=150, version_severities=severities))["data"][0]
    labels = [x.split(" ")[0] for x in trace["x"]]
    v125, v129, v131 = labels.index("v1.25"), labels.index("v1.29"), labels.index("v1.31")
    # the host is on v1.29: v1.31 members are two minors ahead of it (P0), as in the cluster heatmap
    assert trace["text"][v129][v131] == "-2 P0" and trace["z"][v129][v131] == 4
    assert trace["z"][v129][v125] == 4 and trace["text"][v129][v125] == "+4 P0"


def test_titles_and_the_right_axis_take_room_of_their_own():
    """The heatmap's title was drawn over its column names (an axis at the top), and the trend's
    right axis title over its tick labels: both now make their margin grow (plotly's automargin)."""
    heatmap = valid(charts.skew_heatmap(minor_matrix(fleet(8), SkewPolicy())))
    assert heatmap["layout"]["xaxis"]["side"] == "top" and heatmap["layout"]["title"]["automargin"] is True
    assert heatmap["layout"]["title"]["yref"] == "container"  # automargin needs a title placed on the container
    trend = valid(charts.compliance_trend([(T0, 0.25, 7)]))
    assert trend["layout"]["yaxis2"]["automargin"] is True and trend["layout"]["title"]["automargin"] is True
