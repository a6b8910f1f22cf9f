"""Read KubeFed objects into FedPortal's structures. Pure: no ORM.

Understands ``types.kubefed.io/v1beta1`` ``Federated<Kind>`` (spec.template / placement /
overrides) and ``scheduling.kubefed.io/*`` ``ReplicaSchedulingPreference``; plain Kubernetes
objects are accepted too (like ``kubefedctl federate``: template only, not yet placed).
Cluster names can be mapped (KubeFed's ``cluster1`` -> a registered name).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

from federation.manifests import ManifestError, check_object_identity, load_yaml_documents
from federation.overrides import OverrideError, normalize_overrides
from federation.placement import PlacementError, normalize_placement
from federation.rollout_strategy import StrategyError, normalize_strategy
from federation.scheduling import WILDCARD, SchedulingError, normalize_preference

KUBEFED_TYPES_GROUP = "types.kubefed.io"
KUBEFED_SCHEDULING_GROUP = "scheduling.kubefed.io"


class KubeFedImportError(ValueError):
    """A document that cannot be imported; the message names the document."""


@dataclass
class ImportedResource:
    kind: str  # the target kind, e.g. "Deployment"
    api_version: str  # the target apiVersion when known ("" for Federated<Kind> templates without one)
    namespace: str
    name: str
    template: dict
    placement: dict = field(default_factory=dict)
    overrides: list = field(default_factory=list)
    source: str = "kubefed"  # "kubefed" or "plain"
    rollout_strategy: dict | None = None  # spec.rolloutStrategy (None: not given, the resource's stays)


@dataclass
class ImportedScheduling:
    target_kind: str  # e.g. "Deployment" (from targetKind FederatedDeployment)
    namespace: str
    name: str
    preference: dict


@dataclass
class ImportResult:
    resources: list[ImportedResource] = field(default_factory=list)
    scheduling: list[ImportedScheduling] = field(default_factory=list)


def _map_name(name: str, cluster_map: Mapping[str, str], known: set[str] | None, where: str) -> str:
    mapped = cluster_map.get(name, name)
    if known is not None and mapped not in known:
        hint = f" (mapped from {name!r})" if mapped != name else ""
        raise KubeFedImportError(f"{where}: cluster {mapped!r}{hint} is not registered.")
    return mapped


def _metadata(obj: Mapping, where: str) -> tuple[str, str]:
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
        raise KubeFedImportError(f"{where} has no metadata.name.")
    namespace = metadata.get("namespace") or ""
    if not isinstance(namespace, str):
        raise KubeFedImportError(f"{where}: metadata.namespace must be a string.")
    return namespace, metadata["name"]


def parse_federated(
    obj: Mapping, *, cluster_map: Mapping[str, str] | None = None, known_clusters=None, where="document"
) -> ImportedResource:
    cluster_map = cluster_map or {}
    known = set(known_clusters) if known_clusters is not None else None
    api_version, kind = check_object_identity(obj, where=where)
    namespace, name = _metadata(obj, where)
    target_kind = kind[len("Federated") :]
    if not kind.startswith("Federated") or not target_kind:
        raise KubeFedImportError(f"{where}: {kind!r} is not a Federated<Kind>.")
    where = f"{where} ({kind} {namespace + '/' if namespace else ''}{name})"
    # only a missing (or null) spec is empty: `spec: []` or `spec: ""` was read as {} and accepted
    spec = {} if obj.get("spec") is None else obj["spec"]
    if not isinstance(spec, Mapping):
        raise KubeFedImportError(f"{where}: spec must be a mapping.")
    unknown = set(spec) - {"template", "placement", "overrides", "rolloutStrategy"}
    if unknown:
        raise KubeFedImportError(f"{where}: unknown spec field {sorted(unknown)[0]!r}.")
    template = {} if spec.get("template") is None else spec["template"]
    if not isinstance(template, Mapping):
        raise KubeFedImportError(f"{where}: spec.template must be a mapping.")
    template = dict(template)
    target_api_version = template.pop("apiVersion", "") or ""
    if not isinstance(target_api_version, str):
        raise KubeFedImportError(f"{where}: spec.template.apiVersion must be a string, not {target_api_version!r}.")
    if not isinstance({} if template.get("metadata") is None else template["metadata"], Mapping):
        raise KubeFedImportError(f"{where}: spec.template.metadata must be a mapping.")
    template_kind = template.pop("kind", None)
    if template_kind not in (None, target_kind):
        raise KubeFedImportError(f"{where}: spec.template.kind is {template_kind!r}, expected {target_kind!r}.")
    try:
        placement = normalize_placement(spec.get("placement"))
    except PlacementError as exc:
        raise KubeFedImportError(f"{where}: {exc}") from exc
    if placement.get("clusters") is not None:
        placement["clusters"] = sorted(
            {_map_name(c, cluster_map, known, f"{where} placement") for c in placement["clusters"]}
        )
    try:
        overrides = normalize_overrides(spec.get("overrides"))
    except OverrideError as exc:
        raise KubeFedImportError(f"{where}: {exc}") from exc
    for entry in overrides:
        entry["clusterName"] = _map_name(entry["clusterName"], cluster_map, known, f"{where} overrides")
    overrides = normalize_overrides(overrides)  # re-merge if two names mapped to one
    strategy = None
    if "rolloutStrategy" in spec:
        try:
            strategy = normalize_strategy(spec.get("rolloutStrategy"))
        except StrategyError as exc:
            raise KubeFedImportError(f"{where}: spec.rolloutStrategy: {exc}") from exc
    if target_kind == "Namespace":
        # FederatedNamespace lives in the namespace it federates; the target is cluster-scoped.
        namespace = ""
    return ImportedResource(
        target_kind, target_api_version, namespace, name, template, placement, overrides, rollout_strategy=strategy
    )


def parse_scheduling(obj: Mapping, *, cluster_map=None, known_clusters=None, where="document") -> ImportedScheduling:
    cluster_map = cluster_map or {}
    known = set(known_clusters) if known_clusters is not None else None
    namespace, name = _metadata(obj, where)
    where = f"{where} (ReplicaSchedulingPreference {namespace}/{name})"
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise KubeFedImportError(f"{where}: spec is missing.")
    target = spec.get("targetKind")
    if not isinstance(target, str) or not target.startswith("Federated") or target == "Federated":
        raise KubeFedImportError(f"{where}: targetKind must name a Federated<Kind>, got {target!r}.")
    try:
        preference = normalize_preference({k: v for k, v in spec.items() if k != "targetKind"})
    except SchedulingError as exc:
        raise KubeFedImportError(f"{where}: {exc}") from exc
    if preference is None:
        raise KubeFedImportError(f"{where}: totalReplicas is required.")
    preference["clusters"] = {
        (name_ if name_ == WILDCARD else _map_name(name_, cluster_map, known, where)): pref
        for name_, pref in preference["clusters"].items()
    }
    return ImportedScheduling(target[len("Federated") :], namespace, name, preference)


def parse_plain(obj: Mapping, *, where="document") -> ImportedResource:
    api_version, kind = check_object_identity(obj, where=where)
    namespace, name = _metadata(obj, where)
    template = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "status")}
    return ImportedResource(kind, api_version, namespace, name, template, {}, [], source="plain")


def legacy_ingress_backends(template: Mapping) -> list[str]:
    """Paths of Ingress backends written in the extensions/v1beta1 shape (serviceName/servicePort),
    the Ingress KubeFed's chart federates and Kubernetes stopped serving in 1.22."""
    spec = template.get("spec") if isinstance(template, Mapping) else None
    if not isinstance(spec, Mapping):
        return []
    found = []
    backends = [("spec.backend", spec.get("backend")), ("spec.defaultBackend", spec.get("defaultBackend"))]
    for r, rule in enumerate(spec.get("rules") or []):
        paths = ((rule or {}).get("http") or {}).get("paths") if isinstance(rule, Mapping) else None
        for p, path in enumerate(paths or []):
            if isinstance(path, Mapping):
                backends.append((f"spec.rules[{r}].http.paths[{p}].backend", path.get("backend")))
    for where, backend in backends:
        if isinstance(backend, Mapping) and ("serviceName" in backend or "servicePort" in backend):
            found.append(where)
    return found


