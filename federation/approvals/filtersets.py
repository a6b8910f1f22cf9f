"""The change-request list's filters (django-filter, NetBox's way): the page, its CSV export, the
``changes`` command and the REST API (through federation.approvals.selectors)."""

import django_filters
from django.db.models import Q

from federation.approvals.choices import ChangeKind, ChangeState
from federation.approvals.models import ChangeRequest

EMERGENCY_CHOICES = [("yes", "emergency only"), ("no", "not emergency")]


class ChangeRequestFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(method="filter_q", label="Search", max_length=200)
    state = django_filters.ChoiceFilter(choices=ChangeState.choices, empty_label="any state")
    kind = django_filters.ChoiceFilter(choices=ChangeKind.choices, empty_label="any kind")
    author = django_filters.CharFilter(field_name="author_name", max_length=150, help_text="Username, exactly.")
    resource = django_filters.CharFilter(method="filter_resource", max_length=320, help_text="namespace/name")
    cluster = django_filters.CharFilter(method="filter_cluster", max_length=63)
    emergency = django_filters.ChoiceFilter(choices=EMERGENCY_CHOICES, empty_label="all", method="filter_emergency")

    class Meta:
        model = ChangeRequest
        fields = []

    def filter_q(self, queryset, name, value):
        return queryset.filter(Q(title__icontains=value) | Q(resource_repr__icontains=value))

    def filter_resource(self, queryset, name, value):
        return queryset.filter(Q(resource_repr__icontains=value) | Q(resource__name__icontains=value))

    def filter_cluster(self, queryset, name, value):
        # targets are a JSON list of names; a simple containment on the text form works everywhere
        return queryset.filter(Q(cluster_name=value) | Q(target_clusters__icontains=f'"{value}"'))

    def filter_emergency(self, queryset, name, value):
        return queryset.filter(emergency=value == "yes")


FILTER_KEYS = tuple(ChangeRequestFilterSet.base_filters)
