"""Cluster lifecycle from Cluster API: what the management clusters' CAPI objects say about the members.

A registered cluster whose discovery serves ``cluster.x-k8s.io/v1beta1`` is a management cluster.
At each poll of it (clusters.probing calls ``refresh``) FedPortal lists its Cluster,
KubeadmControlPlane, MachineDeployment and Machine objects, keeps one ``ManagedCluster`` row per
CAPI Cluster, links it to the registered member it describes (the same name, else the same API
endpoint host:port; a manual link is kept), and records the Machines' kubelet versions on the member
(so the version-skew matrix sees the transient skew of a roll as it happens). Fields are read with
Cluster API v1beta1's meaning: KubeadmControlPlane spec.version / status.replicas, updatedReplicas,
readyReplicas; MachineDeployment spec.template.spec.version and the same counters; Machine
status.phase, spec.version and status.nodeInfo.kubeletVersion.
"""

from __future__ import annotations

import logging
from collections import Counter
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from clusters import kube
from clusters.models import Cluster, ManagedCluster, VersionSample
from clusters.services.connections import connection_for
from clusters.versions import parse_version
from fedportal.audit import record_event
from fedportal.roles import Role, require_actor_role

logger = logging.getLogger(__name__)

CAPI_GV = "cluster.x-k8s.io/v1beta1"
CP_GV = "controlplane.cluster.x-k8s.io/v1beta1"
CLUSTER_LABEL = "cluster.x-k8s.io/cluster-name"
CP_LABEL = "cluster.x-k8s.io/control-plane"
MD_LABEL = "cluster.x-k8s.io/deployment-name"


class LifecycleError(ValueError):
    """A lifecycle read or link that cannot be done; the message says why."""


def is_management(cluster: Cluster) -> bool:
    return CAPI_GV in (cluster.served_apis or [])


def read_objects(conn: kube.ClusterConnection, timeout: float | None = None) -> dict[str, list[dict]]:
    """Every Cluster API object FedPortal reads, all namespaces."""
    return {
        "clusters": kube.list_objects(conn, api_version=CAPI_GV, plural="clusters", timeout=timeout),
        "kubeadmcontrolplanes": kube.list_objects(
            conn, api_version=CP_GV, plural="kubeadmcontrolplanes", timeout=timeout
        ),
        "machinedeployments": kube.list_objects(
            conn, api_version=CAPI_GV, plural="machinedeployments", timeout=timeout
        ),
        "machines": kube.list_objects(conn, api_version=CAPI_GV, plural="machines", timeout=timeout),
    }


def _cluster_of(obj: dict) -> str:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(CLUSTER_LABEL) or (obj.get("spec") or {}).get("clusterName") or ""


