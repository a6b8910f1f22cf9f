"""The cluster list's filters (django-filter, NetBox's way), shared by the page, its CSV export, the
bulk label form's "every cluster matching the filter" and the REST API (through clusters.selectors)."""

from __future__ import annotations

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet

from clusters.choices import ClusterRole, ClusterState
from clusters.labels import SelectorError, parse_selector
from clusters.models import Cluster
from clusters.versions import parse_version
from fedportal.text import is_number


class ClusterFilterForm(forms.Form):
    """Checks the label selector and the version (the fields come from ClusterFilterSet)."""

    def clean_label(self):
        value = (self.cleaned_data.get("label") or "").strip()
        try:
            parse_selector(value)
        except SelectorError as exc:
            raise ValidationError(str(exc)) from None
        return value

    def clean_version(self):
        value = (self.cleaned_data.get("version") or "").strip()
        if value and value != "unknown" and parse_version(value) is None:
            raise ValidationError("Use a minor version (1.27), a gitVersion (v1.27.3) or 'unknown'.")
        return value


def filter_version(queryset: QuerySet, version: str) -> QuerySet:
    """ "1.27" -> every 1.27.x; "v1.27.3" -> exactly that gitVersion; "unknown" -> not probed yet."""
    version = version.strip()
    if version == "unknown":
        return queryset.filter(version_minor__isnull=True)
    parts = version.lstrip("v").split(".")
    if len(parts) == 2 and all(is_number(p) for p in parts):
        return queryset.filter(version_major=int(parts[0]), version_minor=int(parts[1]))
    return queryset.filter(server_version=version if version.startswith("v") else f"v{version}")


class ClusterFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(method="filter_q", label="Search", max_length=200)
    label = django_filters.CharFilter(
        method="filter_label", max_length=400, help_text="key, key=value, key!=value, key in (a,b)"
    )
    role = django_filters.ChoiceFilter(choices=ClusterRole.choices, empty_label="any role")
    state = django_filters.ChoiceFilter(choices=ClusterState.choices, empty_label="any state")
    version = django_filters.CharFilter(method="filter_version", max_length=64, help_text="1.27, v1.27.3 or unknown")

    class Meta:
        model = Cluster
        fields = []
        form = ClusterFilterForm

    def filter_q(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(api_server__icontains=value))

    def filter_label(self, queryset, name, value):
        return queryset.with_labels(parse_selector(value))  # the form checked it

    def filter_version(self, queryset, name, value):
        return filter_version(queryset, value)


FILTER_KEYS = tuple(ClusterFilterSet.base_filters)
