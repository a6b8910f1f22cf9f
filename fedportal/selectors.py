"""Read-side queries for the audit log."""

from django.db.models import QuerySet

from fedportal.filtersets import FILTER_KEYS, AuditEventFilterSet
from fedportal.models import AuditEvent


def filter_audit_events(filters: dict, *, queryset: QuerySet | None = None) -> QuerySet:
    """Audit events matching cleaned filters (the cleaned data of ``AuditEventFilterSet``'s form, or
    the same keys from export_audit's options); newest first."""
    unknown = set(filters) - set(FILTER_KEYS)
    if unknown:
        raise ValueError(f"unknown audit filters: {', '.join(sorted(unknown))}")
    events = AuditEvent.objects.all() if queryset is None else queryset
    filterset = AuditEventFilterSet(filters, queryset=events)
    if not filterset.is_valid():
        raise ValueError(f"bad audit filters: {filterset.errors.as_text()}")
    return filterset.qs.order_by("-id")


def known_actions() -> list[str]:
    """Every action in the log, for the action filter's suggestions (one query on an indexed column)."""
    return list(AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct())


def audit_events_for_export(filters: dict, *, before_id: int | None = None) -> QuerySet:
    """The filtered set in chronological (id) order; ``before_id`` pins it to events older than
    the export's own audit event, so rows appended during a long download do not leak in."""
    events = filter_audit_events(filters)
    if before_id is not None:
        events = events.filter(id__lt=before_id)
    return events.order_by("id")


def describe_filters(filters: dict) -> str:
    if not filters:
        return "all events"
    return ", ".join(
        f"{key}={value.isoformat() if hasattr(value, 'isoformat') else value}" for key, value in filters.items()
    )
