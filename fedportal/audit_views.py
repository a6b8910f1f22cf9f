"""The audit log's pages: a filtered, paginated list (with an htmx rows fragment), one event's
detail, and the streamed CSV export of the filtered set. Viewers and above may read."""

import json

from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from fedportal.audit import record_event
from fedportal.csv_export import stream_csv
from fedportal.filtersets import AuditEventFilterSet
from fedportal.models import AuditEvent
from fedportal.roles import Role, role_required
from fedportal.selectors import audit_events_for_export, describe_filters, filter_audit_events, known_actions
from fedportal.tables import AuditEventTable

PAGE_SIZE = 50
EXPORT_CHUNK_SIZE = 2000


def _filter_query(request) -> str:
    query = request.GET.copy()
    query.pop("page", None)
    return query.urlencode()


@role_required(Role.VIEWER)
@require_GET
@vary_on_headers("HX-Request")
def event_list(request):
    """Filters live in the query string (hx-push-url), so a filtered view is a link, survives a
    reload and the back button; the rows fragment re-renders the export link with the same query."""
    form = AuditEventFilterSet(request.GET or None).form
    page = None
    if form.is_bound and not form.is_valid():
        rows = []
    else:
        filters = form.filters() if form.is_bound else {}
        page = Paginator(filter_audit_events(filters), PAGE_SIZE).get_page(request.GET.get("page"))
        rows = AuditEventTable.html_rows(page.object_list)
    template_name = "fedportal/audit_event_list.html"
    if request.htmx:
        template_name += "#rows"
    context = {
        "form": form,
        "page": page,
        "columns": AuditEventTable.html_columns(),
        "rows": rows,
        "filter_query": _filter_query(request),
        "known_actions": [] if request.htmx else known_actions(),
    }
    return render(request, template_name, context)


@role_required(Role.VIEWER)
@require_GET
def event_detail(request, pk):
    event = get_object_or_404(AuditEvent, pk=pk)
    context = {
        "event": event,
        "before_json": None if event.before is None else json.dumps(event.before, indent=2, sort_keys=True),
        "after_json": None if event.after is None else json.dumps(event.after, indent=2, sort_keys=True),
    }
    return render(request, "fedportal/audit_event_detail.html", context)


@role_required(Role.VIEWER)
@require_GET
def event_export(request):
    form = AuditEventFilterSet(request.GET).form
    if not form.is_valid():
        reasons = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())
        return HttpResponse(f"Bad filter: {reasons}\n", status=400, content_type="text/plain; charset=utf-8")
    filters = form.filters()
    export_event = record_event(
        "audit.export",
        object_type="fedportal.auditevent",
        summary=f"exported audit events as CSV ({describe_filters(filters)})",
        after={"filter": filters, "format": "csv"},
    )
    events = audit_events_for_export(filters, before_id=export_event.pk)
    filename = f"audit-events-{timezone.now():%Y%m%dT%H%M%SZ}.csv"
    return stream_csv(
        filename,
        AuditEventTable.csv_columns(),
        AuditEventTable.csv_rows(events, chunk_size=EXPORT_CHUNK_SIZE),
    )
