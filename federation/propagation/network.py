"""The network half of one target: server-side apply or delete on one cluster, and how a refusal
is classified (KubeFed's reasons). No database access: this runs on the worker's thread pool."""

import re
from dataclasses import dataclass, field

from clusters import kube
from clusters.immutable_fields import is_immutable_refusal
from clusters.models import Cluster
from clusters.services import connection_for
from federation.choices import (
    PropagationReason,
)
from federation.models import (
    FederatedResource,
    FederatedType,
    PropagatedVersion,
    Revision,
)
from federation.overrides import OverrideError
from federation.propagation.common import (
    apply_as_fedportal,
    kube_timeout,
    object_missing,
    object_version,
    read_live,
    read_namespace,
    remote_status,
    render_args,
    uid_refused,
)
from federation.rendering import (
    MANAGED_LABEL,
    RETAINED_PATHS,
    content_hash,
    render_manifest,
)
from federation.rendering import (
    override_hash as hash_overrides,  # the local variables are called override_hash
)
from fedportal.masking import is_secret_kind, scrub_message

# kube-apiserver's words for an apply it cannot type (structuredmerge.go) and for a write into a
# namespace being deleted (the NamespaceLifecycle admission plugin)
_UNTYPED_PATCH = "failed to create typed patch object"
_TERMINATING = "because it is being terminated"
_UNKNOWN_FIELD_RE = re.compile(r'unknown field \\?"([^"\\]+)\\?"')
# Server-side apply's spelling of the same rejection: ".spec.foo: field not declared in schema".
_UNDECLARED_FIELD_RE = re.compile(r"\.?([A-Za-z0-9_.\[\]-]+): field not declared in schema")


class StepFailure(Exception):
    def __init__(self, reason: str, message: str, *, transient: bool = False):
        super().__init__(message)
        self.reason, self.message, self.transient = reason, message, transient


# what the network half found on one cluster
APPLIED, UNCHANGED, DELETED, GONE, ORPHANED, SUPERSEDED, NEEDS_NAMESPACE, FAILED, ISOLATED = (
    "applied",
    "unchanged",
    "deleted",
    "gone",
    "orphaned",
    "superseded",
    "needs_namespace",
    "failed",
    "isolated",  # nothing was sent: the cluster was isolated after the run was planned
)


@dataclass
class Step:
    cluster: Cluster
    pv: PropagatedVersion
    outcome: str
    failure: StepFailure | None = None
    existed: bool = False
    manifest: dict | None = None
    template_hash: str = ""
    override_hash: str = ""
    obj: dict | None = None
    warnings: list[str] = field(default_factory=list)
    remote_status: dict | None = None


def classify_failure(exc: kube.KubeError, *, existed: bool, cluster: Cluster) -> StepFailure:
    undeclared = _UNDECLARED_FIELD_RE.findall(exc.message or "")
    # Real apiservers answer an apply whose typed patch cannot be built with a 500 (kubernetes#122480):
    # retrying cannot help, so "field not declared in schema" is FieldNotSupported whatever the status,
    # and a value of the wrong type ("expected numeric ..., got string") fails for good too
    untyped = _UNTYPED_PATCH in (exc.message or "")
    if exc.transient and not undeclared and not untyped:
        return StepFailure(
            PropagationReason.CLUSTER_NOT_READY, f"{cluster.name} is unreachable: {exc.message}", transient=True
        )
    if _TERMINATING in (exc.message or ""):
        # the namespace is being deleted (Terminating): writes into it are forbidden until it is gone,
        # after which the object can be made again (and its namespace, if FedPortal federates it)
        return StepFailure(
            PropagationReason.UPDATE_FAILED if existed else PropagationReason.CREATION_FAILED,
            f"{cluster.name}: {exc.message}; retrying once the namespace is gone.",
            transient=True,
        )
    fields = _UNKNOWN_FIELD_RE.findall(exc.message or "") + undeclared
    if (exc.kind in (kube.KIND_BAD_REQUEST, kube.KIND_INVALID) or undeclared) and fields:
        version = cluster.server_version or "its version"
        names = ", ".join(dict.fromkeys(fields))
        return StepFailure(
            PropagationReason.FIELD_NOT_SUPPORTED,
            f"{cluster.name} ({version}) does not support field {names}: {exc.message}",
        )
    if existed and exc.kind == kube.KIND_INVALID and is_immutable_refusal(exc.message):
        # retrying cannot help: the object keeps the field until it is made again
        return StepFailure(
            PropagationReason.UPDATE_FAILED,
            f"{exc.message}. {cluster.name} keeps the object as it is: restore the field in the template, "
            f"or delete the object on {cluster.name} so that the next propagation makes it again.",
        )
    reason = PropagationReason.UPDATE_FAILED if existed else PropagationReason.CREATION_FAILED
    return StepFailure(reason, exc.message)


