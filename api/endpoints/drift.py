"""/api/v1/drift: the skew matrix, the compatibility matrix and the compliance report as JSON, or
as the pages' CSV exports with ``Accept: text/csv``. Rows are the pages' export tables
(drift.tables), keyed by column, so the API, the CSV and the page can never disagree."""

from typing import Any, Literal

from django.core.exceptions import ValidationError
from django.utils import timezone
from ninja import Field, Query, Router, Schema

from api.common import CSV_RESPONSE, READ_ERRORS, Out, require_viewer, wants_csv
from api.pagination import decode_key_cursor, encode_cursor
from drift import selectors
from drift.choices import Severity
from drift.forms import CompatFilterForm, ComplianceFilterForm, SkewFilterForm
from drift.tables import CompatCellTable, ComplianceTable, SkewMemberTable
from fedportal.audit import record_event
from fedportal.csv_export import stream_csv

router = Router(tags=["drift"])


class SkewOut(Out):
    hosts: list[str]
    counts: dict[str, int]
    rows: list[dict[str, Any]]


class CompatOut(Out):
    rows: list[dict[str, Any]]
    next_cursor: str | None = Field(description="the next page's cursor; null on the last page")


class ComplianceOut(Out):
    score: int
    compliant: int
    total: int
    rows: list[dict[str, Any]]


class LabelFilter(Schema):
    labels: str = Field("", max_length=500, description="members with these labels: env=prod,tier")


class SkewFilters(LabelFilter):
    severity: Literal[("", *Severity.values, "ok")] = ""  # as SkewFilterForm: "ok" = no finding


# The compatibility matrix's JSON is paged by cell: 1,000 clusters x 200 resources are 200,000 of them.
COMPAT_PAGE_CELLS = 500
COMPAT_MAX_CELLS = 5000


class CompatFilters(LabelFilter):
    kind: str = Field("", max_length=63)
    namespace: str = Field("", max_length=63)
    cursor: str | None = Field(None, max_length=500, description="next_cursor of the previous page (JSON only)")
    limit: int = Field(COMPAT_PAGE_CELLS, ge=1, le=COMPAT_MAX_CELLS, description="cells per page (JSON only)")


class ComplianceFilters(LabelFilter):
    only: Literal["", "noncompliant"] = ""


def _clean(form_class, filters: Schema) -> dict:
    form = form_class(filters.model_dump())
    if not form.is_valid():
        raise ValidationError({key: list(errs) for key, errs in form.errors.items()})
    return form.cleaned_data


def _as_dicts(table, rows) -> list[dict]:
    fields = [column.field for column in table.csv_columns()]
    return [dict(zip(fields, values, strict=True)) for values in table.csv_rows(rows)]


def _export(request, action: str, kind: str, table, rows, filters: Schema, summary: str):
    record_event(
        action, object_type=f"drift.{kind}", summary=f"{summary} (API)", after={**filters.model_dump(), "format": "csv"}
    )
    filename = f"{kind}-{timezone.now():%Y%m%dT%H%M%SZ}.csv"
    return stream_csv(filename, table.csv_columns(), table.csv_rows(rows))


@router.get("/skew", response={200: SkewOut, **READ_ERRORS}, openapi_extra=CSV_RESPONSE, summary="Version-skew matrix")
def skew(request, filters: Query[SkewFilters]):
    require_viewer(request)
    cleaned = _clean(SkewFilterForm, filters)
    overview = selectors.skew_overview(labels=cleaned["labels"])
    members = selectors.filter_member_rows(overview.member_rows, cleaned["severity"])
    if wants_csv(request):
        return _export(
            request,
            "drift.skew.export",
            "skew",
            SkewMemberTable,
            members,
            filters,
            f"exported the drift matrix as CSV ({len(members)} clusters)",
        )
    counts = {str(key): int(value) for key, value in overview.report.counts.items()}
    return {"hosts": [h.name for h in overview.hosts], "counts": counts, "rows": _as_dicts(SkewMemberTable, members)}


