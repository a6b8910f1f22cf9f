"""Cluster API on a simulated management cluster (`capi: true` in the fleet file).

The management cluster serves Cluster API's v1beta1 CRDs (their published schemas, kept in
capi_crds/, see capi_crds/SOURCE.md) and this module plays Cluster API's controllers on them, with
the semantics of the upstream ones (kubernetes-sigs/cluster-api, internal/controllers/* and
controlplane/kubeadm/internal/controllers), simplified to what a version roll shows:

- KubeadmControlPlane: a Machine whose spec.version differs from spec.version is outdated; the
  roll is one at a time, scale up first (a new Machine while replicas <= spec.replicas), then
  scale down the oldest outdated one, and only while no Machine is provisioning or deleting.
  The workload cluster's /version becomes spec.version once no outdated Machine is left.
- MachineDeployment: spec.template is hashed; the MachineSet with that hash is the new one
  (created when missing), older ones are scaled down per strategy.rollingUpdate (maxSurge rounds
  up, maxUnavailable down, as intstr.GetScaledValueFromIntOrPercent; both 0 means 1 unavailable)
  and deleted once empty.
- Machine: Provisioning for `machineSeconds`, then Running with a Node of its version on the
  workload cluster (nodeRef, nodeInfo); deletion: Deleting (the Node cordoned) for `machineSeconds`,
  then the Machine and its Node are gone. A workload cluster switched to `machinesStuck` keeps
  its new Machines Provisioning (a stuck roll, for the portal's deadline).

Status fields and conditions follow what Cluster API v1beta1 reports (replicas, updatedReplicas,
readyReplicas, availableReplicas, unavailableReplicas, phase; Ready/Available/... conditions).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import re
import secrets
import string
import time
import uuid
from functools import cache
from pathlib import Path

import jsonschema

from clusters import schemas

from .store import ClusterState, now_text

GROUP = "cluster.x-k8s.io"
CP_GROUP = "controlplane.cluster.x-k8s.io"
VERSION = "v1beta1"
API = f"{GROUP}/{VERSION}"
CP_API = f"{CP_GROUP}/{VERSION}"
PLURALS = ("clusters", "machinedeployments", "machinesets", "machines", "kubeadmcontrolplanes")
NAMESPACE = "default"
CLUSTER_LABEL = "cluster.x-k8s.io/cluster-name"
CP_LABEL = "cluster.x-k8s.io/control-plane"
CP_NAME_LABEL = "cluster.x-k8s.io/control-plane-name"
MD_LABEL = "cluster.x-k8s.io/deployment-name"
MS_LABEL = "cluster.x-k8s.io/set-name"
HASH_LABEL = "machine-template-hash"
MANAGER = "capi-controller"
TICK_SECONDS = 0.2
_CRD_DIR = Path(__file__).with_name("capi_crds")
log = logging.getLogger("clusters.simulator.capi")


# -- the CRDs --------------------------------------------------------------------------------
@cache
def crd_data(plural: str) -> dict:
    return json.loads((_CRD_DIR / f"{plural}.json").read_text())


def crd_object(plural: str) -> dict:
    """The CustomResourceDefinition serving ``plural`` at v1beta1 only (the simulator's choice:
    v1beta1 as served and stored version; upstream now stores v1beta2)."""
    data = crd_data(plural)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{data['group']}", "labels": {"cluster.x-k8s.io/provider": "cluster-api"}},
        "spec": {
            "group": data["group"],
            "names": data["names"],
            "scope": data["scope"],
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": data["openAPIV3Schema"]},
                    "subresources": data["subresources"],
                    "additionalPrinterColumns": data["additionalPrinterColumns"],
                }
            ],
        },
    }


def schema_for(group: str, version: str, plural: str) -> dict | None:
    if version != VERSION or plural not in PLURALS or crd_data(plural)["group"] != group:
        return None
    return crd_data(plural)["openAPIV3Schema"]


@cache
def _validator(plural: str) -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator(_to_json_schema(crd_data(plural)["openAPIV3Schema"]))


def _to_json_schema(node):
    """OpenAPI v3 structural schema -> JSON Schema (draft 4): x-kubernetes-int-or-string is an
    anyOf already; drop the x- extensions and formats jsonschema does not check the same way."""
    if isinstance(node, dict):
        out = {k: _to_json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes") and k != "format"}
        if node.get("nullable"):
            out.pop("nullable", None)
            if "type" in out:
                out["type"] = [out["type"], "null"]
        return out
    if isinstance(node, list):
        return [_to_json_schema(v) for v in node]
    return node


def prune(schema: dict, value, path: str = "") -> tuple[object, list[str]]:
    """Drop fields the structural schema does not know (what a CRD's pruning does); returns the
    pruned value and the dotted paths of the dropped fields."""
    dropped: list[str] = []
    if (
        isinstance(value, dict)
        and schema.get("type") == "object"
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        out = {}
        for key, item in value.items():
            sub = f"{path}.{key}" if path else key
            if props is not None and key in props:
                out[key], more = prune(props[key], item, sub)
                dropped += more
            elif isinstance(extra, dict):
                out[key], more = prune(extra, item, sub)
                dropped += more
            elif props is None and extra is None:
                out[key] = item
            else:
                dropped.append(sub)
        return out, dropped
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        out_list = []
        for i, item in enumerate(value):
            pruned, more = prune(schema["items"], item, f"{path}[{i}]")
            out_list.append(pruned)
            dropped += more
        return out_list, dropped
    return value, dropped


def check(plural: str, obj: dict) -> tuple[dict, list[str], list[dict]]:
    """Validate a Cluster API object against its CRD schema: (pruned object, unknown fields,
    422 causes). metadata is left to the apiserver's own checks."""
    schema = crd_data(plural)["openAPIV3Schema"]
    body = {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}
    pruned, unknown = prune(schema, body)
    causes = []
    for err in sorted(_validator(plural).iter_errors(pruned), key=lambda e: list(e.absolute_path)):
        field = ".".join(str(p) for p in err.absolute_path)
        if err.validator == "required":
            missing = err.message.split("'")[1] if "'" in err.message else ""
            field = f"{field}.{missing}" if field else missing
            causes.append({"reason": "FieldValueRequired", "field": field, "message": "Required value"})
        elif err.validator == "enum":
            allowed = ", ".join(f'"{v}"' for v in err.validator_value)
            causes.append(
                {
                    "reason": "FieldValueNotSupported",
                    "field": field,
                    "message": f"Unsupported value: {json.dumps(err.instance)}: supported values: {allowed}",
                }
            )
        else:
            causes.append({"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {err.message}"})
    return {**{k: v for k, v in obj.items() if k in ("metadata", "apiVersion", "kind")}, **pruned}, unknown, causes


# -- Cluster API's validating webhooks, as far as versions go ----------------------------------
# util/version/version.go's KubeSemver and the KubeadmControlPlane webhook's "one minor at a time"
# (controlplane/kubeadm/internal/webhooks), Cluster API, Apache-2.0: facts, carried over as data
KUBE_SEMVER = re.compile(r"^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)([-0-9a-zA-Z_\.+]*)?$")
VERSION_FIELDS = {
    "kubeadmcontrolplanes": ("spec", "version"),
    "machinedeployments": ("spec", "template", "spec", "version"),
    "machinesets": ("spec", "template", "spec", "version"),
    "machines": ("spec", "version"),
}


def _version_at(obj: dict | None, path: tuple[str, ...]):
    value = obj
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def webhook_causes(plural: str, obj: dict, old: dict | None) -> list[dict]:
    """422 causes Cluster API's webhooks give a create or update of ``obj`` (``old``: the stored one):
    a version that is not a KubeSemver, and a control plane moved more than one minor up at once (a
    downgrade passes, as it does in Cluster API)."""
    path = VERSION_FIELDS.get(plural)
    version = _version_at(obj, path) if path else None
    if version is None:
        return []
    field = ".".join(path)
    if not isinstance(version, str) or not KUBE_SEMVER.match(version):
        return [
            {
                "reason": "FieldValueInvalid",
                "field": field,
                "message": f"Invalid value: {json.dumps(version)}: must be a valid semantic version",
            }
        ]
    before = _version_at(old, path) if old else None
    if plural == "kubeadmcontrolplanes" and isinstance(before, str) and (match := KUBE_SEMVER.match(before)):
        old_minor, new_minor = int(match.group(2)), int(KUBE_SEMVER.match(version).group(2))
        if new_minor >= old_minor + 2:
            return [
                {
                    "reason": "FieldValueForbidden",
                    "field": field,
                    "message": f"Forbidden: cannot update Kubernetes version from {before} to {version}",
                }
            ]
    return []


# -- helpers ---------------------------------------------------------------------------------
def _suffix() -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))


