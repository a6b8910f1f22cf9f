"""Plain data in, plotly figure out (a JSON-ready dict ``{"data": [...], "layout": {...}}``).

No ORM and no HTTP here: selectors shape the rows, templates hand the dict to
``Plotly.newPlot`` (plotly.js is served locally). Every figure is valid for
``plotly.graph_objects.Figure(fig)`` (the tests check it).
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from drift.choices import Severity
from drift.skew import MinorMatrix, parse_version

MAX_HEATMAP_CLUSTERS = 150
DAY_MS = 86_400_000
SEVERITY_COLOURS = {Severity.P0: "#b3261e", Severity.P1: "#e8710a", Severity.P2: "#f9ab00", Severity.P3: "#5f6368"}
_FONT = {"family": "system-ui, sans-serif", "size": 12}


def _layout(title: str, **extra) -> dict:
    layout = {
        # automargin: the title takes room of its own instead of being drawn over an axis at the top
        "title": {"text": title, "automargin": True, "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 8}},
        "font": _FONT,
        "margin": {"l": 70, "r": 20, "t": 50, "b": 70},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
    }
    layout.update(extra)
    return layout


def _iso(value) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _version_sort_key(label: str):
    parsed = parse_version(label)
    return (0, parsed.minor) if parsed else (1, 0)


# Heatmap cells are coloured by severity (one colour per level, the same as the badges), so a P0
# cell is red whatever the sign or size of the version gap; the gap is the cell's text.
SEVERITY_LEVELS = {None: 0, Severity.P3: 1, Severity.P2: 2, Severity.P1: 3, Severity.P0: 4}
OK_COLOUR = "#e6f4ea"


def severity_colorscale() -> list:
    bands = [
        OK_COLOUR,
        SEVERITY_COLOURS[Severity.P3],
        SEVERITY_COLOURS[Severity.P2],
        SEVERITY_COLOURS[Severity.P1],
        SEVERITY_COLOURS[Severity.P0],
    ]
    scale = []
    for level, colour in enumerate(bands):
        scale += [[max(0.0, (level - 0.5) / 4), colour], [min(1.0, (level + 0.5) / 4), colour]]
    return scale


def skew_heatmap(
    matrix: MinorMatrix,
    *,
    max_clusters: int = MAX_HEATMAP_CLUSTERS,
    version_severities: Mapping[tuple[str, str], str | None] | None = None,
) -> dict:
    """Clusters × clusters heatmap: colour = the pair's severity, text = minor difference (row minus
    column) and severity.

    Past ``max_clusters`` the cluster-level heatmap stops being readable (and weighs megabytes), so
    it becomes versions × versions with the number of clusters on each version in the labels; the
    difference depends only on the two versions anyway.
    """
    n = len(matrix.names)
    if n > max_clusters:
        return _version_heatmap(matrix, version_severities)

    def cell_text(i, j):
        if i == j:
            return ""
        diff, severity = matrix.cells[i][j], matrix.severities[i][j]
        gap = "?" if diff is None else f"{diff:+d}" if diff else "0"
        return f"{gap} {severity}" if severity else gap

    z = [[None if i == j else SEVERITY_LEVELS[matrix.severities[i][j] or None] for j in range(n)] for i in range(n)]
    hover = [
        [
            f"{matrix.names[i]} ({matrix.versions[i]}) vs {matrix.names[j]} ({matrix.versions[j]})<br>"
            f"minor difference {'?' if matrix.cells[i][j] is None else matrix.cells[i][j]}<br>"
            f"{matrix.severities[i][j] or 'no finding'}"
            for j in range(n)
        ]
        for i in range(n)
    ]
    trace = {
        "type": "heatmap",
        "x": list(matrix.names),
        "y": list(matrix.names),
        "z": z,
        "text": [[cell_text(i, j) for j in range(n)] for i in range(n)],
        "customdata": hover,
        "texttemplate": "%{text}" if n <= 40 else "",
        "hovertemplate": "%{customdata}<extra></extra>",
        "colorscale": severity_colorscale(),
        "zmin": 0,
        "zmax": 4,
        "colorbar": {
            "title": {"text": "severity"},
            "tickvals": [0, 1, 2, 3, 4],
            "ticktext": ["ok", "P3", "P2", "P1", "P0"],
        },
        "hoverongaps": False,
        "xgap": 1,
        "ygap": 1,
    }
    return {
        "data": [trace],
        "layout": _layout(
            "Version skew between clusters (colour: severity; text: minor difference)",
            xaxis={"side": "top", "tickangle": -45, "automargin": True},
            yaxis={"autorange": "reversed", "automargin": True},
            height=max(360, min(1200, 60 + 22 * n)),
        ),
    }


def _version_heatmap(matrix: MinorMatrix, severities: Mapping[tuple[str, str], str | None] | None = None) -> dict:
    """Versions × versions; with ``severities`` ((row version, column version) -> worst severity)
    the colour is the severity, as in the cluster heatmap, and the text the gap and severity."""
    counts = Counter(matrix.versions)
    labels = sorted(counts, key=_version_sort_key)
    minors = {label: (parse_version(label).minor if parse_version(label) else None) for label in labels}
    axis = [f"{label} ({counts[label]})" for label in labels]
    gaps = [
        [(minors[a] - minors[b]) if minors[a] is not None and minors[b] is not None else None for b in labels]
        for a in labels
    ]
    trace = {
        "type": "heatmap",
        "x": axis,
        "y": axis,
        "z": gaps,
        "texttemplate": "%{z}",
        "hovertemplate": "%{y} vs %{x}<br>minor difference %{z}<extra></extra>",
        "colorscale": "RdBu",
        "zmid": 0,
        "colorbar": {"title": {"text": "row − column (minors)"}},
        "hoverongaps": False,
    }
    if severities is not None:
        sev = [[severities.get((a, b)) for b in labels] for a in labels]
        text = [
            [
                (
                    ("?" if gaps[i][j] is None else f"{gaps[i][j]:+d}" if gaps[i][j] else "0")
                    + (f" {sev[i][j]}" if sev[i][j] else "")
                )
                for j in range(len(labels))
            ]
            for i in range(len(labels))
        ]
        trace.update(
            z=[[SEVERITY_LEVELS[s or None] for s in row] for row in sev],
            text=text,
            texttemplate="%{text}",
            hovertemplate="%{y} vs %{x}<br>%{text}<extra></extra>",
            colorscale=severity_colorscale(),
            zmin=0,
            zmax=4,
            colorbar={
                "title": {"text": "severity"},
                "tickvals": [0, 1, 2, 3, 4],
                "ticktext": ["ok", "P3", "P2", "P1", "P0"],
            },
        )
        trace.pop("zmid")
    return {
        "data": [trace],
        "layout": _layout(
            f"Version skew by version ({len(matrix.names)} clusters; number on each version in brackets)",
            xaxis={"side": "top", "automargin": True},
            yaxis={"autorange": "reversed", "automargin": True},
            height=max(360, 80 + 40 * len(labels)),
        ),
    }


def version_timeline(samples: Mapping[str, Sequence[tuple[datetime, str]]], *, until: datetime | None = None) -> dict:
    """Per cluster, its minor version over time as a step line; ``samples`` are (time, gitVersion)."""
    data = []
    seen_minors: set[int] = set()
    for name in sorted(samples):
        points = sorted(samples[name], key=lambda p: p[0])
        xs, ys, texts = [], [], []
        for at, git_version in points:
            parsed = parse_version(git_version)
            xs.append(_iso(at))
            ys.append(parsed.minor if parsed else None)
            texts.append(git_version or "unknown")
            if parsed:
                seen_minors.add(parsed.minor)
        if until is not None and points:
            xs.append(_iso(until))
            ys.append(ys[-1])
            texts.append(texts[-1])
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": name,
                "x": xs,
                "y": ys,
                "text": texts,
                "line": {"shape": "hv"},
                "connectgaps": False,
                "hovertemplate": f"{name}<br>%{{x}}<br>%{{text}}<extra></extra>",
            }
        )
    ticks = sorted(seen_minors)
    return {
        "data": data,
        "layout": _layout(
            "Kubernetes version per cluster",
            xaxis={"type": "date", "title": {"text": "time"}},
            yaxis={"title": {"text": "version"}, "tickvals": ticks, "ticktext": [f"v1.{m}" for m in ticks], "dtick": 1},
            showlegend=len(data) <= 30,
            height=420,
        ),
    }


def distribution_over_time(
    samples: Mapping[str, Sequence[tuple[datetime, str]]], times: Sequence[datetime]
) -> list[tuple[datetime, dict[str, int]]]:
    """How many clusters ran each minor at each of ``times`` (a cluster counts from its first sample)."""
    per_cluster = {}
    for name, points in samples.items():
        ordered = sorted(points, key=lambda p: p[0])
        per_cluster[name] = ([p[0] for p in ordered], [p[1] for p in ordered])
    out = []
    for at in times:
        counts: dict[str, int] = defaultdict(int)
        for stamps, versions in per_cluster.values():
            index = bisect.bisect_right(stamps, at) - 1
            if index < 0:
                continue
            parsed = parse_version(versions[index])
            counts[parsed.label if parsed else "unknown"] += 1
        out.append((at, dict(counts)))
    return out


def version_distribution(points: Iterable[tuple[datetime, Mapping[str, int]]]) -> dict:
    """Fleet version distribution over time: a stacked area per version."""
    points = list(points)
    labels = sorted({label for _, counts in points for label in counts}, key=_version_sort_key)
    xs = [_iso(at) for at, _ in points]
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "stackgroup": "versions",
            "name": label,
            "x": xs,
            "y": [counts.get(label, 0) for _, counts in points],
            "hovertemplate": f"{label}: %{{y}} cluster(s)<extra></extra>",
        }
        for label in labels
    ]
    return {
        "data": data,
        "layout": _layout(
            "Fleet version distribution over time",
            xaxis={"type": "date"},
            yaxis={"title": {"text": "clusters"}, "rangemode": "tozero"},
            height=380,
        ),
    }


def compliance_trend(points: Iterable[tuple[datetime, float, int]]) -> dict:
    """Compliant share (0..1, left axis) and open drift (count, right axis) over time."""
    points = sorted(points, key=lambda p: p[0])
    xs = [_iso(at) for at, _, _ in points]
    # Snapshots are daily: ticks are days. With one snapshot (day one) or a few close together,
    # plotly would zoom to their spread and label the axis in milliseconds; show a few days instead.
    xaxis = {"type": "date", "tickformat": "%b %d"}
    if points:
        first, last = points[0][0], points[-1][0]
        if isinstance(first, datetime) and (last - first) <= timedelta(days=14):
            xaxis.update(dtick=DAY_MS, range=[_iso(first - timedelta(days=1)), _iso(last + timedelta(days=1))])
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "compliant share",
                "x": xs,
                "y": [round(share * 100, 2) for _, share, _ in points],
                "hovertemplate": "%{y:.1f}% compliant<extra></extra>",
                "line": {"color": "#188038"},
            },
            {
                "type": "bar",
                "name": "open drift",
                "x": xs,
                "y": [drift for _, _, drift in points],
                "yaxis": "y2",
                "opacity": 0.5,
                "marker": {"color": SEVERITY_COLOURS[Severity.P1]},
                "hovertemplate": "%{y} open drift<extra></extra>",
            },
        ],
        "layout": _layout(
            "Compliance over time",
            xaxis=xaxis,
            yaxis={"title": {"text": "compliant clusters (%)"}, "range": [0, 100]},
            yaxis2={
                "title": {"text": "open drift"},
                "overlaying": "y",
                "side": "right",
                "rangemode": "tozero",
                "automargin": True,  # room for its ticks and title (they were drawn over each other)
            },
            legend={"orientation": "h"},
            height=380,
        ),
    }


def severity_bar(counts: Mapping[str, int]) -> dict:
    """Findings per severity (P0..P3)."""
    order = list(Severity.values)
    return {
        "data": [
            {
                "type": "bar",
                "x": order,
                "y": [counts.get(s, 0) for s in order],
                "marker": {"color": [SEVERITY_COLOURS[s] for s in order]},
                "hovertemplate": "%{x}: %{y} finding(s)<extra></extra>",
            }
        ],
        "layout": _layout("Skew findings by severity", height=260, yaxis={"rangemode": "tozero"}),
    }
