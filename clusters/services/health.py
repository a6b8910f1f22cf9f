"""Poll now: request a poll of one cluster or the fleet, and read its progress. The probing itself
is clusters/probing.py (one path for one or many clusters, KubeFed's thresholds)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count, Q

from clusters import enqueue
from clusters.models import Cluster, PollRequest
from fedportal.audit import record_event
from fedportal.roles import Role, require_actor_role


def request_poll(*, cluster: Cluster | None = None, actor=None) -> PollRequest:
    """ "Poll now" for one cluster or the whole fleet; progress is read with poll_progress()."""
    require_actor_role(actor, Role.OPERATOR)
    total = 1 if cluster is not None else Cluster.objects.count()
    with transaction.atomic():
        poll = PollRequest.objects.create(
            cluster=cluster, total=total, requested_by=actor if getattr(actor, "pk", None) else None
        )
        record_event(
            "cluster.poll",
            actor=actor,
            obj=cluster,
            object_type="" if cluster else "clusters.fleet",
            object_repr="" if cluster else "fleet",
            cluster=cluster.name if cluster else "",
            summary=f"Poll now: {cluster.name if cluster else f'all {total} clusters'}",
        )
        requested_at = poll.started_at.isoformat()
        if cluster is not None:
            enqueue.probe_cluster(cluster.pk, requested_at)
        else:
            enqueue.poll_fleet(requested_at)
    return poll


@dataclass(frozen=True)
class PollProgress:
    total: int
    done: int
    failed: int

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    @property
    def percent(self) -> int:
        return 100 if not self.total else min(100, round(100 * self.done / self.total))

    @property
    def ok(self) -> int:
        return self.done - self.failed


def poll_progress(poll: PollRequest) -> PollProgress:
    """Clusters in scope probed since the poll started (two aggregate queries at most)."""
    scope = Cluster.objects.all() if poll.cluster_id is None else Cluster.objects.filter(pk=poll.cluster_id)
    counts = scope.aggregate(
        done=Count("id", filter=Q(last_probe_at__gte=poll.started_at)),
        failed=Count("id", filter=Q(last_probe_at__gte=poll.started_at) & ~Q(last_error="")),
        present=Count("id"),
    )
    total = min(poll.total, counts["present"]) if poll.total else counts["present"]
    return PollProgress(total=total, done=min(counts["done"], total), failed=min(counts["failed"], total))
