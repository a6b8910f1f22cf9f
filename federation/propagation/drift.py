"""Resource drift: compare live objects with what FedPortal applied; report, or re-apply (Enforce)."""

import logging
import queue
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from django.db.models import Exists, OuterRef
from django.utils import timezone

from clusters import kube
from clusters.choices import ClusterState
from clusters.models import Cluster
from clusters.services import connection_for
from federation.choices import (
    DriftPolicy,
    PropagationReason,
    SyncState,
    TargetState,
)
from federation.diffs import SERVER_POPULATED, diff_desired_live
from federation.models import FederatedResource, FederatedType, PropagatedVersion, PropagationTarget
from federation.propagation.common import (
    apply_as_fedportal,
    kube_timeout,
    live_identity,
    naming_uid,
    object_missing,
    object_version,
    read_live,
    remote_status,
    thread_count,
    uid_refused,
)
from federation.rendering import MANAGED_LABEL, ignored_paths
from fedportal.audit import record_event
from fedportal.masking import is_secret_kind, mask_secrets, scrub_message

logger = logging.getLogger(__name__)


# --- drift -------------------------------------------------------------------------------------------

# What a verdict is written against: the PropagatedVersion as it was read before the live object was
# judged. Every verdict (and a worker's write) changes one of these, so a verdict is written only if
# none came in between (compare-and-set); otherwise a newer one won and this one is dropped. Without
# it the sweep, judging an object from a LIST taken earlier, overwrote the watcher's newer verdict.
VERDICT_FIELDS = ("live_resource_version", "sync_state", "revision_id", "drift_checked_at")
SUPERSEDED = "superseded"


def verdict_token(pv: PropagatedVersion) -> tuple:
    """The PropagatedVersion's VERDICT_FIELDS as loaded (the order of VERDICT_FIELDS)."""
    return tuple(getattr(pv, f) for f in VERDICT_FIELDS)


def _as_read(token: tuple) -> dict:
    return dict(zip(VERDICT_FIELDS, token, strict=True))


@dataclass
class DriftSummary:
    checked: int = 0
    out_of_sync: int = 0
    repaired: int = 0
    errors: int = 0
    resynced: int = 0


def drift_candidates(
    *,
    cluster: Cluster | None = None,
    resource: FederatedResource | None = None,
    cluster_ids=None,
    ready_only: bool = True,
):
    """The PropagatedVersions whose live object is judged: applied OK, on a cluster that is Ready
    (unless ``ready_only`` is off) and not isolated, and with no propagation to that cluster in
    flight (the baseline is about to change, and re-applying the old one would undo the new revision)."""
    qs = PropagatedVersion.objects.select_related("resource__type", "cluster", "revision").filter(
        status=PropagationReason.OK,
        applied_manifest__isnull=False,
        cluster__isolated=False,
    )
    if ready_only:  # a watch event proves the cluster answers, whatever its last probe said
        qs = qs.filter(cluster__state=ClusterState.READY)
    if cluster is not None:
        qs = qs.filter(cluster=cluster)
    if cluster_ids is not None:
        qs = qs.filter(cluster_id__in=list(cluster_ids))
    if resource is not None:
        qs = qs.filter(resource=resource)
    in_flight = PropagationTarget.objects.filter(
        run__resource=OuterRef("resource_id"),
        cluster=OuterRef("cluster_id"),
        state__in=[TargetState.PENDING, TargetState.RUNNING, TargetState.RETRYING],
    )
    return qs.exclude(Exists(in_flight))


def managed_selector() -> str:
    """The label selector of everything FedPortal applied (render_manifest sets the label)."""
    return f"{MANAGED_LABEL}=true"


