"""Read-side queries for federation pages and the CLI; each list is a fixed number of queries."""

from django.core.exceptions import ValidationError
from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from clusters.choices import ClusterState
from federation.choices import Condition, Health, PropagationReason, SyncState, TargetState
from federation.filtersets import FILTER_KEYS, ResourceFilterSet
from federation.health import health
from federation.models import FederatedResource, PropagatedVersion, PropagationRun, PropagationTarget

_GONE = [PropagationReason.REMOVED, PropagationReason.ORPHANED]


def resources(**filters) -> QuerySet:
    """Resources with per-cluster counts and a 'running' flag, for the list page, filtered by
    federation.filtersets.ResourceFilterSet's keys (q, type, namespace, retention, drift_policy).
    A value the FilterSet refuses raises ValidationError naming the field (the API's 400)."""
    unknown = set(filters) - set(FILTER_KEYS)
    if unknown:
        raise ValueError(f"unknown resource filters: {', '.join(sorted(unknown))}")
    running = PropagationTarget.objects.filter(
        run__resource=OuterRef("pk"), state__in=[TargetState.PENDING, TargetState.RUNNING, TargetState.RETRYING]
    )
    qs = (
        FederatedResource.objects.select_related("type", "current_revision", "propagated_revision")
        .annotate(
            clusters_total=Count(
                "propagated_versions", filter=~Q(propagated_versions__status__in=_GONE), distinct=True
            ),
            clusters_ok=Count(
                "propagated_versions", filter=Q(propagated_versions__status=PropagationReason.OK), distinct=True
            ),
            clusters_out_of_sync=Count(
                "propagated_versions",
                filter=Q(propagated_versions__sync_state=SyncState.OUT_OF_SYNC)
                & ~Q(propagated_versions__status__in=_GONE),
                distinct=True,
            ),
            is_running=Exists(running),
        )
        .order_by("namespace", "name", "type__kind")
    )
    filters = {key: getattr(value, "pk", value) for key, value in filters.items() if value not in (None, "")}
    if not filters:
        return qs
    filterset = ResourceFilterSet(filters, queryset=qs)
    if not filterset.is_valid():
        raise ValidationError({key: list(errors) for key, errors in filterset.errors.items()})
    return filterset.qs


def condition_from_counts(resource) -> str:
    """The aggregate condition from the annotations of resources() (no extra query)."""
    if resource.is_running:
        return Condition.PROPAGATING
    if not resource.clusters_total:
        return Condition.NOT_PROPAGATED
    healthy_statuses = resource.clusters_ok
    if healthy_statuses < resource.clusters_total:
        return Condition.DEGRADED
    if resource.clusters_out_of_sync:
        return Condition.OUT_OF_SYNC
    return Condition.PROPAGATED


def cluster_rows(resource) -> list[PropagatedVersion]:
    return list(resource.propagated_versions.select_related("cluster", "revision").order_by("cluster__name"))


def latest_run(resource) -> PropagationRun | None:
    return resource.runs.select_related("revision", "actor").order_by("-pk").first()


def run_targets(run) -> dict[int, PropagationTarget]:
    if run is None:
        return {}
    return {t.cluster_id: t for t in run.targets.all()}


def out_of_sync() -> QuerySet:
    return (
        PropagatedVersion.objects.filter(sync_state=SyncState.OUT_OF_SYNC)
        .exclude(status__in=_GONE)
        .select_related("resource__type", "cluster")
        .order_by("-drift_detected_at", "pk")
    )


def find_resources(qualified: str, *, kind: str = "") -> list[FederatedResource]:
    """'ns/name' (or 'name' for cluster-scoped) -> matching resources, optionally of one kind."""
    namespace, _, name = qualified.rpartition("/")
    qs = FederatedResource.objects.select_related("type", "current_revision", "propagated_revision").filter(
        namespace=namespace, name=name
    )
    if kind:
        qs = qs.filter(Q(type__kind__iexact=kind) | Q(type__plural__iexact=kind))
    return list(qs)


def summary() -> dict:
    """Counts for the dashboard panel (four queries)."""
    by_status = dict(PropagatedVersion.objects.exclude(status__in=_GONE).values_list("status").annotate(n=Count("id")))
    return {
        "resources": FederatedResource.objects.count(),
        "ok": by_status.get(PropagationReason.OK, 0),
        "failing": sum(
            n for status, n in by_status.items() if status not in (PropagationReason.OK, PropagationReason.PENDING)
        ),
        "pending": by_status.get(PropagationReason.PENDING, 0),
        "out_of_sync": PropagatedVersion.objects.filter(sync_state=SyncState.OUT_OF_SYNC)
        .exclude(status__in=_GONE)
        .count(),
        "health": health_counts(),
    }


def health_counts() -> dict[str, int]:
    """Propagated objects per health (federation.health), over the fleet: one query, streamed."""
    counts = {value: 0 for value in Health.values}
    rows = (
        PropagatedVersion.objects.exclude(status__in=_GONE)
        .values_list("resource__type__kind", "version", "remote_status", "cluster__state")
        .iterator(chunk_size=2000)
    )
    for kind, version, remote_status, cluster_state in rows:
        counts[health(kind, remote_status, written=bool(version), reachable=cluster_state == ClusterState.READY)] += 1
    return counts