def _compat_rows(resources, rows):
    from types import SimpleNamespace

    targets_memo = {}
    for resource in resources:
        cells = selectors.compat_row(resource, rows, targets_memo=targets_memo)
        for row in rows:
            cell = selectors.mask_compat_cell(resource, cells[row.name])  # as the page's CSV export: no Secret value
            if not cell.targeted:
                continue
            result = cell.result
            yield SimpleNamespace(
                key=(resource.pk, row.name),  # the page's order and cursor (not a column)
                resource=resource.qualified_name,
                kind=resource.type.kind,
                cluster=row.name,
                version=row.server_version,
                status=cell.status,
                fields="; ".join(p.field_path for p in result.problems if p.code == "unknown_field") if result else "",
                problems=" | ".join(p.message for p in result.problems) if result else "",
                min_version=result.min_version if result else None,
                fix=(result.suggested_overrides or None) if result else None,
            )


@router.get(
    "/compatibility",
    response={200: CompatOut, **READ_ERRORS},
    openapi_extra=CSV_RESPONSE,
    summary="API-compatibility matrix (one row per resource and target cluster)",
)
def compatibility(request, filters: Query[CompatFilters]):
    require_viewer(request)
    cleaned = _clean(CompatFilterForm, filters)
    rows = selectors.fleet_rows(labels=cleaned["labels"])  # by name: a resource's cells in the page's order
    resources = selectors.compat_resources(kind=cleaned["kind"], namespace=cleaned["namespace"])
    if wants_csv(request):  # the whole matrix, streamed
        cells = _compat_rows(resources.iterator(chunk_size=200), rows)
        return _export(
            request,
            "drift.compat.export",
            "compat",
            CompatCellTable,
            cells,
            filters,
            "exported the compatibility matrix as CSV",
        )
    cells, next_cursor = _compat_page(resources, rows, cursor=filters.cursor, limit=filters.limit)
    return {"rows": _as_dicts(CompatCellTable, cells), "next_cursor": next_cursor}


def _compat_page(resources, rows, *, cursor: str | None, limit: int) -> tuple[list, str | None]:
    """``limit`` cells after ``cursor`` in (resource id, cluster name) order, and the next page's
    cursor (keyset: a page never skips or repeats a cell while resources are added or removed). Only
    the resources from the cursor's on are judged, and only until the page is full."""
    after = decode_key_cursor(cursor, (int, str), scope="compatibility") if cursor else None
    # cells compared with the cursor in Python, so in Python's order of names (by code point): the
    # database's collation may order them otherwise ("ab" before "a-c" in en_US), and a page would
    # then skip and repeat cells
    rows = sorted(rows, key=lambda row: row.name)
    if after is not None:
        resources = resources.filter(pk__gte=after[0])
    page = []
    for cell in _compat_rows(resources.order_by("pk").iterator(chunk_size=50), rows):
        if after is not None and cell.key <= after:
            continue
        page.append(cell)
        if len(page) > limit:
            return page[:limit], encode_cursor(list(page[limit - 1].key), scope="compatibility")
    return page, None


@router.get(
    "/compliance",
    response={200: ComplianceOut, **READ_ERRORS},
    openapi_extra=CSV_RESPONSE,
    summary="Compliance report per cluster, with the fleet score",
)
def compliance(request, filters: Query[ComplianceFilters]):
    require_viewer(request)
    cleaned = _clean(ComplianceFilterForm, filters)
    report, _ = selectors.fleet_compliance(labels=cleaned["labels"])
    clusters = report.clusters
    if cleaned["only"] == "noncompliant":
        clusters = [c for c in clusters if not c.compliant]
    if wants_csv(request):
        return _export(
            request,
            "drift.compliance.export",
            "compliance",
            ComplianceTable,
            clusters,
            filters,
            f"exported the compliance report as CSV ({len(clusters)} clusters, score {report.score})",
        )
    return {
        "score": report.score,
        "compliant": report.compliant,
        "total": report.total,
        "rows": _as_dicts(ComplianceTable, clusters),
    }