def namespace_exists(resource: FederatedResource, cluster: Cluster, conn) -> bool:
    try:
        live = read_namespace(conn, resource.namespace)
    except kube.KubeError as exc:
        raise read_failure(exc, cluster, f"Reading namespace {resource.namespace}: ") from None
    return live is not None


def read_failure(exc: kube.KubeError, cluster: Cluster, context: str = "") -> StepFailure:
    """A read before writing failed: unreachable is retried as the write would be, anything else is final."""
    if exc.transient:
        return classify_failure(exc, existed=False, cluster=cluster)
    return StepFailure(PropagationReason.RETRIEVAL_FAILED, f"{context}{exc.message}")


def apply_step(
    resource: FederatedResource,
    revision: Revision,
    cluster: Cluster,
    pv: PropagatedVersion,
    conn,
    *,
    replicas,
    reapply: bool = False,
) -> Step:
    """Server-side apply this cluster's manifest when anything changed. No database access; raises
    StepFailure. Usually one call (``_apply_naming_uid``); the live object is read first
    (``_read_then_apply``) when that call cannot decide. ``reapply`` (an operator's re-sync): apply even when
    nothing changed on our side, so a change made on the cluster (a label, a replaced object that
    carries FedPortal's label) is put back; unchanged only when the apply changed nothing."""
    try:
        return _apply_naming_uid(resource, revision, cluster, pv, conn, replicas=replicas) or _read_then_apply(
            resource, revision, cluster, pv, conn, replicas=replicas, reapply=reapply
        )
    except StepFailure as failure:
        if is_secret_kind(resource.type.kind):
            # an API server's refusal may quote the values it refused (the revision's): they never
            # reach a status, a target, an audit event or a rollout's halt reason
            failure.message = scrub_message(
                failure.message, {"template": revision.template, "overrides": revision.overrides}
            )
        raise


def _apply_naming_uid(
    resource: FederatedResource, revision: Revision, cluster: Cluster, pv: PropagatedVersion, conn, *, replicas
) -> Step | None:
    """An object we wrote (its uid recorded, status OK) whose desired state changed is applied naming
    its uid, without reading it first: kube-apiserver writes the apply only to that object, refusing
    it where the name now belongs to another object (422, "field is immutable") or to none (409,
    "uid mismatch ... no existing object was found": deleted meanwhile). Kinds whose cluster-assigned
    fields KubeFed retains are read first instead.

    None means "read first" (``_read_then_apply``): an object we have not written (whether one is
    there, and whose, decides what is done: kube-apiserver creates nothing for an apply naming a uid,
    and an apply naming none would write over someone else's object), the uid was refused, or nothing
    changed on our side (the read then finds drift, or an object that is already up to date)."""
    ftype = resource.type
    ours = bool(pv.live_uid) and pv.status == PropagationReason.OK
    if not ours or ftype.kind in RETAINED_PATHS:
        return None
    common = render_args(resource, revision, cluster, live=None)
    template_hash = hash_template(revision, ftype, common)
    override_hash = hash_overrides(revision.overrides, cluster.name, replicas)
    if (pv.revision_id, pv.template_hash, pv.override_hash) == (revision.pk, template_hash, override_hash):
        return None
    try:
        bodies = _shared_manifest(revision, ftype, common, override_hash, replicas=replicas)
    except OverrideError as exc:
        raise StepFailure(PropagationReason.APPLY_OVERRIDES_FAILED, str(exc)) from None
    manifest = bodies.manifest
    try:
        result = apply_as_fedportal(conn, ftype, manifest, body=bodies.naming(pv.live_uid))
    except kube.KubeError as exc:
        if exc.kind == kube.KIND_NOT_FOUND or uid_refused(exc) or object_missing(exc):
            return None
        raise classify_failure(exc, existed=True, cluster=cluster) from None
    return Step(
        cluster,
        pv,
        APPLIED,
        existed=not result.created,
        manifest=manifest,
        template_hash=template_hash,
        override_hash=override_hash,
        obj=result.object,
        warnings=list(result.warnings),
    )


