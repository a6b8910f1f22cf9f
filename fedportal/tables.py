"""List pages, NetBox's way: a django-filter FilterSet picks the rows, a django-tables2 Table shows
them, and the same Table drives the streamed CSV export.

    filterset = ClusterFilterSet(request.GET, queryset=Cluster.objects.all())
    if wants_csv(request):
        return export_csv(request, filterset, ClusterTable, "clusters")     # 400 naming a bad filter
    table = configure(request, ClusterTable(filterset.qs))                   # ?sort= and ?page=
    return render_page(request, template, {"filter": filterset, "table": table}, "rows")

Every Table subclasses ``Table`` below, so every list renders through templates/partials/table.html
(sortable headers as links, htmx-enhanced) and templates/partials/pagination.html.

Columns: ``visible=False`` makes a CSV-only column, ``exclude_from_export=True`` an HTML-only one.
A CSV cell is the table's ``value_<name>`` when it has one, else the value as stored (a
``render_<name>`` shapes the HTML cell only). The export reads ``queryset.iterator()``, never the whole result: when every
exported column is a plain model field it reads tuples straight from ``values_list`` (the 1M-row
audit export: several times faster than building model instances, measured in
tests/bench/bench_audit_export.py), otherwise model instances a chunk at a time.
"""

from collections.abc import Iterator

import django_tables2 as tables
from django.db.models import QuerySet
from django.http import HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_str
from django.utils.html import format_html
from django_tables2 import RequestConfig
from django_tables2.rows import BoundRow
from django_tables2.utils import Accessor

from fedportal.csv_export import stream_csv
from fedportal.masking import without_url_userinfo
from fedportal.models import AuditEvent

PER_PAGE = 50
EXPORT_CHUNK_SIZE = 2000


class Table(tables.Table):
    """The base of every list table: our markup, ``?sort=`` and ``?page=`` query parameters."""

    class Meta:
        empty_text = "Nothing matches."
        template_name = "partials/table.html"
        attrs = {"class": "data"}


def configure(request, table: Table, *, per_page: int = PER_PAGE) -> Table:
    """Sort by ``?sort=`` (an unknown column is ignored) and show page ``?page=`` (a bad number
    shows the nearest page). The page size is the view's, not the query string's."""
    RequestConfig(request, paginate=False).configure(table)
    table.paginate(per_page=per_page, page=1)
    table.page = table.paginator.get_page(request.GET.get("page"))
    return table


def records(table: Table) -> list:
    """The objects on the table's current page."""
    return [row.record for row in table.page.object_list]


# --- CSV -------------------------------------------------------------------------------------------


def wants_csv(request) -> bool:
    return request.GET.get("format") == "csv"


def export_columns(table: Table) -> list:
    return [column for column in table.columns.iterall() if not column.column.exclude_from_export]


def csv_header(table: Table) -> list[str]:
    return [force_str(column.header) for column in export_columns(table)]


def _values_list_fields(table: Table, columns, model) -> list[str] | None:
    """The ``values_list`` fields when every exported column is a model field without a ``value_``."""
    fields = []
    for column in columns:
        accessor = Accessor(column.accessor)
        if hasattr(table, f"value_{column.name}") or accessor.get_field(model) is None:
            return None
        fields.append("__".join(accessor.bits))
    return fields


def _cell(table: Table, record, column):
    if hasattr(table, f"value_{column.name}"):
        return BoundRow(record, table=table).get_cell_value(column.name)
    return Accessor(column.accessor).resolve(record, quiet=True)


def csv_rows(table: Table, queryset: QuerySet, *, chunk_size: int = EXPORT_CHUNK_SIZE) -> Iterator:
    """One sequence of cell values per row, ``chunk_size`` rows from the database at a time. A cell
    is the table's ``value_<name>`` when it has one, else the column's value as stored (never the
    HTML of a ``render_<name>``)."""
    columns = export_columns(table)
    fields = _values_list_fields(table, columns, queryset.model)
    if fields is not None:
        return queryset.values_list(*fields).iterator(chunk_size=chunk_size)
    return ([_cell(table, record, column) for column in columns] for record in queryset.iterator(chunk_size=chunk_size))