def detect_drift(*, cluster: Cluster | None = None, resource: FederatedResource | None = None) -> DriftSummary:
    """Compare each live object with its PropagatedVersion. External changes -> OutOfSync with a
    field diff (server-populated and retained fields ignored); Enforce re-applies what we applied.

    One LIST per (cluster, federated type) with the managed label selector, not one GET per object
    (only an object missing from the LIST gets a GET: removed, or made again without our label); the
    LISTs run on a thread pool (FEDERATION_THREADS), the judging in this thread. The candidates are
    read as plain rows; only the objects whose resourceVersion moved since FedPortal wrote or last
    judged them are loaded in full and diffed."""
    summary = DriftSummary()
    rows = (
        drift_candidates(cluster=cluster, resource=resource)
        .order_by("cluster_id", "id")
        .values_list(
            "pk",
            "cluster_id",
            "resource__type_id",
            "resource__namespace",
            "resource__name",
            "live_resource_version",
            "sync_state",
            "revision_id",
            "drift_checked_at",
        )
    )
    groups: dict[tuple[int, int], list[tuple]] = {}
    for row in rows.iterator(chunk_size=5000):
        groups.setdefault((row[1], row[2]), []).append(row)
    if not groups:
        return summary
    types = FederatedType.objects.in_bulk({type_id for _, type_id in groups})
    connections = {c.pk: connection_for(c) for c in Cluster.objects.filter(pk__in={cid for cid, _ in groups})}

    def moved_objects(key) -> dict[int, dict | None]:
        """LIST one (cluster, type) and keep what moved: PropagatedVersion id -> live object (None:
        missing from the list). An object unchanged since FedPortal wrote or last judged it (same
        resourceVersion, InSync) needs no diff and no write; when it was last confirmed is its
        cluster's ClusterWatch.last_sweep_at (one UPDATE per cluster and type was most of the
        sweep's time at 1,000 clusters, and nothing read it)."""
        ftype = types[key[1]]
        items, _ = kube.list_with_version(
            connections[key[0]],
            api_version=ftype.api_version,
            plural=ftype.plural,
            label_selector=managed_selector(),
            timeout=kube_timeout(),
        )
        live_by_key = {object_key(obj): with_type(obj, ftype) for obj in items}
        changed = {}
        for pk, _, _, namespace, name, known, state, *_ in groups[key]:
            live = live_by_key.get(((namespace or "") if ftype.namespaced else "", name))
            version = str(((live or {}).get("metadata") or {}).get("resourceVersion") or "")
            if not (version and version == known and state == SyncState.IN_SYNC):
                changed[pk] = live
        return changed

    for key, changed, error in in_list_threads(moved_objects, list(groups)):
        summary.checked += len(groups[key])
        if error is not None:
            summary.errors += len(groups[key])
            logger.info("drift LIST on cluster %s failed: %s", key[0], error)
            continue
        read_before = {row[0]: tuple(row[5:]) for row in groups[key]} if changed else {}
        for pv in drift_candidates().filter(pk__in=list(changed)).order_by("id") if changed else ():
            if verdict_token(pv) != read_before[pv.pk]:
                continue  # judged (or propagated) since the LIST was taken: a newer verdict won
            try:
                live = changed[pv.pk]
                if live is None:  # gone, or made again without our label: a GET tells which
                    outcome = check_drift(pv, conn=connections[key[0]])
                else:
                    outcome = judge_live(pv, live, conn=connections[key[0]])
            except kube.KubeError as exc:
                summary.errors += 1
                logger.info("drift check of %s on %s failed: %s", pv.resource_id, pv.cluster.name, exc)
                continue
            summary.out_of_sync += outcome == "out_of_sync"
            summary.repaired += outcome == "repaired"
    return summary


def in_list_threads(fn, keys: list):
    """Yield (key, fn(key), None) or (key, None, KubeError) as each finishes, ``fn`` running on
    FEDERATION_THREADS threads that take the keys from a queue themselves. Submitting one future per
    key from this thread (1,000 of them) and comparing here had this thread wait for the GIL behind
    the busy list threads: the sweep took twice as long as its LISTs. Any other error is raised here."""
    work: queue.SimpleQueue = queue.SimpleQueue()
    for key in keys:
        work.put(key)
    done: queue.SimpleQueue = queue.SimpleQueue()

    def drain():
        while True:
            try:
                key = work.get_nowait()
            except queue.Empty:
                return
            try:
                done.put((key, fn(key), None))
            except BaseException as exc:  # handed to the caller's thread: never a hung sweep
                done.put((key, None, exc))

    threads = min(thread_count(), len(keys))
    with ThreadPoolExecutor(max_workers=threads or 1, thread_name_prefix="drift-list") as pool:
        for _ in range(threads):
            pool.submit(drain)
        try:
            for _ in keys:
                key, value, error = done.get()
                if error is not None and not isinstance(error, kube.KubeError):
                    raise error
                yield key, value, error
        finally:  # stopped early (an error here or in the caller): the threads finish their current key only
            while True:
                try:
                    work.get_nowait()
                except queue.Empty:
                    break


def with_type(obj: dict, ftype) -> dict:
    """A list's items carry no apiVersion/kind (the list has them), a GET's object does."""
    obj.setdefault("apiVersion", ftype.api_version)
    obj.setdefault("kind", ftype.kind)
    return obj


def object_key(obj: dict) -> tuple[str, str]:
    """(namespace, name) of a live object."""
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


def pv_key(pv: PropagatedVersion) -> tuple[str, str]:
    """(namespace, name) of the object a PropagatedVersion stands for."""
    resource = pv.resource
    return (resource.namespace or "") if resource.type.namespaced else "", resource.name


