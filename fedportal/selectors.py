"""Read-side queries for the audit log."""

from django.db.models import QuerySet

from fedportal.models import AuditEvent

FILTER_KEYS = ("actor", "action", "object_type", "object_id", "cluster", "since", "until")


def filter_audit_events(filters: dict, *, queryset: QuerySet | None = None) -> QuerySet:
    """Audit events matching cleaned filters (see ``AuditEventFilterForm``); newest first."""
    unknown = set(filters) - set(FILTER_KEYS)
    if unknown:
        raise ValueError(f"unknown audit filters: {', '.join(sorted(unknown))}")
    events = AuditEvent.objects.all() if queryset is None else queryset
    if filters.get("actor"):
        events = events.filter(actor_name=filters["actor"])
    action = filters.get("action")
    if action:
        events = events.filter(action__startswith=action[:-1]) if action.endswith("*") else events.filter(action=action)
    if filters.get("object_type"):
        events = events.filter(object_type=filters["object_type"])
    if filters.get("object_id"):
        events = events.filter(object_id=str(filters["object_id"]))
    if filters.get("cluster"):
        events = events.filter(cluster=filters["cluster"])
    if filters.get("since"):
        events = events.filter(created_at__gte=filters["since"])
    if filters.get("until"):
        events = events.filter(created_at__lt=filters["until"])
    return events.order_by("-id")


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