def summarize(objects: dict[str, list[dict]]) -> dict[tuple[str, str], dict]:
    """(namespace, cluster name) -> {endpoint, phase, control_plane, machine_deployments, machines}."""
    out: dict[tuple[str, str], dict] = {}
    for cl in objects["clusters"]:
        meta, spec = cl.get("metadata") or {}, cl.get("spec") or {}
        endpoint = spec.get("controlPlaneEndpoint") or {}
        out[(meta.get("namespace", ""), meta.get("name", ""))] = {
            "endpoint": f"{endpoint.get('host')}:{endpoint.get('port')}" if endpoint.get("host") else "",
            "phase": (cl.get("status") or {}).get("phase", ""),
            "control_plane_ref": (spec.get("controlPlaneRef") or {}).get("name", ""),
            "control_plane": {},
            "machine_deployments": [],
            "machines": [],
        }
    for kcp in objects["kubeadmcontrolplanes"]:
        meta, spec, status = kcp.get("metadata") or {}, kcp.get("spec") or {}, kcp.get("status") or {}
        entry = out.get((meta.get("namespace", ""), _cluster_of(kcp)))
        if entry is None:
            continue
        entry["control_plane"] = {
            "name": meta.get("name", ""),
            "version": spec.get("version", ""),
            "replicas": spec.get("replicas", 1),
            "statusReplicas": status.get("replicas", 0),
            "updatedReplicas": status.get("updatedReplicas", 0),
            "readyReplicas": status.get("readyReplicas", 0),
            "statusVersion": status.get("version", ""),
            "generation": meta.get("generation", 0),
            "observedGeneration": status.get("observedGeneration", 0),
        }
    for md in objects["machinedeployments"]:
        meta, spec, status = md.get("metadata") or {}, md.get("spec") or {}, md.get("status") or {}
        entry = out.get((meta.get("namespace", ""), _cluster_of(md)))
        if entry is None:
            continue
        entry["machine_deployments"].append(
            {
                "name": meta.get("name", ""),
                "version": ((spec.get("template") or {}).get("spec") or {}).get("version", ""),
                "replicas": spec.get("replicas", 1),
                "statusReplicas": status.get("replicas", 0),
                "updatedReplicas": status.get("updatedReplicas", 0),
                "readyReplicas": status.get("readyReplicas", 0),
                "availableReplicas": status.get("availableReplicas", 0),
                "unavailableReplicas": status.get("unavailableReplicas", 0),
                "phase": status.get("phase", ""),
                "generation": meta.get("generation", 0),
                "observedGeneration": status.get("observedGeneration", 0),
            }
        )
    for machine in objects["machines"]:
        meta, spec, status = machine.get("metadata") or {}, machine.get("spec") or {}, machine.get("status") or {}
        entry = out.get((meta.get("namespace", ""), _cluster_of(machine)))
        if entry is None:
            continue
        labels = meta.get("labels") or {}
        entry["machines"].append(
            {
                "name": meta.get("name", ""),
                "phase": status.get("phase", "") or "Pending",
                "version": spec.get("version", ""),
                "kubelet": (status.get("nodeInfo") or {}).get("kubeletVersion", ""),
                "role": "control-plane" if CP_LABEL in labels else "worker",
                "owner": labels.get(MD_LABEL, "") or ("control-plane" if CP_LABEL in labels else ""),
                "nodeName": (status.get("nodeRef") or {}).get("name", ""),
            }
        )
    for entry in out.values():
        entry["machine_deployments"].sort(key=lambda md: md["name"])
        entry["machines"].sort(key=lambda m: (m["role"] != "control-plane", m["owner"], m["name"]))
    return out


def _endpoint_of(url: str) -> str:
    """host:port of an API server URL ("" when it has none: one row stored before the port check,
    ``https://host:99999``, stopped every management cluster's refresh)."""
    try:
        parts = urlsplit(url)
        return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}" if parts.hostname else ""
    except ValueError:
        return ""


class _LinkSnapshot:
    """What automatic linking reads, loaded once per refresh (three queries, however many Cluster API
    clusters and members there are): every registered cluster by name and by API endpoint, the
    Cluster API rows already linked to a member, and the unlinked rows of other management clusters.
    ``moved`` keeps it true while the refresh saves its own rows' links."""

    def __init__(self):
        clusters = list(Cluster.objects.only("id", "name", "api_server"))
        self.by_name = {c.name: c for c in clusters}
        self.by_endpoint: dict[str, list[Cluster]] = {}
        for cluster in clusters:
            self.by_endpoint.setdefault(_endpoint_of(cluster.api_server), []).append(cluster)
        live = ManagedCluster.objects.filter(gone=False)
        self.links: dict[int, dict[int, ManagedCluster]] = {}  # member id -> {row id: row}
        for row in live.filter(member__isnull=False).only("id", "management_id", "namespace", "name", "member_id"):
            self.links.setdefault(row.member_id, {})[row.pk] = row
        self.member_of = {pk: member_id for member_id, rows in self.links.items() for pk in rows}
        self.unlinked = list(live.filter(member__isnull=True).only("id", "management_id", "name", "endpoint"))

    def candidate(self, management_id: int, name: str, endpoint: str) -> tuple[Cluster | None, str]:
        """The registered cluster a CAPI Cluster of ``management_id`` describes by its name, else by its
        API endpoint (when exactly one cluster has it); never the management cluster itself."""
        by_name = self.by_name.get(name)
        if by_name is not None and by_name.pk != management_id:
            return by_name, "name"
        if endpoint:
            found = [c for c in self.by_endpoint.get(endpoint, ()) if c.pk != management_id]
            if len(found) == 1:
                return found[0], "endpoint"
        return None, ""

    def linked_to(self, member: Cluster, *, besides: ManagedCluster) -> list[ManagedCluster]:
        return [r for pk, r in self.links.get(member.pk, {}).items() if pk != besides.pk]

    def moved(self, row: ManagedCluster) -> None:
        """``row`` was saved with its (new) link."""
        before = self.member_of.pop(row.pk, None)
        if before is not None:
            self.links[before].pop(row.pk, None)
        if row.member_id is not None:
            self.links.setdefault(row.member_id, {})[row.pk] = row
            self.member_of[row.pk] = row.member_id


