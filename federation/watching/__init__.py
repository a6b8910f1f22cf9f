"""The fleet watcher (`manage.py watch_fleet`): drift and member status from watch events, in
seconds, at a cost that grows with the number of changes. One module per job:

    engine     the asyncio process: leases, one watch per (cluster, federated type), health
    handling   a relist or an event, judged as the drift check judges (blocking, database threads)
    leases     which watcher holds which clusters (compare-and-set leases), what the sweep lists

Public API:

    serve(name)                      run a watcher until SIGTERM (the management command)
    default_watcher_name() -> str    host-pid
    clusters_to_sweep() -> list[int] Ready clusters whose watch is unhealthy, or due for the slow sweep
    mark_swept(cluster_id)
    watcher_rows() -> list[WatcherRow]   each running watcher, how many clusters it holds / has connected
    cluster_watches(*, unhealthy_only=False)   each cluster's watch health, unhealthy first
    lease_seconds() -> float
"""

from federation.watching.engine import serve
from federation.watching.leases import clusters_to_sweep, default_watcher_name, lease_seconds, mark_swept
from federation.watching.status import WatcherRow, cluster_watches, watcher_rows

__all__ = [
    "WatcherRow",
    "cluster_watches",
    "clusters_to_sweep",
    "default_watcher_name",
    "lease_seconds",
    "mark_swept",
    "serve",
    "watcher_rows",
]
