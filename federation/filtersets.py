"""The federated resource list's filters (django-filter, NetBox's way): the page, its CSV export and
the REST API (through federation.selectors.resources)."""

import django_filters
from django.db.models import Q

from federation.choices import DriftPolicy, Retention
from federation.models import FederatedResource, FederatedType


class ResourceFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(method="filter_q", label="Search", max_length=200)
    type = django_filters.ModelChoiceFilter(
        queryset=FederatedType.objects.order_by("kind", "group"), empty_label="All types"
    )
    namespace = django_filters.CharFilter(max_length=63)
    retention = django_filters.ChoiceFilter(choices=Retention.choices, empty_label="any retention")
    drift_policy = django_filters.ChoiceFilter(choices=DriftPolicy.choices, empty_label="any drift policy")

    class Meta:
        model = FederatedResource
        fields = []

    def filter_q(self, queryset, name, value):
        return queryset.filter(
            Q(name__icontains=value) | Q(namespace__icontains=value) | Q(type__kind__icontains=value)
        )


FILTER_KEYS = tuple(ResourceFilterSet.base_filters)
