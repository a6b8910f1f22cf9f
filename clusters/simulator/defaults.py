"""What kube-apiserver's registry strategies and defaulting add to an object it stores, beyond
the pod-template defaults in objects.py: Service allocations (cluster IPs, node ports), the
status an object is created with, Job defaults and selectors, which kinds carry
metadata.generation, and the objects every namespace gets.

References (kubernetes/kubernetes, Apache-2.0): pkg/registry/core/service/storage/storage.go
(patchAllocatedValues), pkg/registry/core/service/ipallocator and portallocator,
pkg/apis/core/v1/defaults.go (SetDefaults_Service), pkg/registry/core/pod/strategy.go
(PrepareForCreate), pkg/apis/batch/v1/defaults.go (SetDefaults_Job),
pkg/registry/batch/job/strategy.go (generateSelector), pkg/registry/*/strategy.go (Generation = 1),
pkg/controller/serviceaccount and pkg/controller/certificates/rootcacertpublisher.
"""

from __future__ import annotations

import ipaddress
import random

from .errors import invalid

SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")  # kubeadm's --service-cluster-ip-range default
NODE_PORT_RANGE = (30000, 32767)  # --service-node-port-range default
NODE_PORT_TYPES = ("NodePort", "LoadBalancer")

# Kinds whose registry strategy sets metadata.generation (PrepareForCreate: Generation = 1); the
# rest (Service, ConfigMap, Namespace, Pod before 1.33 ...) have none. Custom resources have one.
GENERATION_KINDS = frozenset(
    {
        "Deployment",
        "ReplicaSet",
        "StatefulSet",
        "DaemonSet",
        "ReplicationController",
        "Job",
        "CronJob",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "Ingress",
        "EndpointSlice",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
        "FlowSchema",
        "PriorityLevelConfiguration",
        "CustomResourceDefinition",
        "DeviceClass",
    }
)
POD_GENERATION_MINOR = 33  # pods carry a generation from 1.33 (KEP-5067)

ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
SIMULATED_CA = (
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBfleetSimulatorRootCAIsNotARealCertificateItOnlyFillsTheConfigMap\n"
    "-----END CERTIFICATE-----\n"
)


def sets_generation(kind: str, minor: int, custom: bool) -> bool:
    return custom or kind in GENERATION_KINDS or (kind == "Pod" and minor >= POD_GENERATION_MINOR)


# --- status on create ------------------------------------------------------------------------------


def _qos_class(spec: dict) -> str:
    """BestEffort without requests or limits, Guaranteed when every container's limits equal its
    requests for cpu and memory, Burstable otherwise (pkg/apis/core/helper/qos)."""
    containers = [c for c in (spec.get("containers") or []) + (spec.get("initContainers") or []) if isinstance(c, dict)]
    resources = [c.get("resources") or {} for c in containers]
    if not any((r.get("requests") or {}) or (r.get("limits") or {}) for r in resources):
        return "BestEffort"
    for r in resources:
        limits, requests = r.get("limits") or {}, r.get("requests") or {}
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                return "Burstable"
    return "Guaranteed"