def _condition(ctype: str, ok: bool, reason: str = "", message: str = "", severity: str = "Info") -> dict:
    cond = {"type": ctype, "status": "True" if ok else "False", "lastTransitionTime": now_text()}
    if not ok:
        cond.update(reason=reason, severity=severity)
        if message:
            cond["message"] = message
    return cond


def _conditions(old: list | None, new: list[dict]) -> list[dict]:
    """Keep lastTransitionTime for conditions whose status did not change (as conditions.Set does)."""
    before = {c.get("type"): c for c in old or []}
    out = []
    for cond in new:
        prev = before.get(cond["type"])
        if prev is not None and prev.get("status") == cond["status"]:
            cond["lastTransitionTime"] = prev.get("lastTransitionTime", cond["lastTransitionTime"])
        out.append(cond)
    return sorted(out, key=lambda c: (c["type"] != "Ready", c["type"]))


def _owner(obj: dict) -> dict:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def template_hash(md: dict) -> str:
    template = json.dumps((md.get("spec") or {}).get("template") or {}, sort_keys=True)
    return str(int(hashlib.sha256(template.encode()).hexdigest()[:8], 16) % 10**10)


def scaled(value, total: int, *, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent: an int, or a percentage of ``total``."""
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isascii() and value[:-1].isdecimal():
        exact = int(value[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    if isinstance(value, str) and value.isascii() and value.isdecimal():
        return int(value)
    return 1 if round_up else 0


def rolling_limits(md: dict) -> tuple[int, int]:
    spec = md.get("spec") or {}
    replicas = spec.get("replicas", 1)
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    surge = scaled(rolling.get("maxSurge", 1), replicas, round_up=True)
    unavailable = scaled(rolling.get("maxUnavailable", 0), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1  # MaxUnavailable and MaxSurge cannot both be zero: the deployment util's fallback
    return surge, unavailable


class Controller:
    """Cluster API's controllers for every management cluster of a fleet (see the module doc)."""

    def __init__(self, clusters: dict[str, ClusterState]):
        self.clusters = clusters
        self.managers = [c for c in clusters.values() if c.spec.capi]
        self.since: dict[tuple[str, str], float] = {}  # (management cluster, machine) -> phase start
        self.stuck: set[str] = set()  # workload clusters whose new machines never come up
        self.quiet: dict[str, int] = {}  # management cluster -> resourceVersion at which nothing was moving

    def set_stuck(self, workload: str, stuck: bool) -> None:
        (self.stuck.add if stuck else self.stuck.discard)(workload)
        self.quiet.clear()

    # -- storage ------------------------------------------------------------------------
    def _res(self, mgmt: ClusterState, plural: str) -> schemas.ApiResource:
        data = crd_data(plural)
        return mgmt.find_resource(f"{data['group']}/{VERSION}", plural)

    def _list(self, mgmt: ClusterState, plural: str) -> list[dict]:
        return list(mgmt.items(self._res(mgmt, plural), None))

    def _create(self, mgmt: ClusterState, plural: str, obj: dict) -> dict:
        meta = obj["metadata"]
        meta.setdefault("namespace", NAMESPACE)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=now_text(), generation=1)
        meta["resourceVersion"] = mgmt.next_rv()
        mgmt.save(self._res(mgmt, plural), obj)
        return obj

    def _store(self, mgmt: ClusterState, plural: str, obj: dict, before: str) -> None:
        if json.dumps(obj, sort_keys=True) == before:
            return
        obj["metadata"]["resourceVersion"] = mgmt.next_rv()
        mgmt.save(self._res(mgmt, plural), obj)

    def _drop(self, mgmt: ClusterState, plural: str, obj: dict) -> None:
        mgmt.drop(self._res(mgmt, plural), obj["metadata"].get("namespace", ""), obj["metadata"]["name"])

    # -- bootstrap -------------------------------------------------------------------------
    def install(self) -> None:
        """Serve the CRDs on each management cluster and create the objects of its managed
        clusters, every Machine Running with its Node on the workload cluster."""
        from . import objects  # objects imports store; the CRD goes through the apiserver path

        for mgmt in self.managers:
            crd_res = schemas.find_resource(mgmt.minor, "apiextensions.k8s.io/v1", "CustomResourceDefinition")
            for plural in PLURALS:
                ctx = objects.Ctx(mgmt, crd_res, "", None, field_manager="clusterctl")
                objects.create(ctx, crd_object(plural))
        for workload in self.clusters.values():
            if workload.spec.managed_by:
                self._bootstrap(self.clusters[workload.spec.managed_by], workload)
        for cluster in self.clusters.values():  # the watch cache starts after the bootstrap
            if cluster.history is not None:
                cluster.history.clear()
                cluster.history_start = cluster.rv

    def _bootstrap(self, mgmt: ClusterState, workload: ClusterState) -> None:
        spec, name, version = workload.spec, workload.name, workload.git_version
        kcp_name = f"{name}-control-plane"
        cluster = self._create(
            mgmt,
            "clusters",
            {
                "apiVersion": API,
                "kind": "Cluster",
                "metadata": {"name": name, "labels": dict(spec.labels)},
                "spec": {
                    "clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}, "serviceDomain": "cluster.local"},
                    "controlPlaneEndpoint": {"host": f"{name}.fleet.local", "port": 6443},
                    "controlPlaneRef": {
                        "apiVersion": CP_API,
                        "kind": "KubeadmControlPlane",
                        "name": kcp_name,
                        "namespace": NAMESPACE,
                    },
                    "infrastructureRef": {
                        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                        "kind": "DockerCluster",
                        "name": name,
                        "namespace": NAMESPACE,
                    },
                },
                "status": {
                    "phase": "Provisioned",
                    "infrastructureReady": True,
                    "controlPlaneReady": True,
                    "observedGeneration": 1,
                    "conditions": _conditions(
                        None,
                        [
                            _condition("Ready", True),
                            _condition("ControlPlaneReady", True),
                            _condition("InfrastructureReady", True),
                        ],
                    ),
                },
            },
        )
        kcp = self._create(
            mgmt,
            "kubeadmcontrolplanes",
            {
                "apiVersion": CP_API,
                "kind": "KubeadmControlPlane",
                "metadata": {"name": kcp_name, "labels": {CLUSTER_LABEL: name}, "ownerReferences": [_owner(cluster)]},
                "spec": {
                    "replicas": spec.control_plane_replicas,
                    "version": version,
                    "machineTemplate": {
                        "infrastructureRef": {
                            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                            "kind": "DockerMachineTemplate",
                            "name": kcp_name,
                            "namespace": NAMESPACE,
                        }
                    },
                    "kubeadmConfigSpec": {"clusterConfiguration": {}, "initConfiguration": {}, "joinConfiguration": {}},
                    "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
                },
            },
        )
        for _ in range(spec.control_plane_replicas):
            self._new_machine(mgmt, kcp, version, running=True)
        for md_name, replicas in spec.machine_deployments:
            full = f"{name}-{md_name}"
            md = self._create(
                mgmt,
                "machinedeployments",
                {
                    "apiVersion": API,
                    "kind": "MachineDeployment",
                    "metadata": {"name": full, "labels": {CLUSTER_LABEL: name}, "ownerReferences": [_owner(cluster)]},
                    "spec": {
                        "clusterName": name,
                        "replicas": replicas,
                        "selector": {"matchLabels": {CLUSTER_LABEL: name, MD_LABEL: full}},
                        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                        "template": {
                            "metadata": {"labels": {CLUSTER_LABEL: name, MD_LABEL: full}},
                            "spec": {
                                "clusterName": name,
                                "version": version,
                                "bootstrap": {
                                    "configRef": {
                                        "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1",
                                        "kind": "KubeadmConfigTemplate",
                                        "name": full,
                                        "namespace": NAMESPACE,
                                    }
                                },
                                "infrastructureRef": {
                                    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                    "kind": "DockerMachineTemplate",
                                    "name": full,
                                    "namespace": NAMESPACE,
                                },
                            },
                        },
                    },
                },
            )
            ms = self._new_machine_set(mgmt, md, replicas)
            for _ in range(replicas):
                self._new_machine(mgmt, ms, version, running=True)
        self.reconcile(mgmt)

    # -- objects -----------------------------------------------------------------------------
    def _new_machine_set(self, mgmt: ClusterState, md: dict, replicas: int) -> dict:
        h = template_hash(md)
        name = md["metadata"]["name"]
        template = json.loads(json.dumps(md["spec"]["template"]))
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = h
        selector = {"matchLabels": {**md["spec"]["selector"].get("matchLabels", {}), HASH_LABEL: h}}
        return self._create(
            mgmt,
            "machinesets",
            {
                "apiVersion": API,
                "kind": "MachineSet",
                "metadata": {
                    "name": f"{name}-{_suffix()}",
                    "namespace": md["metadata"].get("namespace", NAMESPACE),
                    "labels": {CLUSTER_LABEL: md["spec"]["clusterName"], MD_LABEL: name, HASH_LABEL: h},
                    "annotations": {"machinedeployment.clusters.x-k8s.io/revision": str(int(time.time() * 1000))},
                    "ownerReferences": [_owner(md)],
                },
                "spec": {
                    "clusterName": md["spec"]["clusterName"],
                    "replicas": replicas,
                    "selector": selector,
                    "template": template,
                    "deletePolicy": "Random",
                },
            },
        )

    def _new_machine(self, mgmt: ClusterState, owner: dict, version: str, *, running: bool = False) -> dict:
        name = owner["metadata"]["name"]
        namespace = owner["metadata"].get("namespace", NAMESPACE)
        if owner["kind"] == "KubeadmControlPlane":
            cluster_name = owner["metadata"]["labels"][CLUSTER_LABEL]
            labels = {CLUSTER_LABEL: cluster_name, CP_LABEL: "", CP_NAME_LABEL: name}
            infra_kind, bootstrap = "DockerMachine", {"configRef": {"kind": "KubeadmConfig"}}
        else:
            cluster_name = owner["spec"]["clusterName"]
            labels = dict(owner["spec"]["template"]["metadata"]["labels"])
            labels[MS_LABEL] = name
            infra_kind, bootstrap = "DockerMachine", {"configRef": {"kind": "KubeadmConfig"}}
        machine_name = f"{name}-{_suffix()}"
        bootstrap["configRef"].update(
            apiVersion="bootstrap.cluster.x-k8s.io/v1beta1", name=machine_name, namespace=namespace
        )
        machine = {
            "apiVersion": API,
            "kind": "Machine",
            "metadata": {
                "name": machine_name,
                "namespace": namespace,
                "labels": labels,
                "ownerReferences": [_owner(owner)],
                "finalizers": ["machine.cluster.x-k8s.io"],
            },
            "spec": {
                "clusterName": cluster_name,
                "version": version,
                "bootstrap": {**bootstrap, "dataSecretName": machine_name},
                "infrastructureRef": {
                    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                    "kind": infra_kind,
                    "name": machine_name,
                    "namespace": namespace,
                },
            },
            "status": {
                "phase": "Provisioning",
                "bootstrapReady": True,
                "infrastructureReady": False,
                "lastUpdated": now_text(),
                "observedGeneration": 1,
                "conditions": _conditions(
                    None,
                    [
                        _condition("Ready", False, "WaitingForInfrastructure", severity="Info"),
                        _condition("BootstrapReady", True),
                        _condition("InfrastructureReady", False, "WaitingForInfrastructure", severity="Info"),
                        _condition("NodeHealthy", False, "WaitingForNodeRef", severity="Info"),
                    ],
                ),
            },
        }
        self._create(mgmt, "machines", machine)
        self.since[(mgmt.name, machine_name)] = time.monotonic()
        if running:
            self._run(mgmt, machine, json.dumps(machine, sort_keys=True))
        return machine

    def _run(self, mgmt: ClusterState, machine: dict, before: str) -> None:
        """Provisioning -> Running: the infrastructure is up and the Node joined the workload cluster."""
        name = machine["metadata"]["name"]
        workload = self.clusters.get(machine["spec"]["clusterName"])
        version = machine["spec"].get("version", "")
        node_info = {}
        if workload is not None:
            zones = [f"{workload.spec.labels.get('region', 'region-1')}{z}" for z in "abc"]
            zone = zones[int(hashlib.sha256(name.encode()).hexdigest(), 16) % 3]
            workload.add_node(name, version, zone, control_plane=CP_LABEL in machine["metadata"]["labels"])
            node = workload.load(schemas.find_resource(workload.minor, "v1", "Node"), "", name)
            node_info = node["status"]["nodeInfo"]
        status = machine["status"]
        status.update(
            phase="Running",
            infrastructureReady=True,
            lastUpdated=now_text(),
            nodeRef={"apiVersion": "v1", "kind": "Node", "name": name},
            addresses=[{"type": "InternalIP", "address": f"10.0.{len(name) % 250}.{sum(map(ord, name)) % 250}"}],
        )
        if node_info:
            status["nodeInfo"] = node_info
        machine["spec"]["providerID"] = f"docker:////{name}"
        status["conditions"] = _conditions(
            status.get("conditions"),
            [
                _condition("Ready", True),
                _condition("BootstrapReady", True),
                _condition("InfrastructureReady", True),
                _condition("NodeHealthy", True),
            ],
        )
        self.since[(mgmt.name, name)] = time.monotonic()
        self._store(mgmt, "machines", machine, before)

    def _delete_machine(self, mgmt: ClusterState, machine: dict) -> None:
        """Start a Machine's deletion: deletionTimestamp, phase Deleting, its Node cordoned."""
        before = json.dumps(machine, sort_keys=True)
        machine["metadata"]["deletionTimestamp"] = now_text()
        machine["status"].update(phase="Deleting", lastUpdated=now_text())
        machine["status"]["conditions"] = _conditions(
            machine["status"].get("conditions"),
            [
                *[
                    c
                    for c in machine["status"].get("conditions") or []
                    if c["type"] not in ("Ready", "DrainingSucceeded")
                ],
                _condition("Ready", False, "Deleting", severity="Info"),
                _condition("DrainingSucceeded", False, "Draining", "Draining the node before deletion", "Info"),
            ],
        )
        workload = self.clusters.get(machine["spec"]["clusterName"])
        if workload is not None and machine["status"].get("nodeRef"):
            workload.cordon_node(machine["status"]["nodeRef"]["name"])
        self.since[(mgmt.name, machine["metadata"]["name"])] = time.monotonic()
        self._store(mgmt, "machines", machine, before)

    # -- reconcile ---------------------------------------------------------------------------
    def tick(self) -> None:
        for mgmt in self.managers:
            try:
                self.reconcile(mgmt)
            except Exception:  # one bad object must not stop the controller
                log.exception("Cluster API reconcile failed on %s", mgmt.name)

    def reconcile(self, mgmt: ClusterState) -> None:
        if self.quiet.get(mgmt.name) == mgmt.rv:
            return  # nothing written and no machine moving since the last pass: nothing to do
        machines = self._advance(mgmt)
        for kcp in self._list(mgmt, "kubeadmcontrolplanes"):
            self._reconcile_kcp(mgmt, kcp, machines)
        machines = {m["metadata"]["name"]: m for m in self._list(mgmt, "machines")}
        for md in self._list(mgmt, "machinedeployments"):
            self._reconcile_md(mgmt, md, machines)
        moving = any(
            (m.get("status") or {}).get("phase") in ("Provisioning", "Deleting") for m in self._list(mgmt, "machines")
        )
        self.quiet[mgmt.name] = -1 if moving else mgmt.rv

    def _advance(self, mgmt: ClusterState) -> dict[str, dict]:
        """Move machines along: Provisioning -> Running, Deleting -> gone (machineSeconds each)."""
        now = time.monotonic()
        out = {}
        for machine in self._list(mgmt, "machines"):
            name = machine["metadata"]["name"]
            workload = self.clusters.get(machine["spec"].get("clusterName", ""))
            seconds = workload.spec.machine_seconds if workload is not None else mgmt.spec.machine_seconds
            started = self.since.setdefault((mgmt.name, name), now)
            phase = (machine.get("status") or {}).get("phase")
            if phase is None:  # created through the API: the bootstrap starts
                before = json.dumps(machine, sort_keys=True)
                machine["status"] = {"phase": "Provisioning", "bootstrapReady": True, "lastUpdated": now_text()}
                self._store(mgmt, "machines", machine, before)
            elif (
                phase == "Provisioning"
                and now - started >= seconds
                and machine["spec"]["clusterName"] not in self.stuck
            ):
                self._run(mgmt, machine, json.dumps(machine, sort_keys=True))
            elif phase == "Deleting" and now - started >= seconds:
                if workload is not None and (machine["status"].get("nodeRef") or {}).get("name"):
                    workload.remove_node(machine["status"]["nodeRef"]["name"])
                self._drop(mgmt, "machines", machine)
                self.since.pop((mgmt.name, name), None)
                continue
            out[name] = machine
        return out

    @staticmethod
    def _owned_by(machines: dict[str, dict], owner: dict) -> list[dict]:
        uid = owner["metadata"]["uid"]
        found = [
            m for m in machines.values() if any(r.get("uid") == uid for r in m["metadata"].get("ownerReferences") or [])
        ]
        return sorted(found, key=lambda m: (m["metadata"]["creationTimestamp"], m["metadata"]["name"]))

    def _reconcile_kcp(self, mgmt: ClusterState, kcp: dict, machines: dict[str, dict]) -> None:
        before = json.dumps(kcp, sort_keys=True)
        spec = kcp["spec"]
        replicas, version = spec.get("replicas", 1), spec.get("version", "")
        owned = self._owned_by(machines, kcp)
        busy = [m for m in owned if m["status"].get("phase") in ("Provisioning", "Pending", "Deleting")]
        outdated = [m for m in owned if m["spec"].get("version") != version]
        live = [m for m in owned if m["status"].get("phase") != "Deleting"]
        if not busy:
            if outdated and len(live) <= replicas:
                self._new_machine(mgmt, kcp, version)  # surge one
            elif outdated:
                self._delete_machine(mgmt, outdated[0])  # then delete the oldest outdated one
            elif len(live) < replicas:
                self._new_machine(mgmt, kcp, version)
            elif len(live) > replicas:
                self._delete_machine(mgmt, live[0])
            owned = self._owned_by({m["metadata"]["name"]: m for m in self._list(mgmt, "machines")}, kcp)
            outdated = [m for m in owned if m["spec"].get("version") != version]
        workload = self.clusters.get(kcp["metadata"].get("labels", {}).get(CLUSTER_LABEL, ""))
        if not outdated and workload is not None and workload.git_version != version and owned:
            workload.set_version(version)  # the last old API server is gone
        running = [m for m in owned if m["status"].get("phase") == "Running"]
        updated = [m for m in owned if m["spec"].get("version") == version]
        versions = sorted((m["spec"].get("version", "") for m in owned), key=_version_key)
        cluster_name = kcp["metadata"].get("labels", {}).get(CLUSTER_LABEL, "")
        rolling = len(outdated)
        conditions = [
            _condition(
                "Ready",
                len(running) >= replicas and not rolling,
                "RollingUpdateInProgress" if rolling else "ScalingUp",
                severity="Warning",
            ),
            _condition("Available", bool(running), "WaitingForKubeadmInit", severity="Info"),
            _condition("CertificatesAvailable", True),
            _condition("MachinesCreated", True),
            _condition(
                "MachinesReady", len(running) == len(owned), "Provisioning" if busy else "NodeNotReady", severity="Info"
            ),
            _condition(
                "MachinesSpecUpToDate",
                not rolling,
                "RollingUpdateInProgress",
                f"Rolling {len(owned)} replicas with outdated spec ({len(updated)} replicas up to date)",
                "Warning",
            ),
            _condition(
                "Resized",
                len(live) == replicas,
                "ScalingUp" if len(live) < replicas else "ScalingDown",
                f"Scaling {'up' if len(live) < replicas else 'down'} control plane to {replicas} replicas (actual {len(live)})",
                "Warning",
            ),
        ]
        kcp["status"] = {
            "selector": f"{CLUSTER_LABEL}={cluster_name},{CP_LABEL}",
            "replicas": len(owned),
            "updatedReplicas": len(updated),
            "readyReplicas": len(running),
            "unavailableReplicas": len(owned) - len(running),
            "initialized": True,
            "ready": bool(running),
            "version": versions[0] if versions else version,
            "observedGeneration": kcp["metadata"].get("generation", 1),
            "conditions": _conditions((kcp.get("status") or {}).get("conditions"), conditions),
        }
        self._store(mgmt, "kubeadmcontrolplanes", kcp, before)

    def _reconcile_md(self, mgmt: ClusterState, md: dict, machines: dict[str, dict]) -> None:
        before = json.dumps(md, sort_keys=True)
        spec = md["spec"]
        replicas = spec.get("replicas", 1)
        h = template_hash(md)
        sets = [
            ms
            for ms in self._list(mgmt, "machinesets")
            if any(r.get("uid") == md["metadata"]["uid"] for r in ms["metadata"].get("ownerReferences") or [])
        ]
        new = next((ms for ms in sets if ms["metadata"].get("labels", {}).get(HASH_LABEL) == h), None)
        if new is None:
            new = self._new_machine_set(mgmt, md, 0)
            sets.append(new)
        old_sets = [ms for ms in sets if ms is not new]
        by_set = {ms["metadata"]["uid"]: self._owned_by(machines, ms) for ms in sets}
        surge, max_unavailable = rolling_limits(md)
        version = spec["template"]["spec"].get("version", "")
        new_machines = [m for m in by_set[new["metadata"]["uid"]] if m["status"].get("phase") != "Deleting"]
        total = sum(len(ms) for ms in by_set.values())
        target = min(replicas, len(new_machines) + max(0, replicas + surge - total))
        if not (spec.get("paused")):
            for _ in range(target - len(new_machines)):
                new_machines.append(self._new_machine(mgmt, new, version))
            for extra in new_machines[target:]:
                self._delete_machine(mgmt, extra)
            available = sum(
                1
                for ms in by_set.values()
                for m in ms
                if m["status"].get("phase") == "Running" and "deletionTimestamp" not in m["metadata"]
            )
            budget = available - (replicas - max_unavailable)
            old_live = [
                m for ms in old_sets for m in by_set[ms["metadata"]["uid"]] if m["status"].get("phase") != "Deleting"
            ]
            old_live.sort(key=lambda m: m["status"].get("phase") == "Running")  # not-yet-running ones go first
            for machine in old_live:
                if machine["status"].get("phase") == "Running":
                    if budget <= 0:
                        break
                    budget -= 1
                self._delete_machine(mgmt, machine)
        machines = {m["metadata"]["name"]: m for m in self._list(mgmt, "machines")}
        counts = {"replicas": 0, "ready": 0, "updated": 0}
        for ms in sets:
            ms_before = json.dumps(ms, sort_keys=True)
            owned = self._owned_by(machines, ms)
            if ms is not new and not owned:
                self._drop(mgmt, "machinesets", ms)  # an old MachineSet scaled to zero is deleted
                continue
            running = [
                m for m in owned if m["status"].get("phase") == "Running" and "deletionTimestamp" not in m["metadata"]
            ]
            ms["spec"]["replicas"] = (
                target if ms is new else len([m for m in owned if "deletionTimestamp" not in m["metadata"]])
            )
            ms["status"] = {
                "selector": ",".join(f"{k}={v}" for k, v in sorted(ms["spec"]["selector"]["matchLabels"].items())),
                "replicas": len(owned),
                "fullyLabeledReplicas": len(owned),
                "readyReplicas": len(running),
                "availableReplicas": len(running),
                "observedGeneration": ms["metadata"].get("generation", 1),
                "conditions": _conditions(
                    (ms.get("status") or {}).get("conditions"),
                    [
                        _condition("Ready", len(running) == ms["spec"]["replicas"], "ScalingUp", severity="Info"),
                        _condition("MachinesCreated", True),
                        _condition("MachinesReady", len(running) == len(owned), "Provisioning", severity="Info"),
                        _condition(
                            "Resized",
                            len(owned) == ms["spec"]["replicas"],
                            "ScalingUp" if len(owned) < ms["spec"]["replicas"] else "ScalingDown",
                            severity="Warning",
                        ),
                    ],
                ),
            }
            ms["status"] = {k: v for k, v in ms["status"].items() if v != 0}
            self._store(mgmt, "machinesets", ms, ms_before)
            counts["replicas"] += len(owned)
            counts["ready"] += len(running)
            if ms is new:
                counts["updated"] = len(owned)
        unavailable = max(counts["replicas"] - counts["ready"], 0)
        if replicas == counts["ready"]:
            phase = "Running"
        elif replicas > counts["ready"]:
            phase = "ScalingUp"
        else:
            phase = "ScalingDown"
        if counts["replicas"] > replicas:
            phase = "ScalingDown"
        md["status"] = {
            "selector": ",".join(f"{k}={v}" for k, v in sorted(spec["selector"].get("matchLabels", {}).items())),
            "replicas": counts["replicas"],
            "updatedReplicas": counts["updated"],
            "readyReplicas": counts["ready"],
            "availableReplicas": counts["ready"],
            "unavailableReplicas": unavailable,
            "phase": phase,
            "observedGeneration": md["metadata"].get("generation", 1),
            "conditions": _conditions(
                (md.get("status") or {}).get("conditions"),
                [
                    _condition(
                        "Ready",
                        counts["ready"] >= replicas - max_unavailable,
                        "WaitingForAvailableMachines",
                        f"Minimum availability requires {replicas - max_unavailable} replicas, current {counts['ready']} available",
                        "Warning",
                    ),
                    _condition(
                        "Available",
                        counts["ready"] >= replicas - max_unavailable,
                        "WaitingForAvailableMachines",
                        f"Minimum availability requires {replicas - max_unavailable} replicas, current {counts['ready']} available",
                        "Warning",
                    ),
                    _condition("MachineSetReady", counts["ready"] == replicas, "ScalingUp", severity="Info"),
                ],
            ),
        }
        md["status"] = {k: v for k, v in md["status"].items() if v != 0}
        self._store(mgmt, "machinedeployments", md, before)


def _version_key(text: str) -> tuple:
    try:
        from .fleet import parse_version

        return parse_version(text)
    except ValueError:
        return (0, 0, 0)


def printer_columns(kind: str):
    """kubectl's columns for a Cluster API kind: the CRD's additionalPrinterColumns (simple
    JSONPaths), or None for other kinds."""
    plural = {crd_data(p)["names"]["kind"]: p for p in PLURALS}.get(kind)
    if plural is None:
        return None
    columns = [c for c in crd_data(plural)["additionalPrinterColumns"] if c["name"] != "Age"]

    def value(obj: dict, path: str):
        node = obj
        for part in path.strip(".").split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, bool):
            return str(node).lower()
        return "" if node is None else node

    def cells(obj: dict) -> list:
        return [value(obj, c["jsonPath"]) for c in columns]

    return [
        {"name": c["name"], "type": c["type"], "format": "", "description": "", "priority": c.get("priority", 0)}
        for c in columns
    ], cells


async def run(controller: Controller) -> None:
    """The controllers' loop (the app starts it when the fleet has a management cluster)."""
    while True:
        controller.tick()
        await asyncio.sleep(TICK_SECONDS)
