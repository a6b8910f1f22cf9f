"""Health and version probing with KubeFed's semantics, and "poll now" progress."""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from clusters import kube
from clusters.choices import ClusterState
from clusters.models import Cluster, ClusterStateChange, PollRequest, VersionSample
from clusters.services.connections import connection_for
from fedportal import metrics
from fedportal.audit import record_event

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class ProbeOutcome:
    cluster_id: int
    skipped: str = ""  # why nothing was done ("" when the probe ran)
    reachable: bool = False
    ready: bool = False
    state: str = ""
    changed_state: bool = False
    version_sampled: bool = False
    error: str = ""


def _acquire_lease(cluster_id: int, budget: float) -> bool:
    """Compare-and-set: only one probe of a cluster runs at a time (a crashed one expires)."""
    now = timezone.now()
    from django.db.models import Q

    return bool(
        Cluster.objects.filter(pk=cluster_id)
        .filter(Q(probe_lease_until__isnull=True) | Q(probe_lease_until__lt=now))
        .update(probe_lease_until=now + timedelta(seconds=budget))
    )


def probe_budget_seconds() -> float:
    """Upper bound of one probe: readyz (+healthz fallback), version, nodes, each timed out."""
    return settings.FEDPORTAL_HEALTH_TIMEOUT_SECONDS * 4 + 2


def probe_cluster(cluster: Cluster | int, *, requested_at: datetime | None = None) -> ProbeOutcome:
    """Probe one cluster: /readyz (or /healthz), /version, nodes; then move its state:

    * reachable and ready: successes += 1; Ready once successes >= FEDPORTAL_HEALTH_SUCCESS_THRESHOLD
    * reachable but not ready (5xx, not "ok", 401/403, version/node errors): NotReady
    * unreachable (DNS, refused, timeout): failures += 1; NotReady at once, Offline once
      failures >= FEDPORTAL_HEALTH_FAILURE_THRESHOLD

    Idempotent: a probe requested at ``requested_at`` is skipped when the cluster was probed since,
    and a compare-and-set lease keeps two workers from probing the same cluster at once.
    """
    cluster_id = cluster.pk if isinstance(cluster, Cluster) else int(cluster)
    row = Cluster.objects.filter(pk=cluster_id).first()
    if row is None:
        return ProbeOutcome(cluster_id, skipped="gone")
    if requested_at is not None and row.last_probe_at is not None and row.last_probe_at >= requested_at:
        return ProbeOutcome(cluster_id, skipped="already probed since requested")
    budget = probe_budget_seconds()
    if not _acquire_lease(cluster_id, budget):
        return ProbeOutcome(cluster_id, skipped="another probe is running")
    try:
        return _probe(row)
    finally:
        Cluster.objects.filter(pk=cluster_id).update(probe_lease_until=None)


def _probe(cluster: Cluster) -> ProbeOutcome:
    timeout = settings.FEDPORTAL_HEALTH_TIMEOUT_SECONDS
    reachable, ready, error = False, False, ""
    version: kube.VersionInfo | None = None
    nodes: list[kube.NodeInfo] | None = None
    started = time.monotonic()
    try:
        conn = connection_for(cluster)
        health = kube.check_ready(conn, timeout=timeout)
        reachable = True
        if not health.ok:
            error = f"Not ready: {health.detail}"
        else:
            version = kube.get_version(conn, timeout=timeout)
            nodes = kube.list_nodes(conn, timeout=timeout)
            ready = True
    except kube.KubeError as exc:
        error = exc.message
        # An HTTP answer (401, 403, 5xx...) proves the server is there; no answer counts to Offline.
        reachable = reachable or exc.kind not in kube.UNREACHABLE_KINDS
        ready = False
    except Exception as exc:  # decryption failure and the like: the cluster cannot be probed
        logger.exception("probe of %s failed", cluster.name)
        error = f"Probe failed: {type(exc).__name__}"
        reachable = False
    logger.info("probe %s reachable=%s ready=%s in %.2fs", cluster.name, reachable, ready, time.monotonic() - started)
    metrics.observe_probe(time.monotonic() - started, reachable=reachable)
    return _record_probe(cluster.pk, reachable=reachable, ready=ready, error=error, version=version, nodes=nodes)


def _next_state(current: str, *, reachable: bool, ready: bool, failures: int, successes: int) -> str:
    if ready:
        return ClusterState.READY if successes >= settings.FEDPORTAL_HEALTH_SUCCESS_THRESHOLD else current
    if not reachable:
        if failures >= settings.FEDPORTAL_HEALTH_FAILURE_THRESHOLD:
            return ClusterState.OFFLINE
        return ClusterState.OFFLINE if current == ClusterState.OFFLINE else ClusterState.NOT_READY
    return ClusterState.NOT_READY