def initial_status(kind: str, obj: dict) -> dict | None:
    """The status a create stores (the strategy resets what the client sent), None: none."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if kind == "Pod":
        return {"phase": "Pending", "qosClass": _qos_class(spec)}
    if kind == "Service":
        return {"loadBalancer": {}}
    return None


# --- pod templates -----------------------------------------------------------------------------------


def _default(obj: dict, key: str, value, *, string_field: bool = False) -> None:
    """A default fills a field that is absent or null (Go decodes null to the zero value), and a plain
    Go string field's "" too (SetDefaults compares it with ""; a pointer's "" is a value)."""
    current = obj.get(key)
    if current is None or (string_field and current == ""):
        obj[key] = value


def _image_pull_policy(image: str) -> str:
    tail = image.rsplit("/", 1)[-1]
    return "Always" if ":" not in tail or tail.endswith(":latest") else "IfNotPresent"


def default_pod_spec(spec: dict) -> None:
    """SetDefaults_PodSpec and SetDefaults_Container: what a pod (template) spec is stored with."""
    _default(spec, "restartPolicy", "Always", string_field=True)
    _default(spec, "dnsPolicy", "ClusterFirst", string_field=True)
    _default(spec, "schedulerName", "default-scheduler", string_field=True)
    _default(spec, "terminationGracePeriodSeconds", 30)
    _default(spec, "securityContext", {})
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            if not isinstance(c, dict):
                continue
            if isinstance(c.get("image"), str):
                _default(c, "imagePullPolicy", _image_pull_policy(c["image"]), string_field=True)
            _default(c, "terminationMessagePath", "/dev/termination-log", string_field=True)
            _default(c, "terminationMessagePolicy", "File", string_field=True)
            _default(c, "resources", {})
            for port in c.get("ports") or []:
                if isinstance(port, dict):
                    _default(port, "protocol", "TCP", string_field=True)


# --- Jobs --------------------------------------------------------------------------------------------


def default_job(spec: dict) -> None:
    """SetDefaults_Job: completions/parallelism 1 when neither is set, backoffLimit 6 (or MaxInt32
    with backoffLimitPerIndex), completionMode NonIndexed, suspend false."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    _default(spec, "parallelism", 1)
    _default(spec, "backoffLimit", 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6)
    _default(spec, "completionMode", "NonIndexed")
    _default(spec, "suspend", False)


def job_selector(obj: dict, minor: int) -> None:
    """A Job without manualSelector gets a selector on its own uid, and its pod template the labels
    that match it (batch.kubernetes.io/ prefixed from 1.27, the old ones kept)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector"):
        return
    uid, name = obj["metadata"]["uid"], obj["metadata"]["name"]
    labels = {"controller-uid": uid, "job-name": name}
    key = "controller-uid"
    if minor >= 27:
        labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name, **labels}
        key = "batch.kubernetes.io/controller-uid"
    spec["selector"] = {"matchLabels": {key: uid}}
    template = spec.setdefault("template", {})
    if isinstance(template, dict):
        meta = template.setdefault("metadata", {})
        if isinstance(meta, dict):
            meta["labels"] = {**(meta.get("labels") or {}), **labels}


# --- Services ----------------------------------------------------------------------------------------


def _port_key(port: dict) -> tuple:
    return port.get("port"), port.get("protocol", "TCP")


def _node_port_invalid(name: str, index: int, message: str):
    """The apiserver's 422 for a Service's spec.ports[index].nodePort."""
    return invalid(
        "Service",
        "",
        name,
        [{"reason": "FieldValueInvalid", "field": f"spec.ports[{index}].nodePort", "message": message}],
    )


def allocate_service(obj: dict, old: dict | None, others: list[dict]) -> None:
    """Defaults and allocations of a Service being stored, against the cluster's ``others``.

    Cluster IP from SERVICE_CIDR and node ports from NODE_PORT_RANGE, at random as the allocators
    pick them; a value the client asks for is checked (422 as the apiserver answers: outside the
    range, already allocated); an update that leaves them out keeps the allocated ones
    (patchAllocatedValues), and a changed cluster IP is refused (immutable)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    name = obj["metadata"]["name"]
    stype = spec.setdefault("type", "ClusterIP")
    old_spec = (old or {}).get("spec") or {}
    used_ips = {ip for o in others for ip in ((o.get("spec") or {}).get("clusterIPs") or [])}
    used_ports = {
        p.get("nodePort")
        for o in others
        for p in ((o.get("spec") or {}).get("ports") or [])
        if isinstance(p, dict) and p.get("nodePort")
    }
    ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)]
    if stype == "ExternalName":
        return
    if old_spec.get("clusterIP") and old_spec.get("type") != "ExternalName":
        if not spec.get("clusterIP"):
            spec["clusterIP"] = old_spec["clusterIP"]
            spec["clusterIPs"] = list(old_spec.get("clusterIPs") or [old_spec["clusterIP"]])
        elif spec["clusterIP"] != old_spec["clusterIP"]:
            raise invalid(
                "Service",
                "",
                name,
                [
                    {
                        "reason": "FieldValueInvalid",
                        "field": "spec.clusterIPs[0]",
                        "message": f'Invalid value: []string{{"{spec["clusterIP"]}"}}: may not change once set',
                    }
                ],
            )
    ip = spec.get("clusterIP")
    if not ip:
        ip = _free_ip(used_ips)
    elif ip != "None" and ip != old_spec.get("clusterIP"):
        _check_ip(name, ip, used_ips)
    spec["clusterIP"] = ip
    spec["clusterIPs"] = [ip]
    if ip != "None":
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    if stype not in NODE_PORT_TYPES:
        return
    spec.setdefault("externalTrafficPolicy", "Cluster")
    if stype == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
        if not spec["allocateLoadBalancerNodePorts"]:
            return
    old_ports = (
        {
            _port_key(p): p.get("nodePort")
            for p in old_spec.get("ports") or []
            if isinstance(p, dict) and p.get("nodePort")
        }
        if old_spec.get("type") in NODE_PORT_TYPES
        else {}
    )
    mine = set(old_ports.values())
    taken: set = set()
    for i, port in enumerate(ports):
        wanted = port.get("nodePort") or old_ports.get(_port_key(port))
        if wanted:
            lo, hi = NODE_PORT_RANGE
            if not isinstance(wanted, int) or not lo <= wanted <= hi:
                raise _node_port_invalid(
                    name,
                    i,
                    f"Invalid value: {wanted}: provided port is not in the valid range. "
                    f"The range of valid ports is {lo}-{hi}",
                )
            if wanted in taken or (wanted in used_ports and wanted not in mine):
                raise _node_port_invalid(name, i, f"Invalid value: {wanted}: provided port is already allocated")
            port["nodePort"] = wanted
        else:
            port["nodePort"] = _free_port(used_ports | taken | mine)
        taken.add(port["nodePort"])


