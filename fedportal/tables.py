"""Column specs shared by an HTML table and its CSV export (NetBox-style: one table per model).

A ``Table`` subclass lists ``Column``s. Each column names an ORM lookup (``"cluster__name"``),
which is both the ``values_list`` field for the CSV and the attribute path for the HTML cell, so
the page and the download can never disagree about what a column means.

    class ClusterTable(Table):
        columns = (
            Column("name", "Name", link=True),
            Column("state", "State", kind="state"),
            Column("api_server", "API server", html=False),   # CSV only
        )

    rows = ClusterTable.html_rows(page.object_list)            # template: {% for obj, cells in rows %}
    stream_csv("clusters.csv", ClusterTable.csv_columns(), ClusterTable.csv_rows(queryset))
"""

from collections.abc import Iterator
from dataclasses import dataclass

from fedportal.models import AuditEvent


@dataclass(frozen=True)
class Column:
    field: str
    header: str
    html: bool = True
    csv: bool = True
    link: bool = False  # HTML: link the cell to the row's detail page
    kind: str = "text"  # HTML rendering hint: text, datetime, code, state, json

    def value(self, obj):
        for part in self.field.split("__"):
            if obj is None:
                return None
            obj = getattr(obj, part)
        return obj


@dataclass(frozen=True)
class Cell:
    column: Column
    value: object


class Table:
    columns: tuple[Column, ...] = ()

    @classmethod
    def html_columns(cls) -> list[Column]:
        return [column for column in cls.columns if column.html]

    @classmethod
    def csv_columns(cls) -> list[Column]:
        return [column for column in cls.columns if column.csv]

    @classmethod
    def html_rows(cls, objects) -> list[tuple[object, list[Cell]]]:
        columns = cls.html_columns()
        return [(obj, [Cell(column, column.value(obj)) for column in columns]) for obj in objects]

    @classmethod
    def csv_rows(cls, queryset, *, chunk_size: int = 2000) -> Iterator[tuple]:
        """Plain tuples straight from the database cursor, ``chunk_size`` rows at a time."""
        fields = [column.field for column in cls.csv_columns()]
        return queryset.values_list(*fields).iterator(chunk_size=chunk_size)


class AuditEventTable(Table):
    model = AuditEvent
    columns = (
        Column("id", "ID", link=True),
        Column("created_at", "Time (UTC)", kind="datetime"),
        Column("actor_name", "Actor"),
        Column("action", "Action", kind="code"),
        Column("object_type", "Object type", html=False),
        Column("object_id", "Object ID", html=False),
        Column("object_repr", "Object"),
        Column("cluster", "Cluster"),
        Column("summary", "Summary"),
        Column("request_id", "Request ID", html=False),
        Column("source_ip", "Source address"),
        Column("before", "Before", html=False, kind="json"),
        Column("after", "After", html=False, kind="json"),
        Column("prev_hash", "Previous hash", html=False),
        Column("hash", "Hash", html=False),
    )
