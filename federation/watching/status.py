"""The operational view of the watchers: who holds which clusters and how their watches are."""

from dataclasses import dataclass, field
from datetime import timedelta

from django.utils import timezone

from federation.models import ClusterWatch, FleetWatcher
from federation.watching.leases import lease_seconds


@dataclass
class WatcherRow:
    name: str
    host: str
    pid: int
    alive: bool
    heartbeat_at: object
    started_at: object
    clusters: list = field(default_factory=list)  # ClusterWatch rows, cluster selected

    @property
    def connected(self) -> int:
        return sum(1 for c in self.clusters if c.connected)


def watcher_rows(*, include_stopped: bool = False) -> list[WatcherRow]:
    """Each watcher (alive first), with its clusters' watch health; then the clusters nobody holds
    under a watcher row named "(none)". Two queries."""
    now = timezone.now()
    stale = now - timedelta(seconds=lease_seconds())
    watchers = FleetWatcher.objects.all() if include_stopped else FleetWatcher.objects.filter(stopped_at__isnull=True)
    rows = {
        w.pk: WatcherRow(w.name, w.host, w.pid, w.heartbeat_at >= stale, w.heartbeat_at, w.started_at)
        for w in watchers.order_by("name")
    }
    orphan = WatcherRow("(none)", "", 0, False, None, None)
    for cw in ClusterWatch.objects.select_related("cluster").order_by("cluster__name"):
        row = rows.get(cw.watcher_id) if cw.watcher_id and cw.lease_until and cw.lease_until >= now else None
        (row or orphan).clusters.append(cw)
    result = sorted(rows.values(), key=lambda r: (not r.alive, r.name))
    return result + ([orphan] if orphan.clusters else [])
