"""The audit log's pages: a filtered, paginated list (with an htmx rows fragment), one event's
detail, and the streamed CSV export of the filtered set. Viewers and above may read."""

import json

from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from fedportal.audit import record_event
from fedportal.filtersets import AuditEventFilterSet
from fedportal.htmx import render_page
from fedportal.models import AuditEvent
from fedportal.roles import Role, role_required
from fedportal.selectors import audit_events_for_export, describe_filters, filter_audit_events, known_actions
from fedportal.tables import AuditEventTable, bad_filter_response, configure, stream_audit_csv


@role_required(Role.VIEWER)
@require_GET
@vary_on_headers("HX-Request")
def event_list(request):
    """Filters live in the query string (hx-push-url), so a filtered view is a link, survives a
    reload and the back button; the rows fragment re-renders the export link with the same query.
    A bad filter shows why and no rows (never the whole log under a filter the reader thinks is on)."""
    filterset = AuditEventFilterSet(request.GET or None)
    form = filterset.form
    if form.is_bound and not form.is_valid():
        events = AuditEvent.objects.none()
    else:
        events = filter_audit_events(form.filters() if form.is_bound else {})
    table = configure(request, AuditEventTable(events))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "form": form,
        "table": table,
        "filter_query": query.urlencode(),
        "known_actions": [] if request.htmx else known_actions(),
    }
    return render_page(request, "fedportal/audit_event_list.html", context, "rows")


@role_required(Role.VIEWER)
@require_GET
def event_detail(request, pk):
    event = get_object_or_404(AuditEvent, pk=pk)
    context = {
        "event": event,
        "before_json": None if event.before is None else json.dumps(event.shown_before, indent=2, sort_keys=True),
        "after_json": None if event.after is None else json.dumps(event.shown_after, indent=2, sort_keys=True),
    }
    return render(request, "fedportal/audit_event_detail.html", context)


@role_required(Role.VIEWER)
@require_GET
def event_export(request):
    form = AuditEventFilterSet(request.GET).form
    if not form.is_valid():
        return bad_filter_response(form)
    filters = form.filters()
    export_event = record_event(
        "audit.export",
        object_type="fedportal.auditevent",
        summary=f"exported audit events as CSV ({describe_filters(filters)})",
        after={"filter": filters, "format": "csv"},
    )
    events = audit_events_for_export(filters, before_id=export_event.pk)
    filename = f"audit-events-{timezone.now():%Y%m%dT%H%M%SZ}.csv"
    return stream_audit_csv(filename, events)
