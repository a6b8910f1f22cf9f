"""Cluster probing, the one path: ``probe_clusters`` probes one or many clusters (a thread pool) and
writes the rows in bulk; ``probe_cluster`` is the same for one cluster; ``next_state`` is KubeFed's
health state machine. (A second, slower path that read /readyz, /version and the nodes at every
poll was removed: this one reads /version every poll and the inventory when due.)

Batching: one task probes a chunk of clusters with a thread pool and writes the rows in bulk.

A fleet poll used to be one Celery message and ~7 queries per cluster. Probes are I/O-bound, so a
chunk of clusters (FEDPORTAL_PROBE_BATCH_SIZE) is probed by one task with up to
FEDPORTAL_PROBE_THREADS threads, and the results are written in one transaction: one bulk UPDATE
of the Cluster rows, one bulk INSERT of VersionSamples and state changes (plus an audit event per
state change). The semantics are KubeFed's (``next_state``: health
thresholds, a VersionSample only when the version or kubelets changed, a compare-and-set lease so
two workers never probe one cluster at once, a repeat of a request already served is a no-op).

What a poll asks a cluster. Every poll reads ``/version``: it proves the API server answers, that our
credentials are still accepted (an apiserver authenticates a bearer token on every path) and catches
an upgrade within one period. ``/readyz`` and the node list (kubelet versions, zones) are the
inventory: read when it is due (``inventory_due``): never read, older than
FEDPORTAL_INVENTORY_REFRESH_SECONDS (spread per cluster so the fleet's refreshes do not all fall on
one poll), the version changed, the last probe failed, or the cluster is not Ready (recovery is only
declared after /readyz says ok). Listing every node of every cluster every 10 s is the load a real
fleet notices; a node's kubelet version changes in a node upgrade, which takes minutes.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from concurrent.futures import ALL_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from clusters import enqueue, kube, lifecycle
from clusters.choices import ClusterState
from clusters.models import Cluster, ClusterStateChange, VersionSample
from clusters.services.connections import connection_for
from fedportal import logs, metrics
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


def next_state(current: str, *, reachable: bool, ready: bool, failures: int, successes: int) -> str:
    """KubeFed's cluster health state machine, after a probe (``failures``/``successes``: the
    consecutive counts including this probe):

    * reachable and ready: Ready once successes >= FEDPORTAL_HEALTH_SUCCESS_THRESHOLD (else unchanged)
    * reachable but not ready (5xx, not "ok", 401/403): NotReady
    * unreachable (DNS, refused, timeout): NotReady at once, Offline once failures >=
      FEDPORTAL_HEALTH_FAILURE_THRESHOLD (and Offline stays Offline)
    """
    if ready:
        return ClusterState.READY if successes >= settings.FEDPORTAL_HEALTH_SUCCESS_THRESHOLD else current
    if not reachable:
        if failures >= settings.FEDPORTAL_HEALTH_FAILURE_THRESHOLD:
            return ClusterState.OFFLINE
        return ClusterState.OFFLINE if current == ClusterState.OFFLINE else ClusterState.NOT_READY
    return ClusterState.NOT_READY


def probe_budget_seconds() -> float:
    """Upper bound of one probe: readyz (+healthz fallback), version, nodes, each timed out."""
    return settings.FEDPORTAL_HEALTH_TIMEOUT_SECONDS * 4 + 2


FLUSH_SECONDS = 0.5  # how long finished probes of a chunk may wait for slower ones before being written


def batch_size() -> int:
    return max(1, int(getattr(settings, "FEDPORTAL_PROBE_BATCH_SIZE", 250)))


def thread_count() -> int:
    return max(1, int(getattr(settings, "FEDPORTAL_PROBE_THREADS", 16)))


@dataclass
class _Observation:
    cluster: Cluster
    reachable: bool = False
    ready: bool = False
    error: str = ""
    version: kube.VersionInfo | None = None
    nodes: list | None = None
    served: list | None = None  # group-versions from discovery, read with the nodes


def inventory_due(cluster: Cluster, version: kube.VersionInfo, now: datetime) -> bool:
    """Whether this poll also reads /readyz and the nodes (see the module docstring)."""
    refresh = settings.FEDPORTAL_INVENTORY_REFRESH_SECONDS
    if refresh <= 0 or cluster.inventory_at is None or cluster.state != ClusterState.READY:
        return True
    if cluster.consecutive_failures or cluster.last_error or version.git_version != cluster.server_version:
        return True
    # each cluster's own threshold between 50% and 100% of the period, so refreshes spread out
    spread = 0.5 + (cluster.pk * 7919 % 100) / 200
    return (now - cluster.inventory_at).total_seconds() >= refresh * spread


def _observe(cluster: Cluster) -> _Observation:
    """The network half of a probe: /version, then /readyz and the nodes when the inventory is due."""
    timeout = settings.FEDPORTAL_HEALTH_TIMEOUT_SECONDS
    seen = _Observation(cluster)
    try:
        conn = connection_for(cluster)
        with kube.deadline(probe_budget_seconds()):  # all of it, however many pages the nodes come in
            version = kube.get_version(conn, timeout=timeout)
            seen.reachable = True
            if inventory_due(cluster, version, timezone.now()):
                health = kube.check_ready(conn, timeout=timeout)
                if not health.ok:
                    seen.error = f"Not ready: {health.detail}"
                    return seen
                seen.nodes = kube.list_nodes(conn, timeout=timeout)
                seen.served = sorted(set(kube.get_discovery(conn, timeout=timeout)))
        seen.version = version
        seen.ready = True
    except kube.KubeError as exc:
        seen.error = exc.message  # kube messages already name the failure
        seen.reachable = seen.reachable or exc.kind not in kube.UNREACHABLE_KINDS
        seen.ready = False
    except Exception as exc:  # noqa: BLE001 - decryption failure and the like: cannot be probed
        logger.exception("probe of %s failed", cluster.name)
        seen.error = f"Probe failed: {type(exc).__name__}"
        seen.reachable = False
    return seen


def _timed_observe(cluster: Cluster) -> _Observation:
    started = time.monotonic()
    seen = _observe(cluster)
    metrics.observe_probe(time.monotonic() - started, reachable=seen.reachable)
    return seen


def chunk_budget_seconds(clusters: int, threads: int | None = None) -> float:
    """Upper bound of probing a chunk: its rounds of probes (``threads`` at a time), each bounded."""
    rounds = -(-max(1, clusters) // max(1, threads or thread_count()))
    return rounds * probe_budget_seconds()


def _lease(ids: list[int], threads: int) -> set[int]:
    """Compare-and-set leases for a whole chunk; returns the ids this call holds."""
    if not ids:
        return set()
    now = timezone.now()
    # a stamp unique to this call, so we can read back which rows we won
    budget = chunk_budget_seconds(len(ids), threads) + probe_budget_seconds()
    until = now + timedelta(seconds=budget, microseconds=random.randrange(1, 999_999))
    Cluster.objects.filter(pk__in=ids).filter(Q(probe_lease_until__isnull=True) | Q(probe_lease_until__lt=now)).update(
        probe_lease_until=until
    )
    return set(Cluster.objects.filter(pk__in=ids, probe_lease_until=until).values_list("pk", flat=True))


RECORDED_FIELDS = [
    "consecutive_successes",
    "consecutive_failures",
    "last_probe_at",
    "last_error",
    "state",
    "last_success_at",
    "state_changed_at",
    "server_version",
    "version_major",
    "version_minor",
    "platform",
    "kubelet_versions",
    "node_count",
    "region",
    "zones",
    "inventory_at",
    "probe_lease_until",
    "served_apis",
]


def probe_clusters(
    cluster_ids, *, requested_at: datetime | None = None, threads: int | None = None
) -> list[ProbeOutcome]:
    """Probe many clusters at once (threads), record every result in one transaction."""
    ids = sorted({int(i) for i in cluster_ids})
    rows = {c.pk: c for c in Cluster.objects.filter(pk__in=ids)}
    outcomes = [ProbeOutcome(i, skipped="gone") for i in ids if i not in rows]
    if requested_at is not None:
        served = [pk for pk, c in rows.items() if c.last_probe_at is not None and c.last_probe_at >= requested_at]
        outcomes += [ProbeOutcome(pk, skipped="already probed since requested") for pk in served]
        for pk in served:
            rows.pop(pk)
    threads = max(1, threads or thread_count())
    held = _lease(list(rows), threads)
    outcomes += [ProbeOutcome(pk, skipped="another probe is running") for pk in rows if pk not in held]
    todo = [rows[pk] for pk in sorted(held)]
    if not todo:
        return outcomes
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(min(threads, len(todo))) as pool:
            # Record what has finished every FLUSH_SECONDS: a healthy chunk is still one transaction,
            # but a slow or dead cluster only delays its own row, never its chunk-mates'.
            pending = {pool.submit(_timed_observe, cluster) for cluster in todo}
            while pending:
                done, pending = wait(pending, timeout=FLUSH_SECONDS, return_when=ALL_COMPLETED)
                if done:
                    outcomes += _record([future.result() for future in done])
    finally:
        Cluster.objects.filter(pk__in=held, probe_lease_until__isnull=False).update(probe_lease_until=None)
    # management clusters (discovery serves Cluster API): their CAPI objects, read at the same cadence
    for cluster in Cluster.objects.filter(pk__in=held, state=ClusterState.READY):
        if lifecycle.is_management(cluster):
            lifecycle.refresh_quietly(cluster)
    logger.info("probed %d clusters in %.2fs", len(todo), time.monotonic() - started)
    return outcomes


def probe_cluster(cluster: Cluster | int, *, requested_at: datetime | None = None) -> ProbeOutcome:
    """Probe one cluster (``probe_clusters`` for a chunk of one). Idempotent: skipped when the
    cluster was probed since ``requested_at``, or while another probe holds its lease."""
    cluster_id = cluster.pk if isinstance(cluster, Cluster) else int(cluster)
    started = time.monotonic()
    with logs.bind(cluster=cluster_id):  # a single probe ("poll now", a new cluster) gets its own log line
        [outcome] = probe_clusters([cluster_id], requested_at=requested_at, threads=1)
        name = Cluster.objects.filter(pk=cluster_id).values_list("name", flat=True).first() or cluster_id
        logger.info(
            "probe %s %s reachable=%s state=%s in %.2fs",
            name,
            outcome.skipped or "done",
            outcome.reachable,
            outcome.state or "-",
            time.monotonic() - started,
        )
    return outcome


def _record(observations: list[_Observation]) -> list[ProbeOutcome]:
    now = timezone.now()
    outcomes, samples, changes, events = [], [], [], []
    ids = [o.cluster.pk for o in observations]
    with transaction.atomic():
        current = {c.pk: c for c in Cluster.objects.select_for_update().filter(pk__in=ids)}
        inventoried = [o.cluster.pk for o in observations if o.nodes is not None]
        sampled_before = (
            set(
                VersionSample.objects.filter(cluster_id__in=inventoried).values_list("cluster_id", flat=True).distinct()
            )
            if inventoried
            else set()
        )
        updated, steady_light, steady_full = [], [], []
        for seen in observations:
            cluster = current.get(seen.cluster.pk)
            if cluster is None:
                outcomes.append(ProbeOutcome(seen.cluster.pk, skipped="gone"))
                continue
            same = seen.ready and _same_inventory(cluster, seen)  # before the fields are overwritten below
            if seen.ready:
                successes, failures = cluster.consecutive_successes + 1, 0
            elif seen.reachable:
                successes, failures = 0, 0
            else:
                successes, failures = 0, cluster.consecutive_failures + 1
            old_state = cluster.state
            new_state = next_state(
                old_state, reachable=seen.reachable, ready=seen.ready, failures=failures, successes=successes
            )
            cluster.consecutive_successes, cluster.consecutive_failures = successes, failures
            cluster.last_probe_at, cluster.last_error, cluster.state = now, seen.error[:4000], new_state
            cluster.probe_lease_until = None
            if seen.ready:
                cluster.last_success_at = now
            sampled = False
            if seen.version is not None and seen.nodes is not None:
                version, nodes = seen.version, seen.nodes
                kubelets = {node.name: node.kubelet_version for node in nodes}
                regions = Counter(node.region for node in nodes if node.region)
                if (version.git_version, version.platform, kubelets) != (
                    cluster.server_version,
                    cluster.platform,
                    cluster.kubelet_versions,
                ) or cluster.pk not in sampled_before:
                    samples.append(
                        VersionSample(
                            cluster_id=cluster.pk,
                            sampled_at=now,
                            git_version=version.git_version,
                            version_major=version.major,
                            version_minor=version.minor,
                            platform=version.platform,
                            kubelet_versions=kubelets,
                        )
                    )
                    sampled = True
                cluster.server_version, cluster.version_major = version.git_version, version.major
                cluster.version_minor, cluster.platform = version.minor, version.platform
                cluster.kubelet_versions, cluster.node_count = kubelets, len(nodes)
                cluster.region = regions.most_common(1)[0][0] if regions else ""
                cluster.zones = sorted({node.zone for node in nodes if node.zone})
                cluster.served_apis = seen.served or []
                cluster.inventory_at = now
            changed = new_state != old_state
            if (
                seen.ready
                and not changed
                and not sampled
                and not seen.error
                and cluster.consecutive_failures == 0
                and cluster.last_error == ""
                and same
            ):
                # the common case (a healthy cluster, nothing new): one UPDATE per kind of poll below
                (steady_full if seen.nodes is not None else steady_light).append(cluster.pk)
                outcomes.append(ProbeOutcome(cluster.pk, reachable=True, ready=True, state=new_state))
                continue
            if changed:
                cluster.state_changed_at = now
                changes.append(
                    ClusterStateChange(
                        cluster_id=cluster.pk,
                        from_state=old_state,
                        to_state=new_state,
                        reason=(seen.error or "Probe succeeded")[:2000],
                        at=now,
                    )
                )
                events.append((cluster, old_state, new_state, seen.error))
            updated.append(cluster)
            outcomes.append(
                ProbeOutcome(
                    cluster.pk,
                    reachable=seen.reachable,
                    ready=seen.ready,
                    state=new_state,
                    changed_state=changed,
                    version_sampled=sampled,
                    error=seen.error,
                )
            )
        for steady, refreshed in ((steady_light, {}), (steady_full, {"inventory_at": now})):
            if steady:
                Cluster.objects.filter(pk__in=steady).update(
                    consecutive_successes=F("consecutive_successes") + 1,
                    consecutive_failures=0,
                    last_probe_at=now,
                    last_success_at=now,
                    last_error="",
                    probe_lease_until=None,
                    **refreshed,
                )
        for cluster in updated:
            Cluster.objects.filter(pk=cluster.pk).update(**{f: getattr(cluster, f) for f in RECORDED_FIELDS})
        VersionSample.objects.bulk_create(samples, batch_size=500)
        ClusterStateChange.objects.bulk_create(changes, batch_size=500)
        for cluster, old_state, new_state, error in events:
            record_event(
                "cluster.state_change",
                obj=cluster,
                cluster=cluster.name,
                summary=f"{cluster.name}: {old_state} -> {new_state}" + (f" ({error[:200]})" if error else ""),
                before={"state": old_state},
                after={"state": new_state},
            )
    return outcomes


def _same_inventory(cluster: Cluster, seen: _Observation) -> bool:
    """Ready again with the same version and nodes as recorded (nothing but counters to write).
    A poll that read only /version compares the version (an upgrade always reads the nodes too)."""
    version, nodes = seen.version, seen.nodes or []
    if version is not None and seen.nodes is None:
        return cluster.server_version == version.git_version
    regions = Counter(node.region for node in nodes if node.region)
    return (
        version is not None
        and cluster.server_version == version.git_version
        and cluster.platform == version.platform
        and cluster.version_major == version.major
        and cluster.version_minor == version.minor
        and cluster.kubelet_versions == {node.name: node.kubelet_version for node in nodes}
        and cluster.node_count == len(nodes)
        and cluster.zones == sorted({node.zone for node in nodes if node.zone})
        and cluster.region == (regions.most_common(1)[0][0] if regions else "")
        and cluster.served_apis == (seen.served or [])
    )


def fan_out_probe_batches(
    *,
    requested_at: datetime | None = None,
    expires: float | None = None,
    size: int | None = None,
    cluster_ids: list[int] | None = None,
    on_commit: bool = False,
) -> int:
    """Queue one ``probe_clusters_task`` per chunk of clusters (queue "probes"): every cluster, or
    ``cluster_ids`` (e.g. the clusters an import just registered: a few messages, not one per
    cluster); with ``on_commit``, once the transaction commits. Returns the cluster count."""
    size = size or batch_size()
    stamp = requested_at.isoformat() if requested_at else None
    ids = (
        sorted(cluster_ids)
        if cluster_ids is not None
        else list(Cluster.objects.order_by("pk").values_list("pk", flat=True))
    )
    for start in range(0, len(ids), size):
        chunk = ids[start : start + size]
        # a chunk's own limits (a prefork pool enforces them): its probes run thread_count() at a time
        soft = chunk_budget_seconds(len(chunk)) + 5
        enqueue.probe_chunk(
            chunk, stamp, expires=expires, soft_time_limit=soft, time_limit=soft + 10, on_commit=on_commit
        )
    return len(ids)
