"""Resource drift: compare live objects with what FedPortal applied; report, or re-apply (Enforce)."""

import logging
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
from federation.models import FederatedResource, PropagatedVersion, PropagationTarget
from federation.propagation.common import (
    apply_as_fedportal,
    collect_status,
    live_identity,
    naming_uid,
    object_version,
    read_live,
    remote_status,
    uid_refused,
)
from federation.rendering import ignored_paths
from fedportal.audit import record_event
from fedportal.masking import is_secret_kind, mask_secrets

logger = logging.getLogger(__name__)


# --- drift -------------------------------------------------------------------------------------------


@dataclass
class DriftSummary:
    checked: int = 0
    out_of_sync: int = 0
    repaired: int = 0
    errors: int = 0
    resynced: int = 0


def detect_drift(*, cluster: Cluster | None = None, resource: FederatedResource | None = None) -> DriftSummary:
    """Compare each live object with its PropagatedVersion. External changes -> OutOfSync with a
    field diff (server-populated and retained fields ignored); Enforce re-applies what we applied."""
    summary = DriftSummary()
    qs = PropagatedVersion.objects.select_related("resource__type", "cluster", "revision").filter(
        status=PropagationReason.OK,
        applied_manifest__isnull=False,
        cluster__state=ClusterState.READY,
        cluster__isolated=False,
    )
    if cluster is not None:
        qs = qs.filter(cluster=cluster)
    if resource is not None:
        qs = qs.filter(resource=resource)
    # Never judge (or Enforce) an object while a propagation to that cluster is in flight: the
    # baseline is about to change, and re-applying the old one would undo the new revision.
    in_flight = PropagationTarget.objects.filter(
        run__resource=OuterRef("resource_id"),
        cluster=OuterRef("cluster_id"),
        state__in=[TargetState.PENDING, TargetState.RUNNING, TargetState.RETRYING],
    )
    qs = qs.exclude(Exists(in_flight))
    connections = {}
    for pv in qs.order_by("cluster_id", "id").iterator(chunk_size=200):
        summary.checked += 1
        try:
            conn = connections.get(pv.cluster_id) or connections.setdefault(pv.cluster_id, connection_for(pv.cluster))
            outcome = check_drift(pv, conn=conn)
        except kube.KubeError as exc:
            summary.errors += 1
            logger.info("drift check of %s on %s failed: %s", pv.resource_id, pv.cluster.name, exc)
            continue
        summary.out_of_sync += outcome == "out_of_sync"
        summary.repaired += outcome == "repaired"
    return summary


def check_drift(pv: PropagatedVersion, *, conn=None) -> str:
    """One object: 'in_sync', 'out_of_sync' or 'repaired'. Raises KubeError when unreachable."""
    resource, ftype, cluster = pv.resource, pv.resource.type, pv.cluster
    conn = conn or connection_for(cluster)
    live = read_live(conn, resource)
    now = timezone.now()
    live_uid = live_identity(live or {})["live_uid"]
    if live is None or (live.get("metadata") or {}).get("deletionTimestamp"):
        # gone, or being deleted by someone else: either way not what FedPortal applied
        changes = [{"path": "/", "before": "present", "after": None, "change": "removed"}]
    elif pv.live_uid and live_uid and live_uid != pv.live_uid:
        # deleted and made again outside FedPortal: another object under the same name
        changes = [{"path": "/metadata/uid", "before": pv.live_uid, "after": live_uid, "change": "replaced"}]
    else:
        collect_status(pv, ftype, live)
        changes = [
            c.as_dict()
            for c in diff_desired_live(pv.applied_manifest, live, ignore=SERVER_POPULATED + ignored_paths(ftype.kind))
        ]
        changes = mask_secrets(changes, secret=is_secret_kind(ftype.kind))
    if not changes:
        update = {
            "sync_state": SyncState.IN_SYNC,
            "drift": [],
            "drift_checked_at": now,
            "live_resource_version": str((live.get("metadata") or {}).get("resourceVersion", "")),
        }
        if pv.sync_state == SyncState.OUT_OF_SYNC:
            record_event(
                "federation.drift.resolve",
                obj=resource,
                cluster=cluster.name,
                summary=f"{resource} on {cluster.name} is back in sync",
            )
        PropagatedVersion.objects.filter(pk=pv.pk).update(**update)
        return "in_sync"
    paths = ", ".join(c["path"] for c in changes[:5]) + (" ..." if len(changes) > 5 else "")
    if pv.sync_state != SyncState.OUT_OF_SYNC or pv.drift != changes:
        record_event(
            "federation.drift.detect",
            obj=resource,
            cluster=cluster.name,
            summary=f"Drift on {cluster.name}: {resource} changed outside FedPortal ({paths})",
            before={"applied": {c["path"]: c["before"] for c in changes}},
            after={"live": {c["path"]: c["after"] for c in changes}},
        )
    PropagatedVersion.objects.filter(pk=pv.pk).update(
        sync_state=SyncState.OUT_OF_SYNC,
        drift=changes,
        drift_checked_at=now,
        drift_detected_at=pv.drift_detected_at if pv.sync_state == SyncState.OUT_OF_SYNC else now,
    )
    if resource.drift_policy != DriftPolicy.ENFORCE:
        return "out_of_sync"
    # naming the uid we wrote: a replaced object is refused (never taken over), a removed one made again
    manifest = naming_uid(pv.applied_manifest, pv.live_uid) if pv.live_uid else pv.applied_manifest
    try:
        result = apply_as_fedportal(conn, ftype, manifest)
    except kube.KubeError as exc:
        if exc.transient:
            raise
        if uid_refused(exc):
            exc = kube.KubePermanentError(
                f"{ftype.kind} {resource.qualified_name} on {cluster.name} was deleted and made again outside FedPortal; "
                f"it is left untouched (delete it to let FedPortal create its own).",
                kind=exc.kind,
            )
        PropagatedVersion.objects.filter(pk=pv.pk).update(message=f"Drift repair failed: {exc.message}")
        record_event(
            "federation.drift.enforce_failed",
            obj=resource,
            cluster=cluster.name,
            summary=f"Could not repair drift of {resource} on {cluster.name}: {exc.message}",
        )
        return "out_of_sync"
    obj = result.object
    PropagatedVersion.objects.filter(pk=pv.pk).update(
        sync_state=SyncState.IN_SYNC,
        drift=[],
        drift_repaired_at=timezone.now(),
        version=object_version(obj),
        **live_identity(obj),
        message=f"Drift repaired (Enforce): {paths}.",
        remote_status=remote_status(ftype, obj) or pv.remote_status,
    )
    record_event(
        "federation.drift.enforce",
        obj=resource,
        cluster=cluster.name,
        summary=f"Re-applied {resource} on {cluster.name} to repair drift ({paths})",
        before={"live": {c["path"]: c["after"] for c in changes}},
        after={"applied": {c["path"]: c["before"] for c in changes}},
    )
    return "repaired"
