"""/api/v1/audit/events: the audit log, filtered (fedportal.forms.AuditEventFilterForm), with cursor
pagination, or the whole filtered set as a streamed CSV with ``Accept: text/csv`` (audited, as the
page's export is)."""

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.utils import timezone
from ninja import Field, Query, Router

from api.common import (
    CSV_RESPONSE,
    READ_ERRORS,
    Out,
    PageParams,
    require_viewer,
    wants_csv,
)
from api.pagination import page
from fedportal.audit import record_event
from fedportal.filtersets import AuditEventFilterSet
from fedportal.selectors import (
    audit_events_for_export,
    describe_filters,
    filter_audit_events,
)
from fedportal.tables import stream_audit_csv

router = Router(tags=["audit"])


class AuditEventOut(Out):
    id: int
    created_at: datetime
    actor: str
    action: str
    object_type: str
    object_id: str
    object_repr: str
    cluster: str
    summary: str
    before: Any = None
    after: Any = None
    request_id: str
    source_ip: str | None
    hash: str


class AuditPage(Out):
    items: list[AuditEventOut]
    next_cursor: str | None


class AuditFilters(PageParams):
    actor: str = Field("", max_length=150)
    action: str = Field(
        "",
        max_length=64,
        description="an action or the start of one, as on the audit page (cluster. or cluster.* matches every cluster action)",
    )
    object_type: str = Field("", max_length=64)
    object_id: str = Field("", max_length=64)
    cluster: str = Field("", max_length=63)
    since: datetime | None = None
    until: datetime | None = None


def _filters(params: AuditFilters) -> dict:
    # the page's FilterSet builds the form (its fields live on the FilterSet, not on the form class)
    form = AuditEventFilterSet(params.model_dump(exclude={"cursor", "limit"}, exclude_none=True)).form
    if not form.is_valid():
        raise ValidationError({key: list(errs) for key, errs in form.errors.items()})
    return form.filters()


@router.get(
    "/events",
    response={200: AuditPage, **READ_ERRORS},
    openapi_extra=CSV_RESPONSE,
    summary="Audit events, newest first (CSV: the whole filtered set, oldest first)",
)
def list_events(request, params: Query[AuditFilters]):
    require_viewer(request)
    filters = _filters(params)
    if wants_csv(request):
        export_event = record_event(
            "audit.export",
            object_type="fedportal.auditevent",
            summary=f"exported audit events as CSV via the API ({describe_filters(filters)})",
            after={"filter": filters, "format": "csv"},
        )
        events = audit_events_for_export(filters, before_id=export_event.pk)
        return stream_audit_csv(f"audit-events-{timezone.now():%Y%m%dT%H%M%SZ}.csv", events)
    rows, next_cursor = page(
        filter_audit_events(filters), scope="audit", key="id", cursor=params.cursor, limit=params.limit, descending=True
    )
    return {
        "items": [
            {
                "id": e.pk,
                "created_at": e.created_at,
                "actor": e.actor_name,
                "action": e.action,
                "object_type": e.object_type,
                "object_id": e.object_id,
                "object_repr": e.object_repr,
                "cluster": e.cluster,
                "summary": e.shown_summary,
                "before": e.shown_before,
                "after": e.shown_after,
                "request_id": e.request_id,
                "source_ip": e.source_ip,
                "hash": e.hash,
            }
            for e in rows
        ],
        "next_cursor": next_cursor,
    }