def _read_then_apply(
    resource: FederatedResource,
    revision: Revision,
    cluster: Cluster,
    pv: PropagatedVersion,
    conn,
    *,
    replicas,
    reapply: bool = False,
) -> Step:
    """Read the live object, render (keeping the fields KubeFed retains), and apply when anything changed."""
    ftype = resource.type
    try:
        live = read_live(conn, resource)
    except kube.KubeError as exc:
        raise read_failure(exc, cluster) from None
    if live is not None and ((live.get("metadata") or {}).get("labels") or {}).get(MANAGED_LABEL) != "true":
        raise StepFailure(
            PropagationReason.ALREADY_EXISTS,
            f"{ftype.kind} {resource.qualified_name} already exists on {cluster.name} and was not created by "
            f"FedPortal; it is left untouched. Delete it, or add the label {MANAGED_LABEL}=true to adopt it.",
        )
    common = render_args(resource, revision, cluster, live=live)
    try:
        manifest = render_manifest(overrides=revision.overrides, replicas=replicas, **common)
    except OverrideError as exc:
        raise StepFailure(PropagationReason.APPLY_OVERRIDES_FAILED, str(exc)) from None
    template_hash = hash_template(revision, ftype, common)
    override_hash = hash_overrides(revision.overrides, cluster.name, replicas)
    # what the record says this cluster holds: this revision, rendered the same way, applied OK
    recorded = (
        live is not None
        and pv.status == PropagationReason.OK
        and (pv.revision_id, pv.template_hash, pv.override_hash) == (revision.pk, template_hash, override_hash)
    )
    if recorded and not reapply and pv.version == object_version(live):
        return Step(cluster, pv, UNCHANGED, remote_status=remote_status(ftype, live))
    try:
        result = apply_as_fedportal(conn, ftype, manifest)
    except kube.KubeError as exc:
        if exc.kind == kube.KIND_NOT_FOUND and ftype.namespaced and live is None:
            # the namespace is missing (no GET of it on the common path: the apply says so)
            return Step(cluster, pv, NEEDS_NAMESPACE)
        raise classify_failure(exc, existed=live is not None, cluster=cluster) from None
    if (
        recorded
        and reapply
        and pv.live_uid == (live.get("metadata") or {}).get("uid")
        and resource_version(result.object) == resource_version(live)
    ):
        # an apiserver stores no apply that changes nothing: the object was as approved and is
        # recorded so; anything else (a status a re-sync reset, a replaced object that already
        # matches) is recorded as applied
        return Step(cluster, pv, UNCHANGED, remote_status=remote_status(ftype, result.object))
    return Step(
        cluster,
        pv,
        APPLIED,
        existed=live is not None,
        manifest=manifest,
        template_hash=template_hash,
        override_hash=override_hash,
        obj=result.object,
        warnings=list(result.warnings),
    )


def resource_version(obj: dict | None) -> str:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion", "")


def _shared_manifest(
    revision: Revision, ftype: FederatedType, common: dict, override_hash: str, *, replicas
) -> kube.UidApplyBodies:
    """The manifest for a cluster when no live object is read (nothing to retain from it), with its
    apply bodies. It depends on the cluster only through its override operations and replicas, which
    ``override_hash`` stands for, so the clusters of a chunk that share them (most of a fleet) share
    one manifest, rendered and serialised once and kept on the shared Revision instance. Never
    modified afterwards: each apply's body names its uid, and the recorded manifest is only serialised."""
    key = (ftype.api_version, ftype.kind, common["namespace"], common["name"], override_hash)
    shared = revision.__dict__.setdefault("_manifests", {})
    if key not in shared:  # two threads may both render it: same value
        shared[key] = kube.UidApplyBodies(render_manifest(overrides=revision.overrides, replicas=replicas, **common))
    return shared[key]


