"""Which watcher process holds which clusters: leases in the database, renewed and taken with
compare-and-set updates, so several `watch_fleet` processes split the fleet without overlap and
take over a dead one's clusters once its lease has run out."""

import math
import os
import socket
from datetime import timedelta

from django.core.management.base import CommandError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from clusters.choices import ClusterRole, ClusterState
from clusters.models import Cluster
from federation.models import ClusterWatch, FleetWatcher
from federation.propagation.common import setting


def lease_seconds() -> float:
    """A watcher that has not renewed for this long is dead; its clusters go to the others."""
    return float(setting("FEDERATION_WATCH_LEASE_SECONDS", 30))


def sweep_seconds() -> float:
    """The safety-net sweep's slow period for clusters whose watch is healthy (hourly by default)."""
    return float(setting("FEDERATION_SWEEP_SECONDS", 3600))


def default_watcher_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class WatcherNameInUse(CommandError):
    """Another live process already runs a watcher under this name (a CommandError: `manage.py
    watch_fleet` prints it and exits non-zero)."""


def _process_alive(pid: int | None) -> bool:
    """Whether a process of this host runs under ``pid`` (a watcher killed without stopping, e.g.
    `make demo` ended by SIGKILL, is taken over at once when its name is started again here)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def register_watcher(name: str) -> FleetWatcher:
    """Start (or restart) the watcher ``name``. Refused while another process (host, pid) holds
    that name with a heartbeat within the lease: both would hold, and watch, every one of its
    clusters. A stopped watcher, one silent for longer than the lease, or one of this host whose
    process is gone (dead) is taken over."""
    host, pid = socket.gethostname()[:255], os.getpid()
    with transaction.atomic():
        now = timezone.now()
        other = (
            FleetWatcher.objects.select_for_update()
            .filter(name=name, stopped_at__isnull=True, heartbeat_at__gte=now - timedelta(seconds=lease_seconds()))
            .exclude(host=host, pid=pid)
            .first()
        )
        if other is not None and not (other.host == host and not _process_alive(other.pid)):
            raise WatcherNameInUse(
                f"A watcher named {name!r} is already running (host {other.host}, pid {other.pid}, last heartbeat "
                f"{other.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC). Give this one another --name, or stop that one "
                f"(or wait {lease_seconds():g} s after it died)."
            )
        watcher, _ = FleetWatcher.objects.update_or_create(
            name=name,
            defaults={"host": host, "pid": pid, "started_at": now, "heartbeat_at": now, "stopped_at": None},
        )
    return watcher


def stop_watcher(name: str) -> None:
    """A clean stop of this process's watcher: its clusters are free at once (no lease period to
    wait). Only while the name is still this process's: one paused past its lease, whose name a
    new process took over meanwhile (WatcherNameInUse), leaves that one's clusters and row alone."""
    mine = FleetWatcher.objects.filter(name=name, host=socket.gethostname()[:255], pid=os.getpid())
    ClusterWatch.objects.filter(watcher__in=mine).update(watcher=None, lease_until=None, connected=False, watches=0)
    mine.update(stopped_at=timezone.now())


def watched_cluster_ids() -> list[int]:
    """The clusters watchers cover: every member cluster."""
    return list(Cluster.objects.filter(role=ClusterRole.MEMBER).order_by("pk").values_list("pk", flat=True))


def claim_clusters(name: str) -> set[int]:
    """One heartbeat: renew this watcher's leases, give back what is beyond its fair share, take free
    or expired clusters up to it. Every take is a compare-and-set: of two watchers racing for a
    cluster exactly one update matches. Returns the ids of the clusters this watcher now holds.
    Raises WatcherNameInUse when another live process has taken this watcher's name over."""
    now = timezone.now()
    lease = timedelta(seconds=lease_seconds())
    # renewed only by the process that registered the name: one paused past its lease, whose name
    # a new process took over meanwhile, must not renew (and so watch) that one's clusters too;
    # register_watcher then refuses it (WatcherNameInUse) while the new one is alive
    mine = FleetWatcher.objects.filter(name=name, host=socket.gethostname()[:255], pid=os.getpid())
    if not mine.update(heartbeat_at=now, stopped_at=None):
        register_watcher(name)
    me = FleetWatcher.objects.get(name=name)
    ids = watched_cluster_ids()
    have = set(ClusterWatch.objects.filter(cluster_id__in=ids).values_list("cluster_id", flat=True))
    ClusterWatch.objects.bulk_create(
        [ClusterWatch(cluster_id=pk) for pk in ids if pk not in have], ignore_conflicts=True
    )
    ClusterWatch.objects.filter(watcher=me).exclude(cluster_id__in=ids).update(watcher=None, lease_until=None)
    ClusterWatch.objects.filter(watcher=me).update(lease_until=now + lease)
    alive = FleetWatcher.objects.filter(heartbeat_at__gte=now - lease, stopped_at__isnull=True).count()
    share = math.ceil(len(ids) / max(1, alive))
    mine = list(ClusterWatch.objects.filter(watcher=me).order_by("cluster_id").values_list("cluster_id", flat=True))
    if len(mine) > share:
        ClusterWatch.objects.filter(watcher=me, cluster_id__in=mine[share:]).update(
            watcher=None, lease_until=None, connected=False, watches=0
        )
    elif len(mine) < share:
        free = Q(watcher__isnull=True) | Q(lease_until__lt=now)
        for row_id in (
            ClusterWatch.objects.filter(free, cluster_id__in=ids)
            .order_by("cluster_id")
            .values_list("pk", flat=True)[: share - len(mine)]
        ):
            ClusterWatch.objects.filter(free, pk=row_id).update(
                watcher=me, lease_until=now + lease, connected=False, watches=0, reconnects=0, last_error=""
            )
    return set(ClusterWatch.objects.filter(watcher=me).values_list("cluster_id", flat=True))


def record_health(name: str, health: dict[int, dict]) -> None:
    """The watcher's view of its clusters' watches (only rows it still holds)."""
    now = timezone.now()
    for cluster_id, fields in health.items():
        ClusterWatch.objects.filter(cluster_id=cluster_id, watcher__name=name).update(**fields, updated_at=now)


def unhealthy_watch_q(now=None) -> Q:
    """ClusterWatch rows whose watch cannot be trusted: no holder, an expired lease, or not connected."""
    now = now or timezone.now()
    return Q(watcher__isnull=True) | Q(lease_until__isnull=True) | Q(lease_until__lt=now) | Q(connected=False)


def clusters_to_sweep() -> list[int]:
    """Ready clusters the safety-net sweep lists now: those whose watch is not healthy (or that no
    watcher has seen yet), and the others once per FEDERATION_SWEEP_SECONDS."""
    now = timezone.now()
    ready = Cluster.objects.filter(state=ClusterState.READY, isolated=False)
    due = now - timedelta(seconds=sweep_seconds())
    healthy_recent = ClusterWatch.objects.exclude(unhealthy_watch_q(now)).filter(last_sweep_at__gte=due)
    return list(
        ready.exclude(pk__in=healthy_recent.values_list("cluster_id", flat=True))
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def mark_swept(cluster_id: int) -> None:
    now = timezone.now()
    if not ClusterWatch.objects.filter(cluster_id=cluster_id).update(last_sweep_at=now):
        ClusterWatch.objects.get_or_create(cluster_id=cluster_id, defaults={"last_sweep_at": now})