def parse_documents(text, *, cluster_map=None, known_clusters=None) -> ImportResult:
    """Every document in ``text``; the first bad one raises and nothing is returned."""
    try:
        documents = load_yaml_documents(text)
    except ManifestError as exc:
        raise KubeFedImportError(str(exc)) from exc
    if not documents:
        raise KubeFedImportError("The file has no YAML documents.")
    result = ImportResult()
    for index, obj in enumerate(documents, start=1):
        where = f"document {index}"
        try:
            api_version, kind = check_object_identity(obj, where=where)
        except ManifestError as exc:
            raise KubeFedImportError(str(exc)) from exc
        group = api_version.rpartition("/")[0]
        if kind == "List" and api_version == "v1":
            raise KubeFedImportError(f"{where}: a List is not supported; give one object per document.")
        if group == KUBEFED_TYPES_GROUP:
            result.resources.append(
                parse_federated(obj, cluster_map=cluster_map, known_clusters=known_clusters, where=where)
            )
        elif group == KUBEFED_SCHEDULING_GROUP:
            if kind != "ReplicaSchedulingPreference":
                raise KubeFedImportError(f"{where}: {kind!r} in {group} is not supported.")
            result.scheduling.append(
                parse_scheduling(obj, cluster_map=cluster_map, known_clusters=known_clusters, where=where)
            )
        elif group.endswith("kubefed.io"):
            raise KubeFedImportError(
                f"{where}: {api_version} {kind} is KubeFed control-plane configuration, not a federated object."
            )
        else:
            result.resources.append(parse_plain(obj, where=where))
    return result
