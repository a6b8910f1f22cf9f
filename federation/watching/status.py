"""The operational view of the watchers: who holds which clusters and how their watches are."""

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone

from federation.models import ClusterWatch, FleetWatcher
from federation.watching.leases import lease_seconds, unhealthy_watch_q


@dataclass
class WatcherRow:
    name: str
    host: str
    pid: int
    alive: bool
    heartbeat_at: object
    started_at: object
    clusters: int
    connected: int


def watcher_rows() -> list[WatcherRow]:
    """Each running watcher (alive first) with how many clusters it holds and how many of their
    watches are connected. One query."""
    now = timezone.now()
    stale = now - timedelta(seconds=lease_seconds())
    held = Q(clusters__lease_until__gte=now)
    watchers = (
        FleetWatcher.objects.filter(stopped_at__isnull=True)
        .annotate(n=Count("clusters", filter=held), up=Count("clusters", filter=held & Q(clusters__connected=True)))
        .order_by("name")
    )
    rows = [
        WatcherRow(w.name, w.host, w.pid, w.heartbeat_at >= stale, w.heartbeat_at, w.started_at, w.n, w.up)
        for w in watchers
    ]
    return sorted(rows, key=lambda r: (not r.alive, r.name))


def cluster_watches(*, unhealthy_only: bool = False):
    """Every member cluster's watch row, the unhealthy ones first (a page of them is what the view
    shows); ``healthy`` is annotated."""
    now = timezone.now()
    rows = ClusterWatch.objects.select_related("cluster", "watcher").annotate(
        unhealthy=Count("pk", filter=unhealthy_watch_q(now))
    )
    if unhealthy_only:
        rows = rows.filter(unhealthy_watch_q(now))
    return rows.order_by("-unhealthy", "cluster__name")