def _auto_link(
    management: Cluster,
    key: tuple[str, str],
    candidate: tuple[Cluster | None, str],
    *,
    row: ManagedCluster,
    found: dict[tuple[str, str], dict],
    here: Counter,
    snapshot: _LinkSnapshot,
) -> tuple[Cluster | None, str]:
    """The member ``row`` links to automatically, ``candidate`` (by name, else endpoint); none when the
    match is ambiguous: another CAPI Cluster (another namespace of this management cluster, or another
    management cluster) matches the same member, or the member is already linked to another row. An
    admin then links by hand (link_member): the link decides which control plane an upgrade patches."""
    member, source = candidate
    if member is None:
        return None, ""
    # rows of this management cluster that are not in ``found`` are about to be marked gone
    linked = snapshot.linked_to(member, besides=row)
    if any(r.management_id != management.pk or (r.namespace, r.name) in found for r in linked):
        logger.warning("%s/%s matches %s, already linked to another Cluster API cluster", *key, member.name)
        return None, ""
    member_endpoint = _endpoint_of(member.api_server)
    elsewhere = [
        r
        for r in snapshot.unlinked
        if r.management_id != management.pk
        and (r.name == member.name or (member_endpoint and r.endpoint == member_endpoint))
    ]
    count = here[member.pk] + sum(
        1 for r in elsewhere if snapshot.candidate(r.management_id, r.name, r.endpoint)[0] == member
    )
    if count > 1:
        logger.warning("%s matches %d Cluster API clusters: none linked automatically", member.name, count)
        return None, ""
    return member, source


def refresh(management: Cluster, timeout: float | None = None) -> list[ManagedCluster]:
    """Read the management cluster's Cluster API objects and store what they say (see module doc)."""
    objects = read_objects(connection_for(management), timeout=timeout)
    found = summarize(objects)
    now = timezone.now()
    rows = []
    with transaction.atomic():
        existing = {
            (r.namespace, r.name): r for r in ManagedCluster.objects.select_for_update().filter(management=management)
        }
        snapshot = _LinkSnapshot()
        candidates = {key: snapshot.candidate(management.pk, key[1], entry["endpoint"]) for key, entry in found.items()}
        here = Counter(member.pk for member, _source in candidates.values() if member is not None)
        for (namespace, name), entry in sorted(found.items()):
            row = existing.pop((namespace, name), None) or ManagedCluster(
                management=management, namespace=namespace, name=name
            )
            if row.link_source != "manual" or row.member_id is None:
                row.member, row.link_source = _auto_link(
                    management,
                    (namespace, name),
                    candidates[(namespace, name)],
                    row=row,
                    found=found,
                    here=here,
                    snapshot=snapshot,
                )
            machine_nodes_before = {m.get("nodeName") for m in row.machines or [] if isinstance(m, dict)}
            row.endpoint = entry["endpoint"][:512]
            row.phase = entry["phase"][:32]
            row.control_plane = entry["control_plane"]
            row.machine_deployments = entry["machine_deployments"]
            row.machines = entry["machines"]
            row.observed_at, row.gone = now, False
            row.save()
            snapshot.moved(row)
            rows.append(row)
            if row.member_id is not None:
                _record_kubelets(row.member, entry["machines"], now, machine_nodes_before=machine_nodes_before)
        for row in existing.values():
            if not row.gone:
                row.gone = True
                row.save(update_fields=["gone"])
    return rows


def _record_kubelets(member: Cluster, machines: list[dict], now, *, machine_nodes_before: set = frozenset()) -> None:
    """The member's node kubelet versions as its Machines report them (Running or Deleting, with a
    node): what the skew matrix reads, refreshed at every poll of the management cluster. Nodes no
    Machine backs (added outside Cluster API, seen by the member's own probe) are kept, and the nodes
    of Machines gone since the last poll dropped: the probe and the poll agree instead of writing the
    member's nodes (and a version sample) in turn."""
    from_machines = {m["nodeName"]: m["kubelet"] for m in machines if m["nodeName"] and m["kubelet"]}
    member = Cluster.objects.select_for_update().get(pk=member.pk)
    if not from_machines:
        return
    machine_nodes = machine_nodes_before | set(from_machines)
    kubelets = {
        **{node: v for node, v in (member.kubelet_versions or {}).items() if node not in machine_nodes},
        **from_machines,
    }
    if kubelets == (member.kubelet_versions or {}):
        return
    member.kubelet_versions = kubelets
    member.node_count = len(kubelets)
    member.save(update_fields=["kubelet_versions", "node_count", "updated_at"])
    if member.server_version:
        VersionSample.objects.create(
            cluster=member,
            sampled_at=now,
            git_version=member.server_version,
            version_major=member.version_major,
            version_minor=member.version_minor,
            platform=member.platform,
            kubelet_versions=kubelets,
        )


