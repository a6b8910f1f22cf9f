"""Read-side queries for views, exports and other apps. A fixed number of queries each."""

from __future__ import annotations

from django.db.models import Count, Max, QuerySet, Sum

from clusters.choices import ClusterState
from clusters.filtersets import FILTER_KEYS, ClusterFilterSet
from clusters.models import Cluster, ClusterStateChange, VersionSample

LIST_FIELDS = (
    "id",
    "name",
    "api_server",
    "role",
    "labels",
    "region",
    "zones",
    "state",
    "state_changed_at",
    "last_probe_at",
    "last_error",
    "server_version",
    "version_major",
    "version_minor",
    "platform",
    "node_count",
    "isolated",
)


def filter_clusters(*, queryset: QuerySet | None = None, **filters) -> QuerySet:
    """The inventory filtered by clusters.filtersets.ClusterFilterSet's keys (q, label, role, state,
    version), by name; only the columns lists and exports show (no credentials). A filter value
    the FilterSet refuses raises ValueError (callers check the form first)."""
    unknown = set(filters) - set(FILTER_KEYS)
    if unknown:
        raise ValueError(f"unknown cluster filters: {', '.join(sorted(unknown))}")
    qs = (queryset if queryset is not None else Cluster.objects.all()).only(*LIST_FIELDS)
    given = {key: value for key, value in filters.items() if value}
    if not given:  # most requests: a FilterSet copies every filter and builds a form just to do nothing
        return qs.order_by("name")
    filterset = ClusterFilterSet(given, queryset=qs)
    if not filterset.is_valid():
        raise ValueError(f"bad cluster filters: {filterset.errors.as_text()}")
    return filterset.qs.order_by("name")


def newest_probe_stamp() -> str:
    """What changes whenever a probe writes a cluster row: part of the cluster list's cache key, so a
    poll's results (versions, nodes, probe times) show on the next load (one aggregate query). The
    newest probe time alone could miss a chunk that committed after a newer one; the probe
    counters' sums move with every probe."""
    stamp = Cluster.objects.aggregate(
        newest=Max("last_probe_at"), successes=Sum("consecutive_successes"), failures=Sum("consecutive_failures")
    )
    newest = stamp["newest"].isoformat() if stamp["newest"] else ""
    return f"{newest}/{stamp['successes'] or 0}/{stamp['failures'] or 0}"


def version_choices() -> list[tuple[str, str]]:
    """Minor versions present in the fleet, for the filter (one query)."""
    rows = (
        Cluster.objects.filter(version_minor__isnull=False)
        .values_list("version_major", "version_minor")
        .distinct()
        .order_by("version_major", "version_minor")
    )
    return [(f"{major}.{minor}", f"{major}.{minor}") for major, minor in rows]


def fleet_summary() -> dict:
    """Counts by state and by minor version (two queries)."""
    by_state = {state: 0 for state in ClusterState.values}
    for row in Cluster.objects.values("state").annotate(n=Count("id")).order_by():
        by_state[row["state"]] = row["n"]
    versions = [
        {
            "version": f"{r['version_major']}.{r['version_minor']}" if r["version_minor"] is not None else "unknown",
            "count": r["n"],
        }
        for r in Cluster.objects.values("version_major", "version_minor")
        .annotate(n=Count("id"))
        .order_by("version_major", "version_minor")
    ]
    return {"total": sum(by_state.values()), "by_state": by_state, "versions": versions}


def state_history(cluster: Cluster, *, limit: int = 50) -> list[ClusterStateChange]:
    return list(ClusterStateChange.objects.filter(cluster=cluster).order_by("-at", "-id")[:limit])


def version_history(cluster: Cluster, *, limit: int = 20) -> list[VersionSample]:
    return list(VersionSample.objects.filter(cluster=cluster).order_by("-sampled_at", "-id")[:limit])


def clusters_by_names(names) -> dict[str, Cluster]:
    return {c.name: c for c in Cluster.objects.filter(name__in=list(names))}


def ready_members() -> QuerySet:
    """Clusters that can receive propagated resources right now (Ready, not isolated)."""
    return Cluster.objects.filter(state=ClusterState.READY, isolated=False)
