"""What every step of propagation shares: its error, its settings, and how a live object is named
and identified (object version, uid, collected status)."""

from django.conf import settings

from clusters import kube
from clusters.models import Cluster
from federation.models import (
    FederatedResource,
    FederatedType,
    Revision,
)


class PropagationError(RuntimeError):
    """The resource cannot be propagated as asked (message is for the user)."""


def setting(name: str, default):
    return getattr(settings, name, default)


def max_attempts() -> int:
    return int(setting("FEDERATION_MAX_ATTEMPTS", 8))


def backoff_seconds(attempt: int) -> float:
    """Exponential backoff: base * 2**(attempt-1), capped."""
    base = float(setting("FEDERATION_RETRY_BASE_SECONDS", 2.0))
    cap = float(setting("FEDERATION_RETRY_MAX_SECONDS", 60.0))
    return min(cap, base * (2 ** max(attempt - 1, 0)))


def lease_seconds() -> int:
    """How long a claimed target is held: past it, another worker (or the stale sweep) takes over."""
    return int(setting("FEDERATION_LEASE_SECONDS", int(setting("CELERY_TASK_TIME_LIMIT", 120)) + 10))


def kube_timeout() -> float:
    return float(setting("FEDPORTAL_KUBE_TIMEOUT_SECONDS", 10.0))


def object_version(obj: dict | None) -> str:
    """KubeFed's propagated version: gen:N when the object has a generation, else rv:N."""
    if not obj:
        return ""
    metadata = obj.get("metadata") or {}
    if metadata.get("generation"):
        return f"gen:{metadata['generation']}"
    return f"rv:{metadata.get('resourceVersion', '')}"


def batch_size() -> int:
    return max(1, int(setting("FEDERATION_BATCH_SIZE", 50)))


# A chunk task has a fixed cost: its claim, the load of its run, and each flush's transaction with its
# audit append, about fifteen queries whose compilation by the ORM takes more CPU than running them.
# A large run is therefore cut into about RUN_TASKS chunks rather than into FEDERATION_BATCH_SIZE
# clusters each, a chunk growing up to MAX_CHUNK_FACTOR times that setting: 1,000 clusters are 8
# tasks of 125, not 20 of 50 (a worker's CPU per cluster fell by about a tenth), and 10,000 are 67
# tasks of up to 150. The cap keeps a chunk within its task's time limit when its clusters hang:
# 150 clusters on FEDERATION_THREADS (16) threads with a 10 s request timeout take 94 s, under the
# 100 s soft limit.
RUN_TASKS = 8
MAX_CHUNK_FACTOR = 3


def chunked(cluster_ids) -> list[list[int]]:
    """A run's cluster ids (sorted) as the chunks its tasks take, one task each."""
    ids, base = sorted(cluster_ids), batch_size()
    size = min(max(base, -(-len(ids) // RUN_TASKS)), base * MAX_CHUNK_FACTOR)
    return [ids[start : start + size] for start in range(0, len(ids), size)]


def thread_count() -> int:
    return max(1, int(setting("FEDERATION_THREADS", 16)))


def render_args(resource: FederatedResource, revision: Revision, cluster: Cluster, *, live) -> dict:
    """What render_manifest needs besides the overrides and replicas (the template hash's input too)."""
    return dict(
        target=resource.type.target,
        template=revision.template,
        namespace=resource.namespace,
        name=resource.name,
        cluster=cluster.name,
        revision=revision.number,
        live=live,
    )


def read_live(conn, resource: FederatedResource, *, timeout: float | None = None) -> dict | None:
    """The resource's live object on one cluster (None: not there). Raises KubeError."""
    ftype = resource.type
    return kube.get_object(
        conn,
        api_version=ftype.api_version,
        plural=ftype.plural,
        namespace=resource.namespace or None,
        name=resource.name,
        timeout=kube_timeout() if timeout is None else timeout,
    )


def read_namespace(conn, name: str, *, timeout: float | None = None) -> dict | None:
    """The namespace object on one cluster (None: not there). Raises KubeError."""
    return kube.get_object(
        conn,
        api_version="v1",
        plural="namespaces",
        namespace=None,
        name=name,
        timeout=kube_timeout() if timeout is None else timeout,
    )


def apply_as_fedportal(conn, ftype: FederatedType, manifest: dict, *, body: bytes | None = None) -> kube.ApplyResult:
    """Server-side apply as FedPortal's field manager: strict field validation, taking over conflicts.
    ``body``: ``manifest`` serialised already (kube.apply_object)."""
    return kube.apply_object(
        conn,
        manifest,
        plural=ftype.plural,
        namespaced=ftype.namespaced,
        field_manager="fedportal",
        field_validation="Strict",
        force=True,
        timeout=kube_timeout(),
        body=body,
    )


def naming_uid(manifest: dict, uid: str) -> dict:
    """The manifest with metadata.uid set: an apiserver writes it only to that object; where no object
    is, it refuses it (``object_missing``), never creates."""
    return {**manifest, "metadata": {**(manifest.get("metadata") or {}), "uid": uid}}


def object_missing(exc: kube.KubeError) -> bool:
    """An apply naming a uid found no object under the name (kube-apiserver's patcher: 409 "uid
    mismatch: the provided object specified uid ..., and no existing object was found")."""
    text = (exc.message or "").lower()
    return exc.kind == kube.KIND_CONFLICT and "uid mismatch" in text and "no existing object" in text


def live_identity(obj: dict) -> dict:
    """The PropagatedVersion fields that say which live object we wrote, and at which version."""
    metadata = obj.get("metadata") or {}
    return {
        "live_resource_version": str(metadata.get("resourceVersion", "")),
        "live_uid": str(metadata.get("uid", ""))[:64],
    }


def uid_refused(exc: kube.KubeError) -> bool:
    """The apiserver would not write because the object under that name has another uid."""
    text = (exc.message or "").lower()
    return exc.kind in (kube.KIND_INVALID, kube.KIND_CONFLICT) and (
        "metadata.uid" in text or "uid in precondition" in text
    )


def remote_status(ftype: FederatedType, obj: dict | None):
    if not ftype.status_collection_enabled or not obj:
        return None
    return obj.get("status") or {}
