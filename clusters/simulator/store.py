"""Per-cluster runtime state and object storage.

Objects are stored once, as compact JSON bytes, in one dict per (group, plural). Schemas,
discovery documents and compiled validators are shared per Kubernetes minor (clusters.schemas
caches them), so a cluster costs little more than its objects.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import re
import time
import uuid
from collections import deque
from datetime import UTC, datetime

from clusters import labels, schemas, served_apis

from . import custom, defaults, rollout
from .errors import ApiError
from .fleet import ClusterSpec, Faults, FleetSpecError, parse_version

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
WRITE_LOG = 2000  # writes remembered per cluster (the admin endpoint's /log)
DROP = "drop"  # a watch queue entry: cut the connection without ending the response
WATCH_HISTORY = 500  # events kept per cluster for watches that resume from a resourceVersion


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def schema_minor(git_version: str) -> int:
    """Schema minor used for a cluster version; clamps to the nearest shipped schemas."""
    _, minor, _ = parse_version(git_version)
    return min(max(minor, schemas.SUPPORTED_MINORS[0]), schemas.SUPPORTED_MINORS[-1])


class ClusterState:
    def __init__(self, spec: ClusterSpec):
        self.spec = spec
        self.name = spec.name
        self.faults: Faults = spec.faults
        self.requests: dict[str, int] = {}  # HTTP method -> requests served (the admin endpoint shows them)
        # the writes it served (method, path, start and end wall-clock time), for tests that assert
        # how many clusters were written at once; the admin endpoint's /log shows them
        self.write_log: deque = deque(maxlen=WRITE_LOG)
        self.rollout_seconds = spec.rollout_seconds
        self.capacity = spec.capacity  # schedulable pods; a roll-out beyond it leaves replicas unready
        self.api_config = served_apis.config_key(spec.runtime_config)  # what --runtime-config switches on/off
        self.rv = 0
        self.data: dict[tuple[str, str], dict[tuple[str, str], bytes]] = {}
        self.rollouts: dict[tuple[str, str], float] = {}
        self.custom: dict[tuple[str, str, str], schemas.ApiResource] = {}  # from stored CRDs
        self.custom_status: set[tuple[str, str, str]] = set()  # custom kinds with a status subresource
        # the change feed, as an apiserver's watch cache keeps it from its start: the last WATCH_HISTORY
        # events (rv, (group, plural), type, object bytes, previous bytes; the bytes are shared with
        # the stored objects) and each watch's queue. A list followed by a watch from the list's
        # resourceVersion resumes within this window; only an older one is 410 Expired.
        self.history: deque | None = deque(maxlen=WATCH_HISTORY)
        self.history_start = 0
        self.watchers: dict[tuple[str, str], set[asyncio.Queue]] = {}
        self.set_version(spec.version)
        self._seed()
        # the watch cache starts after the cluster's bootstrap objects, as a real one starts from a list
        self.history.clear()
        self.history_start = self.rv

    # -- version ---------------------------------------------------------------------------
    def set_version(self, git_version: str) -> None:
        parse_version(git_version)
        self.git_version = git_version
        self.minor = schema_minor(git_version)
        if self.data:
            self.refresh_custom()

    def set_kubelet_version(self, git_version: str, nodes: list[str] | None = None) -> list[str]:
        """A node upgrade: the kubelet (and kube-proxy) version of ``nodes`` (default: every node).
        Returns the names changed; raises FleetSpecError for a bad version or an unknown node."""
        parse_version(git_version)
        res = schemas.find_resource(self.minor, "v1", "Node")
        known = sorted(name for _, name in self.bucket(res))
        wanted = known if nodes is None else list(nodes)
        unknown = [name for name in wanted if name not in known]
        if unknown:
            raise FleetSpecError(f"no node named {', '.join(unknown)} (nodes: {', '.join(known)})")
        for name in wanted:
            node = self.load(res, "", name)
            node["status"]["nodeInfo"].update(kubeletVersion=git_version, kubeProxyVersion=git_version)
            node["metadata"]["resourceVersion"] = self.next_rv()
            self.save(res, node)
        return wanted

    # -- resources ------------------------------------------------------------------------
    def find_resource(self, api_version: str, kind_or_plural: str) -> schemas.ApiResource | None:
        res = schemas.find_resource(self.minor, api_version, kind_or_plural)
        if res is not None and not served_apis.is_served(res, self.minor, self.api_config):
            res = None  # in the schemas, but not served by this apiserver (alpha, a newer beta)
        if res is None and self.custom:
            group, version = schemas.split_api_version(api_version)
            res = self.custom.get((group, version, kind_or_plural))
        return res

    def is_custom(self, res: schemas.ApiResource) -> bool:
        return (res.group, res.version, res.plural) in self.custom

    def custom_resources(self) -> list[schemas.ApiResource]:
        return sorted({r for r in self.custom.values()}, key=lambda r: (r.group, r.version, r.plural))

    def refresh_custom(self) -> None:
        """Recompute served custom kinds from the stored CRDs; a deleted CRD takes its objects along."""
        crd_res = schemas.find_resource(self.minor, "apiextensions.k8s.io/v1", "CustomResourceDefinition")
        table: dict = {}
        status: set = set()
        if crd_res is not None:
            for crd in self.items(crd_res, None):
                for res in custom.resources_from_crd(crd):
                    if schemas.find_resource(self.minor, res.api_version, res.plural) is None:
                        table[(res.group, res.version, res.kind)] = res
                        table[(res.group, res.version, res.plural)] = res
                        if custom.has_status_subresource(crd, res.version):
                            status.add((res.group, res.version, res.plural))
        old = {(r.group, r.plural) for r in self.custom.values()}
        new = {(r.group, r.plural) for r in table.values()}
        for key in old - new:
            for namespace, name in list(self.data.get(key, {})):
                self.drop_key(key, namespace, name)
            self.data.pop(key, None)
        self.custom = table
        self.custom_status = status

    # -- raw storage -----------------------------------------------------------------------
    def next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def bucket(self, res: schemas.ApiResource) -> dict:
        return self.data.setdefault((res.group, res.plural), {})

    def load(self, res: schemas.ApiResource, namespace: str, name: str) -> dict | None:
        raw = self.data.get((res.group, res.plural), {}).get((namespace, name))
        if raw is None:
            return None
        obj = json.loads(raw)
        if res.kind == "Deployment":
            obj = self._maybe_converge(res, obj)
        return obj

    def save(self, res: schemas.ApiResource, obj: dict) -> None:
        meta = obj["metadata"]
        bucket, key = self.bucket(res), (meta.get("namespace", ""), meta["name"])
        previous = bucket.get(key)
        event = "MODIFIED" if previous is not None else "ADDED"
        bucket[key] = raw = dumps(obj)
        self._emit((res.group, res.plural), event, raw, previous)

    def drop(self, res: schemas.ApiResource, namespace: str, name: str) -> None:
        self.drop_key((res.group, res.plural), namespace, name)

    def drop_key(self, key: tuple[str, str], namespace: str, name: str) -> None:
        """Delete one object; each deletion is a resourceVersion of its own (a namespace's or a CRD's
        objects too, as in etcd), so a watch resuming after any of them misses none of the others."""
        raw = self.data.get(key, {}).pop((namespace, name), None)
        if key == ("apps", "deployments"):
            self.rollouts.pop((namespace, name), None)
        if raw is None:
            return
        rv = self.next_rv()
        if self.history is not None:
            obj = json.loads(raw)
            obj["metadata"]["resourceVersion"] = rv  # a DELETED event carries the deletion's
            self._emit(key, "DELETED", dumps(obj))

    # -- watch -----------------------------------------------------------------------------
    def subscribe(self, res: schemas.ApiResource) -> asyncio.Queue:
        if self.history is None:
            self.history, self.history_start = deque(maxlen=WATCH_HISTORY), self.rv
        queue: asyncio.Queue = asyncio.Queue()
        self.watchers.setdefault((res.group, res.plural), set()).add(queue)
        if res.kind == "Deployment":  # roll-outs already under way finish on time for the watch
            now = time.monotonic()
            for key, due in list(self.rollouts.items()):
                self._converge_later(res, key, max(0.0, due - now))
        return queue

    def _converge_later(self, res: schemas.ApiResource, key: tuple[str, str], delay: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not serving (a test driving the store directly): reads converge
            return
        loop.call_later(delay + 0.01, self.load, res, *key)

    def unsubscribe(self, res: schemas.ApiResource, queue: asyncio.Queue) -> None:
        self.watchers.get((res.group, res.plural), set()).discard(queue)

    def close_watches(self) -> None:
        """End every open watch (the server is shutting down)."""
        for queues in self.watchers.values():
            for queue in queues:
                queue.put_nowait(None)

    def drop_watches(self) -> int:
        """Cut every open watch connection of this cluster (as a restarted apiserver or a broken
        network does); the clients must resume from their last resourceVersion. Returns how many."""
        count = 0
        for queues in self.watchers.values():
            for queue in queues:
                queue.put_nowait(DROP)
                count += 1
        return count

    def events_since(self, res: schemas.ApiResource, rv: int) -> list[tuple] | None:
        """The kept events of ``res`` after ``rv``; None when ``rv`` is older than what is kept."""
        history = self.history if self.history is not None else deque()
        oldest = history[0][0] - 1 if history.maxlen and len(history) == history.maxlen else self.history_start
        if rv < oldest:
            return None
        key = (res.group, res.plural)
        return [e for e in history if e[0] > rv and e[1] == key]

    def _emit(self, key: tuple[str, str], event: str, raw: bytes, previous: bytes | None = None) -> None:
        """Record a change for watches: (resourceVersion, resource key, event, object, previous
        object for a MODIFIED event: a filtered watch turns it into ADDED or DELETED when the
        object starts or stops matching the selectors)."""
        if self.history is None:
            return
        entry = (self.rv, key, event, raw, previous)
        self.history.append(entry)
        for queue in self.watchers.get(key, ()):
            queue.put_nowait(entry)

    def items(self, res: schemas.ApiResource, namespace: str | None):
        bucket = self.data.get((res.group, res.plural), {})
        for ns, name in sorted(bucket):
            if namespace is None or ns == namespace:
                obj = self.load(res, ns, name)
                if obj is not None:
                    yield obj

    def node_count(self) -> int:
        return len(self.data.get(("", "nodes"), {}))

    def namespace_exists(self, name: str) -> bool:
        return ("", name) in self.data.get(("", "namespaces"), {})

    def namespace_terminating(self, name: str) -> bool:
        raw = self.data.get(("", "namespaces"), {}).get(("", name))
        return raw is not None and bool(json.loads(raw)["metadata"].get("deletionTimestamp"))

    def later(self, delay: float, callback, *args) -> None:
        """Run ``callback(*args)`` after ``delay`` seconds on the serving loop; at once when not serving
        (a test driving the store directly)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            callback(*args)
            return
        loop.call_later(delay, callback, *args)

    def object_count(self) -> int:
        return sum(len(b) for b in self.data.values())

    # -- deployments -----------------------------------------------------------------------
    def schedule_rollout(self, obj: dict, res: schemas.ApiResource | None = None) -> None:
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        delay = max(self.rollout_seconds, 0)
        self.rollouts[key] = time.monotonic() + delay
        if res is not None and self.watchers.get((res.group, res.plural)):
            # a watch sees the roll-out finish when it does (reads converge it lazily otherwise)
            self._converge_later(res, key, delay)

    def _maybe_converge(self, res, obj: dict) -> dict:
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        due = self.rollouts.get(key)
        if due is None or time.monotonic() < due:
            return obj
        del self.rollouts[key]
        ready = 0 if self.rollout_blocked(obj) else self.schedulable_for(res, obj)
        rollout.finish(obj, now_text(), ready=ready)
        obj["metadata"]["resourceVersion"] = self.next_rv()
        self.save(res, obj)
        return obj

    def rollout_blocked(self, obj: dict) -> bool:
        """The rollout-fail fault, or an image matching the image-fail pattern (its pods stay in
        ImagePullBackOff): the Deployment's new replicas never become ready."""
        faults = self.faults
        if faults.rollout_fail:
            return True
        if not faults.image_fail:
            return False
        pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        images = [c.get("image") or "" for c in (pod.get("containers") or []) + (pod.get("initContainers") or [])]
        return any(fnmatch.fnmatchcase(image, faults.image_fail) for image in images if isinstance(image, str))

    def schedulable_for(self, res, obj: dict) -> int | None:
        """How many of a Deployment's replicas fit: the capacity left by the other Deployments'
        ready replicas (None: no capacity limit)."""
        if self.capacity is None:
            return None
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        used = sum(
            (other.get("status") or {}).get("readyReplicas", 0) or 0
            for other in self.items(res, None)
            if (other["metadata"].get("namespace", ""), other["metadata"]["name"]) != key
        )
        return max(self.capacity - used, 0)

    # -- seed ------------------------------------------------------------------------------
    def add_namespace_companions(self, namespace: str) -> None:
        """What controllers put in every new namespace: the `default` ServiceAccount and the
        `kube-root-ca.crt` ConfigMap (see defaults.namespace_companions)."""
        for kind, obj in defaults.namespace_companions(namespace, now_text()):
            res = schemas.find_resource(self.minor, "v1", kind)
            obj["metadata"].update(uid=str(uuid.uuid4()), resourceVersion=self.next_rv())
            self.save(res, obj)

    def _seed(self) -> None:
        ns_res = schemas.find_resource(self.minor, "v1", "Namespace")
        node_res = schemas.find_resource(self.minor, "v1", "Node")
        stamp = now_text()
        for ns in SYSTEM_NAMESPACES:
            self.save(
                ns_res,
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {
                        "name": ns,
                        "uid": str(uuid.uuid4()),
                        "resourceVersion": self.next_rv(),
                        "creationTimestamp": stamp,
                        "labels": {"kubernetes.io/metadata.name": ns},
                    },
                    "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Active"},
                },
            )
            self.add_namespace_companions(ns)
        for node in self.spec.nodes:
            self.save(
                node_res, node_object(node.name, node.kubelet_version, node.region, node.zone, stamp, self.next_rv())
            )

    def add_node(self, name: str, kubelet_version: str, zone: str, *, control_plane: bool = False) -> None:
        """A node joins (a Cluster API Machine came up): Ready, with that kubelet version."""
        res = schemas.find_resource(self.minor, "v1", "Node")
        region = self.spec.labels.get("region", "region-1")
        node = node_object(name, kubelet_version, region, zone, now_text(), self.next_rv())
        if control_plane:
            node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = ""
        self.save(res, node)

    def cordon_node(self, name: str) -> None:
        """kubectl drain's first step, as Cluster API does before deleting a Machine's node."""
        res = schemas.find_resource(self.minor, "v1", "Node")
        node = self.load(res, "", name)
        if node is not None and not (node.get("spec") or {}).get("unschedulable"):
            node.setdefault("spec", {})["unschedulable"] = True
            node["metadata"]["resourceVersion"] = self.next_rv()
            self.save(res, node)

    def remove_node(self, name: str) -> None:
        self.drop(schemas.find_resource(self.minor, "v1", "Node"), "", name)


