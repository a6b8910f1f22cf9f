"""Fleet spec: which clusters the simulator serves (see FLEET_FORMAT.md)."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from clusters.served_apis import parse_runtime_config
from clusters.versions import parse_version as parse_kube_version

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DOWN_MODES = ("refused", "503")


class FleetSpecError(ValueError):
    pass


@dataclass
class Faults:
    down: str | None = None  # None | "refused" | "503"
    latency_ms: int = 0
    error_rate: float = 0.0
    no_readyz: bool = False  # /readyz answers 404, as before Kubernetes 1.16 or behind a /healthz-only proxy
    rollout_fail: bool = False  # Deployments roll out but never become available
    image_fail: str = ""  # glob: a Deployment with a container image matching it never becomes available

    def as_dict(self) -> dict:
        return {
            "down": self.down,
            "latencyMs": self.latency_ms,
            "errorRate": self.error_rate,
            "noReadyz": self.no_readyz,
            "rolloutFail": self.rollout_fail,
            "imageFail": self.image_fail,
        }


@dataclass
class NodeSpec:
    name: str
    kubelet_version: str
    region: str
    zone: str


@dataclass
class ClusterSpec:
    name: str
    version: str
    role: str = "member"
    labels: dict = field(default_factory=dict)
    token: str = ""
    readonly_token: str = ""
    nodes: list[NodeSpec] = field(default_factory=list)
    faults: Faults = field(default_factory=Faults)
    rollout_seconds: float = 1.0
    capacity: int | None = None  # schedulable pods; None: no limit
    runtime_config: dict = field(default_factory=dict)  # kube-apiserver --runtime-config: {key: enabled}
    capi: bool = False  # a Cluster API management cluster (serves CAPI's CRDs, runs the controller)
    managed_by: str | None = None  # the management cluster whose Cluster API objects make this cluster
    control_plane_replicas: int = 1
    machine_deployments: list[tuple[str, int]] = field(default_factory=list)  # (name, replicas)
    machine_seconds: float = 2.0  # how long a Machine takes to provision, or to be deleted
    # how long a deleted namespace stays Terminating (its content being deleted) before it is gone;
    # 0: gone at once
    namespace_deletion_seconds: float = 0.0


@dataclass
class FleetSpec:
    clusters: list[ClusterSpec]


def parse_version(text: str) -> tuple[int, int, int]:
    version = parse_kube_version(str(text or "").strip(), full=True)
    if version is None:
        raise FleetSpecError(f"bad Kubernetes version {text!r} (expected e.g. v1.27.3)")
    return version.major, version.minor, version.patch


def parse_faults(raw: dict | None) -> Faults:
    raw = raw or {}
    if not isinstance(raw, dict):
        raise FleetSpecError("faults must be a mapping")
    down = raw.get("down")
    if down in (False, "", "up"):
        down = None
    if down is not None:
        down = str(down)
        if down not in DOWN_MODES:
            raise FleetSpecError(f"faults.down must be one of {DOWN_MODES} or null, not {down!r}")
    try:
        latency = int(raw.get("latencyMs", 0) or 0)
        rate = float(raw.get("errorRate", 0) or 0)
    except (TypeError, ValueError) as exc:
        raise FleetSpecError(f"bad faults: {exc}") from exc
    if latency < 0 or not 0 <= rate <= 1:
        raise FleetSpecError("faults.latencyMs must be >= 0 and errorRate within 0..1")
    no_readyz = raw.get("noReadyz", False)
    if not isinstance(no_readyz, bool):
        raise FleetSpecError(f"faults.noReadyz must be true or false, not {no_readyz!r}")
    rollout_fail = raw.get("rolloutFail", False)
    if not isinstance(rollout_fail, bool):
        raise FleetSpecError(f"faults.rolloutFail must be true or false, not {rollout_fail!r}")
    image_fail = raw.get("imageFail") or ""
    if not isinstance(image_fail, str) or len(image_fail) > 200:
        raise FleetSpecError(f"faults.imageFail must be an image pattern (a glob) or null, not {image_fail!r}")
    return Faults(
        down=down,
        latency_ms=latency,
        error_rate=rate,
        no_readyz=no_readyz,
        rollout_fail=rollout_fail,
        image_fail=image_fail.strip(),
    )


def _parse_nodes(name: str, version: str, raw, labels: dict) -> list[NodeSpec]:
    if raw is None:
        raw = {}
    if isinstance(raw, int):
        raw = {"count": raw}
    if not isinstance(raw, dict):
        raise FleetSpecError(f"{name}: nodes must be a count or a mapping")
    count = int(raw.get("count", 3))
    kubelets = raw.get("kubeletVersions") or [version]
    if isinstance(kubelets, str):
        kubelets = [kubelets]
    for kv in kubelets:
        parse_version(kv)
    region = str(raw.get("region") or labels.get("region") or "region-1")
    zones = raw.get("zones") or [f"{region}a", f"{region}b", f"{region}c"]
    if isinstance(zones, str):
        zones = [zones]
    return [
        NodeSpec(f"{name}-node-{i + 1}", str(kubelets[i % len(kubelets)]), region, str(zones[i % len(zones)]))
        for i in range(count)
    ]


def parse_cluster(raw: dict, defaults: dict) -> ClusterSpec:
    if not isinstance(raw, dict):
        raise FleetSpecError("each cluster must be a mapping")
    name = str(raw.get("name") or "")
    if not _NAME_RE.match(name) or len(name) > 63:
        raise FleetSpecError(f"bad cluster name {name!r} (DNS label expected)")
    version = str(raw.get("version") or defaults.get("version") or "")
    parse_version(version)
    role = str(raw.get("role", "member"))
    if role not in ("host", "member"):
        raise FleetSpecError(f"{name}: role must be host or member")
    labels = raw.get("labels") or {}
    if not isinstance(labels, dict):
        raise FleetSpecError(f"{name}: labels must be a mapping")
    labels = {str(k): str(v) for k, v in labels.items()}
    nodes = _parse_nodes(name, version, raw.get("nodes", defaults.get("nodes")), labels)
    try:
        runtime_config = parse_runtime_config(raw.get("runtimeConfig", defaults.get("runtimeConfig")))
    except ValueError as exc:
        raise FleetSpecError(f"{name}: {exc}") from exc
    capi, managed_by, cp_replicas, mds = _parse_capi(name, raw, defaults)
    if managed_by is not None:
        nodes = []  # a managed cluster's nodes are its Machines' (clusters/simulator/capi.py makes them)
    return ClusterSpec(
        name=name,
        version=version,
        role=role,
        labels=labels,
        token=str(raw.get("token") or secrets.token_hex(16)),
        readonly_token=str(raw.get("readonlyToken") or secrets.token_hex(16)),
        nodes=nodes,
        faults=parse_faults(raw.get("faults")),
        rollout_seconds=float(raw.get("rolloutSeconds", defaults.get("rolloutSeconds", 1.0))),
        capacity=parse_capacity(raw.get("capacity", defaults.get("capacity")), name),
        runtime_config=runtime_config,
        capi=capi,
        managed_by=managed_by,
        control_plane_replicas=cp_replicas,
        machine_deployments=mds,
        machine_seconds=_positive(raw.get("machineSeconds", defaults.get("machineSeconds", 2.0)), name),
        namespace_deletion_seconds=_positive(
            raw.get("namespaceDeletionSeconds", defaults.get("namespaceDeletionSeconds", 0)),
            name,
            "namespaceDeletionSeconds",
        ),
    )


def _positive(value, name: str, key: str = "machineSeconds") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise FleetSpecError(f"{name}: {key} must be a number >= 0, not {value!r}")
    return float(value)


def _replicas(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        raise FleetSpecError(f"{what}: replicas must be a whole number within 0..100, not {value!r}")
    return value


def _parse_capi(name: str, raw: dict, defaults: dict) -> tuple[bool, str | None, int, list[tuple[str, int]]]:
    """`capi: true` (a management cluster), or `managedBy`, `controlPlane` and `machineDeployments`
    (a workload cluster that a management cluster's Cluster API objects describe)."""
    capi = raw.get("capi", False)
    if not isinstance(capi, bool):
        raise FleetSpecError(f"{name}: capi must be true or false, not {capi!r}")
    managed_by = raw.get("managedBy")
    if managed_by is None:
        for key in ("controlPlane", "machineDeployments"):
            if key in raw:
                raise FleetSpecError(f"{name}: {key} needs managedBy (the management cluster's name)")
        return capi, None, 1, []
    if not isinstance(managed_by, str) or not _NAME_RE.match(managed_by):
        raise FleetSpecError(f"{name}: managedBy must name a cluster of the fleet, not {managed_by!r}")
    if managed_by == name:
        raise FleetSpecError(f"{name}: a cluster cannot manage itself")
    control_plane = raw.get("controlPlane") or {"replicas": 1}
    if not isinstance(control_plane, dict):
        raise FleetSpecError(f"{name}: controlPlane must be a mapping like {{replicas: 3}}")
    cp_replicas = _replicas(control_plane.get("replicas", 1), f"{name}: controlPlane")
    if cp_replicas < 1 or cp_replicas % 2 == 0:
        # KubeadmControlPlane's webhook: an even etcd membership cannot keep quorum through a roll
        raise FleetSpecError(f"{name}: controlPlane replicas must be an odd number (1, 3, 5...), not {cp_replicas}")
    raw_mds = raw.get("machineDeployments", [{"name": "md-0", "replicas": 1}])
    if not isinstance(raw_mds, list):
        raise FleetSpecError(f"{name}: machineDeployments must be a list like [{{name: md-0, replicas: 3}}]")
    mds = []
    for entry in raw_mds:
        if not isinstance(entry, dict) or not _NAME_RE.match(str(entry.get("name") or "")):
            raise FleetSpecError(f"{name}: each machineDeployment needs a DNS-label name, not {entry!r}")
        mds.append((str(entry["name"]), _replicas(entry.get("replicas", 1), f"{name}: {entry['name']}")))
    if len({n for n, _ in mds}) != len(mds):
        raise FleetSpecError(f"{name}: machineDeployment names must be unique")
    return capi, managed_by, cp_replicas, mds


def parse_capacity(value, name: str = "") -> int | None:
    """Schedulable pods of a cluster: a whole number >= 0, or null for no limit."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FleetSpecError(
            f"{name + ': ' if name else ''}capacity must be a whole number >= 0 or null, not {value!r}"
        )
    return value


def parse_fleet(data) -> FleetSpec:
    """Parse a fleet from a dict, a YAML string or a path to a YAML file."""
    if isinstance(data, Path) or (isinstance(data, str) and "\n" not in data and data.endswith((".yaml", ".yml"))):
        try:
            data = Path(data).read_text()
        except OSError as exc:
            raise FleetSpecError(f"cannot read fleet file: {exc}") from exc
    if isinstance(data, str):
        try:
            data = yaml.safe_load(data)
        except yaml.YAMLError as exc:
            raise FleetSpecError(f"fleet file is not valid YAML: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("clusters"), list) or not data["clusters"]:
        raise FleetSpecError("a fleet needs a non-empty `clusters:` list")
    defaults = data.get("defaults") or {}
    clusters = [parse_cluster(c, defaults) for c in data["clusters"]]
    names = [c.name for c in clusters]
    if len(set(names)) != len(names):
        raise FleetSpecError("cluster names must be unique")
    by_name = {c.name: c for c in clusters}
    for c in clusters:
        if c.managed_by is not None and not (c.managed_by in by_name and by_name[c.managed_by].capi):
            raise FleetSpecError(f"{c.name}: managedBy {c.managed_by!r} is not a cluster of the fleet with capi: true")
        if c.managed_by is not None and c.capi:
            raise FleetSpecError(f"{c.name}: a management cluster (capi: true) cannot be managedBy another here")
    return FleetSpec(clusters)


def parse_version_range(text: str) -> list[int]:
    """'1.25-1.33' -> [25, ..., 33] (minors)."""
    match = re.match(r"^v?1\.(\d+)(?:-v?1\.(\d+))?$", text.strip())
    if not match:
        raise FleetSpecError(f"bad version range {text!r} (expected e.g. 1.25-1.33)")
    lo = int(match.group(1))
    hi = int(match.group(2) or lo)
    if hi < lo:
        raise FleetSpecError("version range must be ascending")
    return list(range(lo, hi + 1))


REGIONS = ("us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1", "ap-northeast-1")
ENVS = ("prod", "staging", "dev")
PROVIDERS = ("aws", "gcp", "azure", "onprem")


def generate_fleet(count: int, versions: str = "1.25-1.33", capi: bool = False) -> FleetSpec:
    """A host plus count-1 members spread over the version range, regions, envs and providers;
    with ``capi``, the host is a Cluster API management cluster and every member is managed by it
    (one control-plane Machine, one MachineDeployment md-0 of 2)."""
    if count < 1:
        raise FleetSpecError("--generate needs at least 1 cluster")
    minors = parse_version_range(versions)
    raw = []
    for i in range(count):
        minor = minors[i % len(minors)]
        region = REGIONS[i % len(REGIONS)]
        raw.append(
            {
                "name": "host" if i == 0 else f"member-{i:04d}",
                "role": "host" if i == 0 else "member",
                "version": f"v1.{minor}.{i % 7}",
                "labels": {"region": region, "env": ENVS[i % len(ENVS)], "provider": PROVIDERS[i % len(PROVIDERS)]},
                "nodes": {
                    "count": 3,
                    "kubeletVersions": [f"v1.{minor}.{i % 7}", f"v1.{max(minor - 1, 20)}.0"],
                    "region": region,
                },
            }
        )
    if capi:
        raw[0]["capi"] = True
        for entry in raw[1:]:
            del entry["nodes"]
            entry.update(
                managedBy="host", controlPlane={"replicas": 1}, machineDeployments=[{"name": "md-0", "replicas": 2}]
            )
    return parse_fleet({"clusters": raw})
