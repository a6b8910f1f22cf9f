"""The clusters app's tasks, queued by name (fedportal.queueing): what services call instead of
importing clusters.tasks. Queues match the tasks' own (clusters/tasks.py)."""

from fedportal.queueing import send


def probe_cluster(
    cluster_id: int, requested_at: str | None = None, *, expires: float = 300, on_commit: bool = True
) -> None:
    """One cluster's probe (queue "probes"), by default once the transaction commits."""
    args = (cluster_id, requested_at) if requested_at else (cluster_id,)
    send("clusters.tasks.probe_cluster_task", args, on_commit=on_commit, queue="probes", expires=expires)


def poll_fleet(requested_at: str, *, expires: float = 300, on_commit: bool = True) -> None:
    """The fleet poll's fan-out (queue "default")."""
    send("clusters.tasks.poll_fleet_task", (requested_at,), on_commit=on_commit, queue="default", expires=expires)


def probe_chunk(
    cluster_ids: list[int],
    requested_at: str | None,
    *,
    expires: float | None,
    soft_time_limit: float,
    time_limit: float,
    on_commit: bool = False,
) -> None:
    """One chunk of a fleet poll (queue "probes"), with the chunk's own time limits."""
    send(
        "clusters.tasks.probe_clusters_task",
        (cluster_ids, requested_at),
        on_commit=on_commit,
        queue="probes",
        expires=expires,
        soft_time_limit=soft_time_limit,
        time_limit=time_limit,
    )
