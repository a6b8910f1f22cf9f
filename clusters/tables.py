"""Columns of the cluster inventory, shared by the HTML table and the streamed CSV export.
Credentials are not a column and never will be."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from clusters.validators import format_label_pairs


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    value: Callable  # cluster -> plain text (CSV and HTML)
    sort: str = ""  # sort key in clusters.selectors.SORTS, "" when not sortable


def _iso(value):
    return value.isoformat() if value else ""


CLUSTER_COLUMNS: list[Column] = [
    Column("name", "Name", lambda c: c.name, "name"),
    Column("role", "Role", lambda c: c.get_role_display(), "role"),
    Column("state", "State", lambda c: c.state, "state"),
    Column("version", "Version", lambda c: c.server_version, "version"),
    Column("platform", "Platform", lambda c: c.platform),
    Column("region", "Region", lambda c: c.region, "region"),
    Column("zones", "Zones", lambda c: " ".join(c.zones or [])),
    Column("nodes", "Nodes", lambda c: c.node_count if c.last_probe_at else ""),
    Column("labels", "Labels", lambda c: format_label_pairs(c.labels)),
    Column("api_server", "API server", lambda c: c.api_server),
    Column("last_probe", "Last probe", lambda c: _iso(c.last_probe_at), "last_probe"),
    Column("isolated", "Isolated", lambda c: "yes" if c.isolated else ""),
    Column("last_error", "Last error", lambda c: c.last_error),
]

HTML_COLUMNS = [c for c in CLUSTER_COLUMNS if c.key not in ("last_error", "isolated", "platform")]


def csv_rows(queryset, columns=CLUSTER_COLUMNS, *, chunk_size: int = 2000):
    """One list of cell values per cluster (queryset.iterator(): constant memory); feed it to
    fedportal.csv_export.stream_csv, which neutralises formulas and adds the BOM."""
    for cluster in queryset.iterator(chunk_size=chunk_size):
        yield [column.value(cluster) for column in columns]
