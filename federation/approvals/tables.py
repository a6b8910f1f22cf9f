"""The change-request lists' table (django-tables2): the list, the approver's inbox and the CSV."""

import django_tables2 as tables
from django.utils.html import format_html

from federation.approvals.models import ChangeRequest
from fedportal.tables import Table
from fedportal.templatetags.fedportal_text import ago


class ChangeRequestTable(Table):
    id = tables.Column(verbose_name="ID")
    title = tables.Column(verbose_name="Title")
    kind = tables.Column(verbose_name="Kind")
    subject = tables.Column(verbose_name="Subject", accessor="pk", orderable=False)
    state = tables.Column(verbose_name="State", order_by=("state", "-id"))
    emergency = tables.Column(verbose_name="Emergency", visible=False)
    approvals = tables.Column(verbose_name="Approvals", accessor="pk", orderable=False)
    required_approvals = tables.Column(verbose_name="Required approvals", visible=False)
    targets = tables.Column(verbose_name="Targets", accessor="target_clusters", orderable=False, default="—")
    author = tables.Column(verbose_name="Author", accessor="author_name", order_by=("author_name", "-id"))
    created = tables.Column(verbose_name="Created", accessor="created_at", visible=False)
    updated = tables.Column(verbose_name="Updated", accessor="updated_at", order_by=("updated_at", "id"))

    class Meta(Table.Meta):
        empty_text = "No change requests match."
        model = ChangeRequest
        fields = ()

    def render_id(self, value, record):
        return format_html('<a href="{}">CR-{}</a>', record.get_absolute_url(), value)

    def render_title(self, value, record):
        link = format_html('<a href="{}">{}</a>', record.get_absolute_url(), value)
        if not record.emergency:
            return link
        return format_html(
            '<span class="state state-failed" title="Applied without approval: {}">EMERGENCY</span> {}',
            record.emergency_reason,
            link,
        )

    def render_subject(self, record):
        return record.subject

    def render_state(self, value, record):
        return format_html('<span class="state state-{}">{}</span>', record.state.lower(), value)

    def render_approvals(self, record):
        if record.emergency:
            return "—"
        return f"{getattr(record, 'approval_count', 0) or 0} / {record.required_approvals}"

    def render_targets(self, value):
        return ", ".join(value) or "—"

    def render_updated(self, value):
        return format_html('<time datetime="{}">{}</time>', value.isoformat(), ago(value))

    # --- CSV cells

    def value_subject(self, record):
        return record.subject

    def value_approvals(self, record):
        return "" if record.emergency else getattr(record, "approval_count", 0) or 0

    def value_targets(self, value):
        return " ".join(value or [])