def _record_probe(cluster_id, *, reachable, ready, error, version, nodes) -> ProbeOutcome:
    now = timezone.now()
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().filter(pk=cluster_id).first()
        if cluster is None:
            return ProbeOutcome(cluster_id, skipped="gone")
        if ready:
            successes, failures = cluster.consecutive_successes + 1, 0
        elif reachable:
            successes, failures = 0, 0
        else:
            successes, failures = 0, cluster.consecutive_failures + 1
        old_state = cluster.state
        new_state = _next_state(old_state, reachable=reachable, ready=ready, failures=failures, successes=successes)
        fields = {
            "consecutive_successes": successes,
            "consecutive_failures": failures,
            "last_probe_at": now,
            "last_error": error[:4000],
            "state": new_state,
        }
        if ready:
            fields["last_success_at"] = now
        sampled = False
        if version is not None and nodes is not None:
            kubelets = {node.name: node.kubelet_version for node in nodes}
            regions = Counter(node.region for node in nodes if node.region)
            fields.update(
                server_version=version.git_version,
                version_major=version.major,
                version_minor=version.minor,
                platform=version.platform,
                kubelet_versions=kubelets,
                node_count=len(nodes),
                region=regions.most_common(1)[0][0] if regions else "",
                zones=sorted({node.zone for node in nodes if node.zone}),
                inventory_at=now,
            )
            if (version.git_version, version.platform, kubelets) != (
                cluster.server_version,
                cluster.platform,
                cluster.kubelet_versions,
            ) or not VersionSample.objects.filter(cluster_id=cluster_id).exists():
                VersionSample.objects.create(
                    cluster_id=cluster_id,
                    sampled_at=now,
                    git_version=version.git_version,
                    version_major=version.major,
                    version_minor=version.minor,
                    platform=version.platform,
                    kubelet_versions=kubelets,
                )
                sampled = True
        changed = new_state != old_state
        if changed:
            fields["state_changed_at"] = now
            reason = error or "Probe succeeded"
            ClusterStateChange.objects.create(
                cluster_id=cluster_id, from_state=old_state, to_state=new_state, reason=reason[:2000], at=now
            )
        Cluster.objects.filter(pk=cluster_id).update(**fields)
        if changed:
            record_event(
                "cluster.state_change",
                obj=cluster,
                cluster=cluster.name,
                summary=f"{cluster.name}: {old_state} -> {new_state}" + (f" ({error[:200]})" if error else ""),
                before={"state": old_state},
                after={"state": new_state},
            )
    return ProbeOutcome(
        cluster_id,
        reachable=reachable,
        ready=ready,
        state=new_state,
        changed_state=changed,
        version_sampled=sampled,
        error=error,
    )


# ---------------------------------------------------------------------------------------------
# Poll now


def _queue_probe_on_commit(cluster_id: int) -> None:
    from clusters.tasks import probe_cluster_task

    transaction.on_commit(lambda: probe_cluster_task.apply_async((cluster_id,), expires=300))


def request_poll(*, cluster: Cluster | None = None, actor=None) -> PollRequest:
    """"Poll now" for one cluster or the whole fleet; progress is read with poll_progress()."""
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
        from clusters.tasks import poll_fleet_task, probe_cluster_task

        requested_at = poll.started_at.isoformat()
        if cluster is not None:
            transaction.on_commit(lambda: probe_cluster_task.apply_async((cluster.pk, requested_at), expires=300))
        else:
            transaction.on_commit(lambda: poll_fleet_task.apply_async((requested_at,), expires=300))
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
    from django.db.models import Count, Q

    scope = Cluster.objects.all() if poll.cluster_id is None else Cluster.objects.filter(pk=poll.cluster_id)
    counts = scope.aggregate(
        done=Count("id", filter=Q(last_probe_at__gte=poll.started_at)),
        failed=Count("id", filter=Q(last_probe_at__gte=poll.started_at) & ~Q(last_error="")),
        present=Count("id"),
    )
    total = min(poll.total, counts["present"]) if poll.total else counts["present"]
    return PollProgress(total=total, done=min(counts["done"], total), failed=min(counts["failed"], total))


def fan_out_probes(*, requested_at: datetime | None = None, expires: float | None = None) -> int:
    """Queue one probe task per cluster (queue "probes"); returns how many were queued."""
    from clusters.tasks import probe_cluster_task

    stamp = requested_at.isoformat() if requested_at else None
    count = 0
    for cluster_id in Cluster.objects.order_by("pk").values_list("pk", flat=True).iterator():
        args = (cluster_id, stamp) if stamp else (cluster_id,)
        probe_cluster_task.apply_async(args, expires=expires)
        count += 1
    return count