def _free_ip(used: set) -> str:
    size = SERVICE_CIDR.num_addresses
    while True:  # the range has a million addresses: a free one is found at once
        candidate = str(SERVICE_CIDR[random.randrange(2, size - 1)])  # .0 network, .1 the kubernetes Service
        if candidate not in used:
            return candidate


def _check_ip(name: str, ip: str, used: set) -> None:
    try:
        inside = ipaddress.ip_address(ip) in SERVICE_CIDR
    except ValueError:
        inside = False
    if not inside:
        raise invalid(
            "Service",
            "",
            name,
            [
                {
                    "reason": "FieldValueInvalid",
                    "field": "spec.clusterIPs",
                    "message": f'Invalid value: []string{{"{ip}"}}: failed to allocate IP {ip}: the provided IP '
                    f"({ip}) is not in the valid range. The range of valid IPs is {SERVICE_CIDR}",
                }
            ],
        )
    if ip in used:
        raise invalid(
            "Service",
            "",
            name,
            [
                {
                    "reason": "FieldValueInvalid",
                    "field": "spec.clusterIPs",
                    "message": f'Invalid value: []string{{"{ip}"}}: failed to allocate IP {ip}: provided IP is already allocated',
                }
            ],
        )


def _free_port(used: set) -> int:
    lo, hi = NODE_PORT_RANGE
    free = [p for p in range(lo, hi + 1) if p not in used]
    if not free:
        raise invalid(
            "Service", "", "", [{"reason": "FieldValueInvalid", "field": "spec.ports", "message": "range is full"}]
        )
    return random.choice(free)


# --- what every namespace holds --------------------------------------------------------------------


def namespace_companions(namespace: str, stamp: str) -> list[tuple[str, dict]]:
    """(kind, object) a namespace gets from the controllers: the `default` ServiceAccount (service
    account controller) and the `kube-root-ca.crt` ConfigMap (root CA publisher)."""
    return [
        (
            "ServiceAccount",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": namespace, "creationTimestamp": stamp},
            },
        ),
        (
            "ConfigMap",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": ROOT_CA_CONFIGMAP,
                    "namespace": namespace,
                    "creationTimestamp": stamp,
                    "annotations": {
                        "kubernetes.io/description": (
                            "Contains a CA bundle that can be used to verify the kube-apiserver "
                            "when using internal endpoints such as the internal service IP or "
                            "kubernetes.default.svc. No other usage is guaranteed across distributions "
                            "of Kubernetes clusters."
                        )
                    },
                },
                "data": {"ca.crt": SIMULATED_CA},
            },
        ),
    ]