def hash_template(revision: Revision, ftype: FederatedType, common: dict) -> str:
    """The hash of the manifest without overrides. It depends on the live object only for the kinds
    whose fields KubeFed retains; for the others it is one value per (immutable) revision, computed
    once per chunk and kept on the shared Revision instance."""
    if ftype.kind in RETAINED_PATHS:
        return content_hash(render_manifest(overrides=[], replicas=None, **common))
    key = (ftype.api_version, ftype.kind, common["namespace"], common["name"])
    shared = revision.__dict__.setdefault("_template_hashes", {})
    if key not in shared:  # two threads may both compute it: same value
        shared[key] = content_hash(render_manifest(overrides=[], replicas=None, **common))
    return shared[key]


def delete_step(resource: FederatedResource, cluster: Cluster, pv: PropagatedVersion) -> Step:
    """Delete the object FedPortal made, and only that one: the delete names its uid (a precondition),
    so an object someone made under the name after ours went is left (KubeFed deletes only what it
    manages). Where the uid is not the recorded one (none recorded, or a stale one: the object was
    made again by FedPortal or restored from a backup), the object is read and deleted only when it
    is FedPortal's: its label, and FedPortal's own apply among its field managers."""
    conn = connection_for(cluster)
    try:
        deleted = _delete_naming(resource, conn, pv.live_uid if pv is not None else "")
        if deleted is None:
            live = read_live(conn, resource)
            if live is None:
                return Step(cluster, pv, GONE)
            if not _made_by_fedportal(live):
                return _not_ours(resource, cluster, pv)
            deleted = _delete_naming(resource, conn, (live.get("metadata") or {}).get("uid") or "")
            if deleted is None:  # replaced again between the read and the delete
                return _not_ours(resource, cluster, pv)
    except kube.KubeError as exc:
        if exc.transient:
            raise StepFailure(
                PropagationReason.DELETION_FAILED, f"{cluster.name} is unreachable: {exc.message}", transient=True
            ) from None
        raise StepFailure(PropagationReason.DELETION_FAILED, exc.message) from None
    return Step(cluster, pv, DELETED if deleted else GONE)


def _delete_naming(resource: FederatedResource, conn, uid: str) -> bool | None:
    """Delete the object of ``uid``: True, False when none is under the name, None when another
    object is (or no uid was given)."""
    if not uid:
        return None
    ftype = resource.type
    try:
        return kube.delete_object(
            conn,
            api_version=ftype.api_version,
            plural=ftype.plural,
            namespace=resource.namespace or None,
            name=resource.name,
            uid=uid,
            timeout=kube_timeout(),
        )
    except kube.KubeError as exc:
        if kube.precondition_failed(exc):
            return None
        raise


def _made_by_fedportal(live: dict) -> bool:
    """FedPortal's label, and an apply by FedPortal among the object's field managers (a copy of our
    manifest someone else applied carries the label, not our manager)."""
    meta = live.get("metadata") or {}
    if (meta.get("labels") or {}).get(MANAGED_LABEL) != "true":
        return False
    return any(
        entry.get("manager") == kube.FIELD_MANAGER and entry.get("operation") == "Apply"
        for entry in meta.get("managedFields") or []
        if isinstance(entry, dict)
    )


def _not_ours(resource: FederatedResource, cluster: Cluster, pv: PropagatedVersion) -> Step:
    """Ours is gone; what is under the name now was made by someone else, and stays."""
    note = (
        f"{resource.type.kind} {resource.qualified_name} on {cluster.name} is not the object FedPortal made "
        "(another was made under the name after ours was removed): left untouched."
    )
    return Step(cluster, pv, GONE, warnings=[note])
