"""django-filter FilterSets for list pages (NetBox's way): the audit log's filters, shared by the
page, its CSV export and the export_audit command (through fedportal.selectors)."""

import django_filters
from django import forms

from fedportal.forms import AuditEventFilterForm, DateTimeLocalInput
from fedportal.models import AuditEvent

# What "hide log-ins" hides: successful sign-ins and sign-outs. Failed log-ins and lock-outs stay
# visible: they are the security events someone reading the log is looking for.
LOGIN_ACTIONS = ("auth.login", "auth.logout")


class AuditEventFilterSet(django_filters.FilterSet):
    actor = django_filters.CharFilter(field_name="actor_name", max_length=150, help_text="Username, exactly.")
    action = django_filters.CharFilter(
        method="filter_action",
        max_length=64,
        widget=forms.TextInput(attrs={"list": "audit-actions", "autocomplete": "off"}),
        help_text="An action or the start of one (cluster. matches every cluster action).",
    )
    object_type = django_filters.CharFilter(max_length=64, help_text="e.g. clusters.cluster")
    object_id = django_filters.CharFilter(max_length=64)
    cluster = django_filters.CharFilter(max_length=63)
    since = django_filters.DateTimeFilter(
        field_name="created_at", lookup_expr="gte", widget=DateTimeLocalInput, help_text="From (UTC), inclusive."
    )
    until = django_filters.DateTimeFilter(
        field_name="created_at", lookup_expr="lt", widget=DateTimeLocalInput, help_text="To (UTC), exclusive."
    )
    hide_logins = django_filters.BooleanFilter(
        method="filter_hide_logins", widget=forms.CheckboxInput, label="Hide log-ins"
    )

    class Meta:
        model = AuditEvent
        fields = []
        form = AuditEventFilterForm

    def filter_action(self, queryset, name, value):
        return queryset.filter(action__startswith=value.removesuffix("*"))

    def filter_hide_logins(self, queryset, name, value):
        return queryset.exclude(action__in=LOGIN_ACTIONS) if value else queryset


FILTER_KEYS = tuple(AuditEventFilterSet.base_filters)