def refresh_quietly(cluster: Cluster) -> None:
    """``refresh`` for the poll: a failure is logged, never fails the probe."""
    try:
        refresh(cluster)
    except Exception:  # noqa: BLE001 - the probe of the management cluster itself succeeded
        logger.exception("reading Cluster API objects on %s failed", cluster.name)


def managed_row(member: Cluster) -> ManagedCluster | None:
    return (
        ManagedCluster.objects.select_related("management")
        .filter(member=member, gone=False)
        .order_by("-observed_at")
        .first()
    )


def cluster_page_rows(cluster: Cluster) -> dict:
    """For the cluster page, in one query: ``managed`` (the CAPI cluster describing it, or None) and
    ``manages`` (the CAPI clusters it holds as a management cluster)."""
    rows = list(
        ManagedCluster.objects.filter(Q(member=cluster) | Q(management=cluster), gone=False)
        .select_related("management", "member")
        .order_by("-observed_at", "name")
    )
    return {
        "managed": next((r for r in rows if r.member_id == cluster.pk), None),
        "manages": sorted((r for r in rows if r.management_id == cluster.pk), key=lambda r: (r.namespace, r.name)),
    }


def lifecycle_json(member: Cluster) -> dict:
    """`fedctl lifecycle CLUSTER -o json`: the control plane, MachineDeployments and Machines."""
    row = managed_row(member)
    if row is None:
        raise LifecycleError(f"{member.name} is not managed by Cluster API on any registered management cluster.")
    cp = row.control_plane or {}
    return {
        "controlPlane": {
            "version": cp.get("version", ""),
            "replicas": cp.get("replicas", 0),
            "updatedReplicas": cp.get("updatedReplicas", 0),
            "readyReplicas": cp.get("readyReplicas", 0),
        },
        "machineDeployments": [
            {
                "name": md["name"],
                "version": md["version"],
                "replicas": md["replicas"],
                "updatedReplicas": md["updatedReplicas"],
                "readyReplicas": md["readyReplicas"],
            }
            for md in row.machine_deployments or []
        ],
        "machines": [{"name": m["name"], "phase": m["phase"], "version": m["version"]} for m in row.machines or []],
    }


def link_member(managed: ManagedCluster, member: Cluster | None, *, actor) -> ManagedCluster:
    """Link (or unlink, ``member=None``) a CAPI Cluster to a registered cluster by hand; audited. An
    admin's: the link decides which control plane an upgrade of the registered cluster patches, while
    the upgrade's approvals and preflight follow the registered cluster (its env label), so an
    operator who could link a prod control plane to a dev cluster could upgrade prod with dev's approvals."""
    require_actor_role(actor, Role.ADMIN)
    if member is not None and member.pk == managed.management_id:
        raise ValidationError({"member": "A management cluster cannot be its own workload cluster."})
    if member is not None:
        taken = ManagedCluster.objects.filter(member=member, gone=False).exclude(pk=managed.pk).first()
        if taken is not None:
            raise ValidationError({"member": f"{member.name} is already linked to {taken}."})
    before = {"member": managed.member.name if managed.member else None, "link": managed.link_source}
    managed.member = member
    managed.link_source = "manual" if member is not None else ""
    managed.save(update_fields=["member", "link_source"])
    record_event(
        "cluster.lifecycle_link",
        actor=actor,
        obj=managed,
        cluster=managed.management.name,
        summary=f"Linked Cluster API cluster {managed} to {member.name if member else 'no registered cluster'}",
        before=before,
        after={"member": member.name if member else None, "link": managed.link_source},
    )
    return managed


def version_key(text: str) -> tuple[int, int, int] | None:
    parsed = parse_version(text or "", full=True)
    return (parsed.major, parsed.minor, parsed.patch) if parsed else None