def node_object(name: str, kubelet_version: str, region: str, zone: str, stamp: str, rv: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid4()),
            "resourceVersion": rv,
            "creationTimestamp": stamp,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/region": region,
                "topology.kubernetes.io/zone": zone,
            },
        },
        "spec": {"podCIDR": "10.244.0.0/24"},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": stamp,
                    "lastTransitionTime": stamp,
                }
            ],
            "nodeInfo": {
                "kubeletVersion": kubelet_version,
                "kubeProxyVersion": kubelet_version,
                "machineID": uuid.uuid4().hex,
                "systemUUID": str(uuid.uuid4()),
                "bootID": str(uuid.uuid4()),
                "kernelVersion": "6.1.0-sim",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.13",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        },
    }


# ---------------------------------------------------------------------------------------------
# label selectors


def parse_selector(text: str | None):
    """Parse a labelSelector into a predicate over a labels dict; ApiError 400 if malformed."""
    try:
        requirements = labels.parse_selector(text)
    except labels.SelectorError as exc:
        raise ApiError(
            400, f"unable to parse requirement: found '{exc.term.strip()}', expected: label selector"
        ) from None
    return lambda found: labels.matches(found, requirements)


def parse_field_selector(text: str | None):
    if not text:
        return lambda obj: True
    reqs = []
    for part in text.split(","):
        match = re.match(r"^\s*([A-Za-z.]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not match or match.group(1) not in ("metadata.name", "metadata.namespace"):
            raise ApiError(400, f'"{part}" is not a known field selector: only "metadata.name", "metadata.namespace"')
        field, op, value = match.groups()
        key = field.split(".")[1]
        if op == "!=":
            reqs.append(lambda o, k=key, v=value: o["metadata"].get(k, "") != v)
        else:
            reqs.append(lambda o, k=key, v=value: o["metadata"].get(k, "") == v)
    return lambda obj: all(r(obj) for r in reqs)