def check_drift(pv: PropagatedVersion, *, conn=None, fence=None) -> str:
    """One object, read with a GET: 'in_sync', 'out_of_sync' or 'repaired'. Raises KubeError when
    unreachable."""
    conn = conn or connection_for(pv.cluster)
    live = read_live(conn, pv.resource)
    return judge_live(pv, live, conn=conn, fence=fence)


def judge_live(pv: PropagatedVersion, live: dict | None, *, conn=None, fence=None, confirm: bool = False) -> str:
    """Judge one live object (None: it is gone) against what FedPortal applied, and record the
    outcome: in sync, OutOfSync with its field diff, or re-applied under Enforce. The GET-based
    check, the LIST-based sweep and the watcher all come here. Raises KubeError (Enforce's apply).

    Every write is a compare-and-set on the VERDICT_FIELDS as ``pv`` was loaded: when another
    verdict or a propagation was recorded in between, nothing is written (no audit event either)
    and 'superseded' is returned. ``fence``: the watcher's lease check, called right before the
    verdict is written and before an Enforce apply; what it raises is not caught. ``confirm``:
    ``live`` came from a watch stream or a relist's LIST, and may be older than what FedPortal has
    recorded since (an event replayed after a reconnect, a LIST taken while a propagation was in
    flight): a difference is confirmed by a GET before it is recorded as drift, so a propagation
    that has just finished is never marked OutOfSync (nor re-applied under Enforce) from an object
    it replaced. An object that matches, or shows the very drift already recorded, needs no GET."""
    resource, ftype, cluster = pv.resource, pv.resource.type, pv.cluster
    as_read = _as_read(verdict_token(pv))
    now = timezone.now()
    status_update = {}  # the live object's collected status, when it changed
    live_uid = live_identity(live or {})["live_uid"]
    if live is None or (live.get("metadata") or {}).get("deletionTimestamp"):
        # gone, or being deleted by someone else: either way not what FedPortal applied
        changes = [{"path": "/", "before": "present", "after": None, "change": "removed"}]
    elif pv.live_uid and live_uid and live_uid != pv.live_uid:
        # deleted and made again outside FedPortal: another object under the same name
        changes = [{"path": "/metadata/uid", "before": pv.live_uid, "after": live_uid, "change": "replaced"}]
    else:
        status = remote_status(ftype, live)
        if status is not None and status != pv.remote_status:
            # written with the verdict, under its compare-and-set: an older object's status never
            # overwrites the one a newer verdict or a worker's apply recorded
            status_update = {"remote_status": status}
        changes = [
            c.as_dict()
            for c in diff_desired_live(pv.applied_manifest, live, ignore=SERVER_POPULATED + ignored_paths(ftype.kind))
        ]
        changes = mask_secrets(changes, secret=is_secret_kind(ftype.kind))
    if changes and confirm and not (pv.sync_state == SyncState.OUT_OF_SYNC and pv.drift == changes):
        # (the drift already recorded, seen again: nothing to confirm, and a drifted Deployment's
        # every status event, every relist, would cost a GET)
        return check_drift(pv, conn=conn, fence=fence)
    if fence is not None:
        fence()
    if not changes:
        update = {
            "sync_state": SyncState.IN_SYNC,
            "drift": [],
            "drift_checked_at": now,
            "live_resource_version": str((live.get("metadata") or {}).get("resourceVersion", "")),
            **status_update,
        }
        if not PropagatedVersion.objects.filter(pk=pv.pk, **as_read).update(**update):
            return _superseded(pv)
        pv.remote_status = status_update.get("remote_status", pv.remote_status)
        if pv.sync_state == SyncState.OUT_OF_SYNC:
            record_event(
                "federation.drift.resolve",
                obj=resource,
                cluster=cluster.name,
                summary=f"{resource} on {cluster.name} is back in sync",
            )
        return "in_sync"
    paths = ", ".join(c["path"] for c in changes[:5]) + (" ..." if len(changes) > 5 else "")
    if not PropagatedVersion.objects.filter(pk=pv.pk, **as_read).update(
        sync_state=SyncState.OUT_OF_SYNC,
        drift=changes,
        drift_checked_at=now,
        drift_detected_at=pv.drift_detected_at if pv.sync_state == SyncState.OUT_OF_SYNC else now,
        **status_update,
    ):
        return _superseded(pv)
    pv.remote_status = status_update.get("remote_status", pv.remote_status)
    if pv.sync_state != SyncState.OUT_OF_SYNC or pv.drift != changes:
        record_event(
            "federation.drift.detect",
            obj=resource,
            cluster=cluster.name,
            summary=f"Drift on {cluster.name}: {resource} changed outside FedPortal ({paths})",
            before={"applied": {c["path"]: c["before"] for c in changes}},
            after={"live": {c["path"]: c["after"] for c in changes}},
        )
    # what this verdict wrote: the Enforce writes below are compare-and-set on it
    as_read.update(sync_state=SyncState.OUT_OF_SYNC, drift_checked_at=now)
    # Enforce writes to the clusters: it acts once a change request holding it was applied (the
    # approved policy); switching back to Report stops it at once (``drift_policy``); and never for a
    # type whose propagation an admin disabled (KubeFed stops that type's sync controller: nothing
    # of it is written to the clusters), where drift is reported only
    if (
        resource.drift_policy != DriftPolicy.ENFORCE
        or resource.approved_drift_policy != DriftPolicy.ENFORCE
        or not ftype.propagation_enabled
    ):
        return "out_of_sync"
    conn = conn or connection_for(cluster)
    # re-applying is only right while the baseline is the one judged: no new revision recorded, no
    # propagation to the cluster started since (it would be undone by the old manifest)
    if not drift_candidates(ready_only=False).filter(pk=pv.pk, **as_read).exists():
        return _superseded(pv)
    # naming the uid we wrote: a replaced object is refused (never taken over); a removed one is
    # refused too (kube-apiserver creates nothing for an apply naming a uid), and made again by an
    # apply naming none
    manifest = naming_uid(pv.applied_manifest, pv.live_uid) if pv.live_uid else pv.applied_manifest
    if fence is not None:
        fence()
    try:
        try:
            result = apply_as_fedportal(conn, ftype, manifest)
        except kube.KubeError as exc:
            if not (pv.live_uid and object_missing(exc)):
                raise
            result = apply_as_fedportal(conn, ftype, pv.applied_manifest)
    except kube.KubeError as exc:
        if exc.transient:
            raise
        if uid_refused(exc):
            exc = kube.KubePermanentError(
                f"{ftype.kind} {resource.qualified_name} on {cluster.name} was deleted and made again outside FedPortal; "
                f"it is left untouched (delete it to let FedPortal create its own).",
                kind=exc.kind,
            )
        message = exc.message
        if is_secret_kind(ftype.kind):  # the refusal may quote the values it refused
            message = scrub_message(message, pv.applied_manifest)
        failure = f"Drift repair failed: {message}"
        if not PropagatedVersion.objects.filter(pk=pv.pk, **as_read).update(message=failure):
            return _superseded(pv)
        if pv.message != failure:  # the same refusal again (every sweep, every event) is not a new event
            record_event(
                "federation.drift.enforce_failed",
                obj=resource,
                cluster=cluster.name,
                summary=f"Could not repair drift of {resource} on {cluster.name}: {message}",
            )
        pv.message = failure
        return "out_of_sync"
    obj = result.object
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        # being deleted on the cluster (a Terminating namespace): the apply landed on an object that
        # is going, which is no repair; the next check after it is gone makes it again
        message = (
            f"Drift repair waits: {ftype.kind} {resource.qualified_name} is being deleted on {cluster.name}; "
            "it is made again once it is gone."
        )
        if not PropagatedVersion.objects.filter(pk=pv.pk, **as_read).update(message=message):
            return _superseded(pv)
        pv.message = message
        return "out_of_sync"
    if not PropagatedVersion.objects.filter(pk=pv.pk, **as_read).update(
        sync_state=SyncState.IN_SYNC,
        drift=[],
        drift_repaired_at=timezone.now(),
        version=object_version(obj),
        **live_identity(obj),
        message=f"Drift repaired (Enforce): {paths}.",
        remote_status=remote_status(ftype, obj) or pv.remote_status,
    ):
        # recorded while the apply was on the wire (the re-check above makes this narrow): what was
        # recorded stands, and the watch event of our write is judged against it
        logger.warning("drift repair of %s on %s raced a newer record; not recorded", resource, cluster.name)
        return SUPERSEDED
    record_event(
        "federation.drift.enforce",
        obj=resource,
        cluster=cluster.name,
        summary=f"Re-applied {resource} on {cluster.name} to repair drift ({paths})",
        before={"live": {c["path"]: c["after"] for c in changes}},
        after={"applied": {c["path"]: c["before"] for c in changes}},
    )
    return "repaired"


def _superseded(pv: PropagatedVersion) -> str:
    logger.info("drift verdict for %s on cluster %s dropped: a newer one was recorded", pv.resource_id, pv.cluster_id)
    return SUPERSEDED
