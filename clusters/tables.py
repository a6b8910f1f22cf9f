"""The cluster inventory's table (django-tables2): the list page and its streamed CSV export.
Credentials are not a column and never will be."""

from __future__ import annotations

import django_tables2 as tables
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from clusters.models import Cluster
from clusters.validators import format_label_pairs
from fedportal.tables import Table
from fedportal.templatetags.fedportal_text import ago


class SelectColumn(tables.Column):
    """The bulk label form's tick boxes (admins only; the rows stay ticked across htmx polling)."""

    def __init__(self, **kwargs):
        header = mark_safe('<input type="checkbox" id="select-page" aria-label="Tick every cluster on this page">')
        super().__init__(accessor="pk", verbose_name=header, orderable=False, exclude_from_export=True, **kwargs)

    def render(self, value, record):
        return format_html(
            '<input type="checkbox" name="ids" value="{}" form="bulk-labels" id="sel-{}" hx-preserve="true"'
            ' aria-label="Tick {}">',
            value,
            value,
            record.name,
        )


class ClusterTable(Table):
    select = SelectColumn()
    name = tables.Column(verbose_name="Name")
    role = tables.Column(verbose_name="Role", order_by=("role", "name"))
    state = tables.Column(verbose_name="State", order_by=("state", "name"))
    version = tables.Column(
        verbose_name="Version",
        accessor="server_version",
        order_by=("version_major", "version_minor", "server_version", "name"),
        default="—",
        attrs={"td": {"class": "mono"}},
    )
    platform = tables.Column(verbose_name="Platform", visible=False)
    region = tables.Column(verbose_name="Region", order_by=("region", "name"), default="—")
    zones = tables.Column(verbose_name="Zones", orderable=False)
    nodes = tables.Column(verbose_name="Nodes", accessor="node_count", orderable=False)
    labels = tables.Column(verbose_name="Labels", orderable=False)
    api_server = tables.Column(verbose_name="API server", orderable=False, attrs={"td": {"class": "mono"}})
    last_probe = tables.Column(
        verbose_name="Last probe", accessor="last_probe_at", order_by=("last_probe_at", "name"), default="never"
    )
    isolated = tables.Column(verbose_name="Isolated", visible=False)
    last_error = tables.Column(verbose_name="Last error", visible=False)

    class Meta(Table.Meta):
        empty_text = "No clusters match."
        model = Cluster
        fields = ()
        order_by = ("name",)
        attrs = {"class": "data compact"}

    # --- HTML cells

    def render_name(self, value, record):
        isolated = mark_safe(' <span class="state state-offline" title="isolated">isolated</span>')
        return format_html(
            '<a class="cluster-name" href="{}">{}</a>{}',
            record.get_absolute_url(),
            value,
            isolated if record.isolated else "",
        )

    def render_state(self, value, record):
        if record.last_error:
            return format_html(
                '<span class="state state-{}" title="{}">{}</span>', record.state.lower(), record.last_error, value
            )
        return format_html('<span class="state state-{}">{}</span>', record.state.lower(), value)

    def render_zones(self, value):
        return " ".join(value)

    def render_nodes(self, value, record):
        return value if record.last_probe_at else ""

    def render_labels(self, value):
        return format_html_join(" ", "<code>{}={}</code>", value.items())

    def render_last_probe(self, value):
        return format_html('<time datetime="{}">{}</time>', value.isoformat(), ago(value))

    # --- CSV cells (plain text)

    def value_role(self, record):
        return record.get_role_display()

    def value_zones(self, value):
        return " ".join(value or [])

    def value_nodes(self, value, record):
        return value if record.last_probe_at else ""

    def value_labels(self, value):
        return format_label_pairs(value)

    def value_last_probe(self, value):
        return value.isoformat() if value else ""

    def value_isolated(self, value):
        return "yes" if value else ""