def stream_table_csv(filename: str, table: Table, queryset: QuerySet, *, chunk_size: int = EXPORT_CHUNK_SIZE):
    """``queryset`` as a streamed CSV download with ``table``'s exported columns."""
    return stream_csv(filename, csv_header(table), csv_rows(table, queryset, chunk_size=chunk_size))


def bad_filter_response(form) -> HttpResponse:
    """400 with the reason: what an export answers to a filter it cannot apply."""
    reasons = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())
    return HttpResponse(f"Bad filter: {reasons}\n", status=400, content_type="text/plain; charset=utf-8")


def export_csv(request, filterset, table_class: type[Table], basename: str, **table_kwargs):
    """Every row the filter matches, in the list's sort order, as ``<basename>-<time>.csv``."""
    if not filterset.is_valid():
        return bad_filter_response(filterset.form)
    table = table_class(filterset.qs, **table_kwargs)
    RequestConfig(request, paginate=False).configure(table)
    return stream_table_csv(f"{basename}-{timezone.now():%Y%m%d-%H%M%S}.csv", table, table.data.data)


# --- the audit log ---------------------------------------------------------------------------------


class AuditEventTable(Table):
    """The audit log's page and its CSV (every column a plain field: the export reads tuples)."""

    id = tables.Column(verbose_name="ID")
    created_at = tables.Column(verbose_name="Time (UTC)", order_by=("created_at", "id"))
    actor_name = tables.Column(verbose_name="Actor", order_by=("actor_name", "id"))
    action = tables.Column(verbose_name="Action", order_by=("action", "id"))
    object_type = tables.Column(verbose_name="Object type", visible=False)
    object_id = tables.Column(verbose_name="Object ID", visible=False)
    object_repr = tables.Column(verbose_name="Object", orderable=False)
    cluster = tables.Column(verbose_name="Cluster", order_by=("cluster", "id"))
    summary = tables.Column(verbose_name="Summary", orderable=False)
    request_id = tables.Column(verbose_name="Request ID", visible=False)
    source_ip = tables.Column(verbose_name="Source address", orderable=False)
    before = tables.Column(verbose_name="Before", visible=False)
    after = tables.Column(verbose_name="After", visible=False)
    prev_hash = tables.Column(verbose_name="Previous hash", visible=False)
    hash = tables.Column(verbose_name="Hash", visible=False)

    class Meta(Table.Meta):
        model = AuditEvent
        fields = ()
        order_by = ("-id",)
        attrs = {"class": "data audit-events"}
        empty_text = "No audit events match."

    def render_id(self, value):
        return format_html('<a href="{}">{}</a>', reverse("audit:event_detail", args=[value]), value)

    def render_summary(self, record):
        return record.shown_summary

    def render_before(self, record):
        return record.shown_before

    def render_after(self, record):
        return record.shown_after

    def render_created_at(self, value):
        return format_html('<time datetime="{}">{}</time>', value.isoformat(), value.strftime("%Y-%m-%d %H:%M:%S"))

    def render_action(self, value):
        return format_html("<code>{}</code>", value)


# the columns whose text may hold a URL with a user name or password (AuditEvent.shown_summary)
_AUDIT_SHOWN_COLUMNS = ("summary", "before", "after")


def audit_csv_rows(events: QuerySet) -> tuple[list[str], Iterator]:
    """The audit log's CSV header and rows (web, API and `export_audit` alike): the stored values,
    read as tuples, with no URL's user name or password (as AuditEvent.shown_summary)."""
    table = AuditEventTable(events.none())
    names = [column.name for column in export_columns(table)]
    shown = [i for i, name in enumerate(names) if name in _AUDIT_SHOWN_COLUMNS]

    def redacted(row):
        row = list(row)
        for i in shown:
            row[i] = without_url_userinfo(row[i])
        return row

    return csv_header(table), (redacted(row) for row in csv_rows(table, events))


def stream_audit_csv(filename: str, events: QuerySet):
    header, rows = audit_csv_rows(events)
    return stream_csv(filename, header, rows)
