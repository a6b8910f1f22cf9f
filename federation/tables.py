"""The federated resource list's table (django-tables2): the page and its streamed CSV export."""

import django_tables2 as tables
from django.utils.html import format_html

from federation.models import FederatedResource
from federation.selectors import condition_from_counts
from fedportal.tables import Table


class ResourceTable(Table):
    kind = tables.Column(verbose_name="Kind", accessor="type__kind", order_by=("type__kind", "namespace", "name"))
    qualified_name = tables.Column(
        verbose_name="Namespace/name",
        accessor="name",
        order_by=("namespace", "name", "type__kind"),
        exclude_from_export=True,
    )
    namespace = tables.Column(verbose_name="Namespace", visible=False)
    name = tables.Column(verbose_name="Name", visible=False)
    revision = tables.Column(verbose_name="Revision", accessor="current_revision__number", orderable=False, default="—")
    propagated = tables.Column(
        verbose_name="Propagated", accessor="propagated_revision__number", orderable=False, default="—"
    )
    condition = tables.Column(verbose_name="Condition", accessor="pk", orderable=False)
    clusters_ok = tables.Column(verbose_name="Clusters OK", order_by=("clusters_ok", "namespace", "name"))
    clusters_total = tables.Column(verbose_name="Clusters", visible=False)
    out_of_sync = tables.Column(
        verbose_name="Out of sync",
        accessor="clusters_out_of_sync",
        order_by=("clusters_out_of_sync", "namespace", "name"),
    )
    retention = tables.Column(verbose_name="Retention", order_by=("retention", "namespace", "name"))
    drift_policy = tables.Column(verbose_name="Drift policy", order_by=("drift_policy", "namespace", "name"))

    class Meta(Table.Meta):
        empty_text = "No federated resources match."
        model = FederatedResource
        fields = ()
        order_by = ("qualified_name",)

    def render_qualified_name(self, record):
        return format_html('<a href="{}">{}</a>', record.get_absolute_url(), record.qualified_name)

    def render_condition(self, record):
        condition = condition_from_counts(record)
        return format_html('<span class="state state-{}">{}</span>', condition.lower(), condition)

    def render_clusters_ok(self, value, record):
        return f"{value} / {record.clusters_total}"

    def render_out_of_sync(self, value):
        return format_html('<span class="state state-outofsync">{}</span>', value) if value else "0"

    def value_condition(self, record):
        return condition_from_counts(record)
