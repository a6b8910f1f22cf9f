"""Per-version Kubernetes schema catalog over the `kubernetes-validate` package's files.

Plain data in and out (no Django models, no `kubernetes` import), shared by the fleet simulator
and the drift app.

Public API
----------
SUPPORTED_MINORS: tuple[int, ...]            minors with schemas shipped (25..37)
schema_minor_for(git_version) -> int | None  "v1.27.3" -> 27; None outside SUPPORTED_MINORS
api_resources(minor) -> list[ApiResource]     resources served at that version (no List kinds,
                                              no subresource kinds such as Scale/Eviction)
find_resource(minor, api_version, kind) -> ApiResource | None
validate_manifest(manifest, minor, *, strict=True) -> list[SchemaProblem]
prune_unknown_fields(manifest, minor) -> (pruned_copy, list[SchemaProblem])
kind_schema(minor, api_version, kind) -> dict | None   the raw (description-free) schema node
resolve(minor, node) -> dict                  follows a "$ref" inside that version's definitions
pointer_to_field_path("/spec/a/0/b") -> "spec.a[0].b"   the apiserver's spelling in messages
introduced_in(api_version, kind) / removed_in(api_version, kind) -> int | None
                                              first minor serving it / first minor without it
                                              (None: before 25 / still served in 37)
lifecycle(api_version, kind) -> (deprecated, removed, replacement) | None   a pre-release API's
                                              lifecycle (clusters.api_lifecycle, else the default rule)
deprecation_warning(minor, api_version, kind) -> str | None   the apiserver's Warning text for
                                              a deprecated API, from its deprecating minor on
version_priority(version) -> tuple           Kubernetes' order of API versions (v1 > v1beta2 > ...)

We do not call `kubernetes_validate.validate()`: it recompiles the schema on every call and
compares versions as strings. Instead the per-version `_definitions.json` (strict flavour; the
non-strict flavour differs only by `additionalProperties: false`, which `strict=False` ignores) is
loaded once per minor, descriptions dropped, and compiled into small closures cached per
(minor, definition).
"""

from __future__ import annotations

import functools
import gc
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import kubernetes_validate

from clusters import api_lifecycle
from clusters.versions import minor_of

_SCHEMA_ROOT = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
_DIR_RE = re.compile(r"^v1\.(\d+)\.0-local-strict$")


def _discover_minors() -> tuple[int, ...]:
    minors = []
    for entry in _SCHEMA_ROOT.iterdir():
        match = _DIR_RE.match(entry.name)
        if match and (entry / "_definitions.json").exists():
            minors.append(int(match.group(1)))
    return tuple(sorted(minors))


SUPPORTED_MINORS: tuple[int, ...] = _discover_minors()

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")

# Kinds served cluster-wide (everything else is namespaced).
CLUSTER_SCOPED_KINDS = frozenset(
    {
        "APIService",
        "CertificateSigningRequest",
        "ClusterRole",
        "ClusterRoleBinding",
        "ClusterTrustBundle",
        "ComponentStatus",
        "CSIDriver",
        "CSINode",
        "CustomResourceDefinition",
        "DeviceClass",
        "FlowSchema",
        "IngressClass",
        "IPAddress",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
        "MutatingWebhookConfiguration",
        "Namespace",
        "Node",
        "PersistentVolume",
        "PriorityClass",
        "PriorityLevelConfiguration",
        "ResourceClass",
        "ResourceSlice",
        "RuntimeClass",
        "SelfSubjectAccessReview",
        "SelfSubjectReview",
        "SelfSubjectRulesReview",
        "ServiceCIDR",
        "StorageClass",
        "StorageVersion",
        "StorageVersionMigration",
        "SubjectAccessReview",
        "TokenReview",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingWebhookConfiguration",
        "VolumeAttachment",
        "VolumeAttributesClass",
        "DeviceTaintRule",
        "LeaseCandidate",
        "PodGroup",
        "Workload",
    }
)
# Kinds that exist in the schemas only as subresource bodies, never as a REST collection.
_SUBRESOURCE_KINDS = frozenset({"Scale", "Eviction", "TokenRequest"})
_CREATE_ONLY_KINDS = frozenset(
    {
        "Binding",
        "TokenReview",
        "SubjectAccessReview",
        "LocalSubjectAccessReview",
        "SelfSubjectAccessReview",
        "SelfSubjectRulesReview",
        "SelfSubjectReview",
    }
)
_READ_ONLY_KINDS = {"ComponentStatus": ("get", "list")}
_PLURAL_EXCEPTIONS = {"Endpoints": "endpoints"}


@dataclass(frozen=True)
class ApiResource:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    verbs: tuple[str, ...]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def stability(self) -> str:
        """ "alpha" | "beta" | "stable". The schemas list alpha (and new beta) APIs that real
        clusters do not serve unless enabled; callers decide whether to count them."""
        return "alpha" if "alpha" in self.version else "beta" if "beta" in self.version else "stable"


@dataclass(frozen=True)
class SchemaProblem:
    path: str  # JSON pointer, "" for the whole object
    code: str  # "unknown_field" | "invalid" | "unknown_kind"
    message: str


def schema_minor_for(git_version: str) -> int | None:
    """'v1.27.3' (or '1.27', 'v1.27.3-eks-1') -> 27; None when no schema covers that version."""
    minor = minor_of(git_version or "")
    return minor if minor in SUPPORTED_MINORS else None


def plural_for(kind: str) -> str:
    if kind in _PLURAL_EXCEPTIONS:
        return _PLURAL_EXCEPTIONS[kind]
    low = kind.lower()
    if low.endswith(("s", "x", "z", "ch", "sh")):
        return low + "es"
    if low.endswith("y") and len(low) > 1 and low[-2] not in "aeiou":
        return low[:-1] + "ies"
    return low + "s"


def split_api_version(api_version: str) -> tuple[str, str]:
    if "/" in api_version:
        group, _, version = api_version.partition("/")
        return group, version
    return "", api_version


# ---------------------------------------------------------------------------------------------
# Loading


def _without_description(node: dict) -> dict:
    """json.load's object_hook: every object without its "description" (as it is parsed, not by a
    second walk over the tree: a fleet's first compatibility check loads a dozen of these)."""
    node.pop("description", None)
    return node


def documented_definitions(minor: int) -> dict:
    """Every definition of a minor with its descriptions (the non-strict flavour, as an apiserver
    publishes them; not cached: only the simulator's OpenAPI documents read it)."""
    if minor not in SUPPORTED_MINORS:
        raise ValueError(f"no schemas for Kubernetes 1.{minor}")
    with (_SCHEMA_ROOT / f"v1.{minor}.0-local" / "_definitions.json").open() as fh:
        return json.load(fh)["$defs"]


@functools.cache
def _definitions(minor: int) -> dict:
    if minor not in SUPPORTED_MINORS:
        raise ValueError(f"no schemas for Kubernetes 1.{minor}")
    path = _SCHEMA_ROOT / f"v1.{minor}.0-local-strict" / "_definitions.json"
    # no garbage collection while 40,000 objects are made: its passes over them doubled a load's
    # CPU and made some loads take ten times as long (the first compatibility matrix of a process)
    collecting = gc.isenabled()
    gc.disable()
    try:
        with path.open() as fh:
            return json.load(fh, object_hook=_without_description)["$defs"]
    finally:
        if collecting:
            gc.enable()


@functools.cache
def _kind_index(minor: int) -> dict[tuple[str, str, str], str]:
    """(group, version, kind) -> definition name, for top-level resources only."""
    index: dict[tuple[str, str, str], str] = {}
    for name, node in _definitions(minor).items():
        gvks = node.get("x-kubernetes-group-version-kind")
        if not gvks or name.endswith("List"):
            continue
        meta_ref = node.get("properties", {}).get("metadata", {}).get("$ref", "")
        if not meta_ref.endswith("meta.v1.ObjectMeta"):
            continue
        for gvk in gvks:
            index[(gvk["group"], gvk["version"], gvk["kind"])] = name
    return index


@functools.cache
def _api_resources(minor: int) -> tuple[ApiResource, ...]:
    out = []
    for group, version, kind in sorted(_kind_index(minor)):
        if kind in _SUBRESOURCE_KINDS:
            continue
        if kind in _CREATE_ONLY_KINDS:
            verbs = ("create",)
        else:
            verbs = _READ_ONLY_KINDS.get(kind, ALL_VERBS)
        out.append(ApiResource(group, version, kind, plural_for(kind), kind not in CLUSTER_SCOPED_KINDS, tuple(verbs)))
    return tuple(out)


def api_resources(minor: int) -> list[ApiResource]:
    return list(_api_resources(minor))


@functools.cache
def _resource_lookup(minor: int) -> dict:
    table = {}
    for res in _api_resources(minor):
        table[(res.group, res.version, res.kind)] = res
        table[(res.group, res.version, res.plural)] = res
    return table


def find_resource(minor: int, api_version: str, kind_or_plural: str) -> ApiResource | None:
    group, version = split_api_version(api_version)
    return _resource_lookup(minor).get((group, version, kind_or_plural))


def kind_schema(minor: int, api_version: str, kind: str) -> dict | None:
    group, version = split_api_version(api_version)
    name = _kind_index(minor).get((group, version, kind))
    return _definitions(minor)[name] if name else None


def resolve(minor: int, node: dict | None) -> dict:
    """Follow `$ref` (and single-element allOf wrappers) to the definition they name."""
    while isinstance(node, dict):
        ref = node.get("$ref")
        if ref:
            node = _definitions(minor).get(ref.rsplit("/", 1)[-1], {})
            continue
        all_of = node.get("allOf")
        if all_of and len(all_of) == 1 and "properties" not in node:
            node = all_of[0]
            continue
        return node
    return {}


@functools.cache
def _served_minors() -> dict[tuple[str, str, str], tuple[int, ...]]:
    out: dict[tuple[str, str, str], list[int]] = {}
    for minor in SUPPORTED_MINORS:
        for res in _api_resources(minor):
            out.setdefault((res.group, res.version, res.kind), []).append(minor)
    return {k: tuple(v) for k, v in out.items()}


def introduced_in(api_version: str, kind: str) -> int | None:
    group, version = split_api_version(api_version)
    minors = _served_minors().get((group, version, kind))
    if not minors or minors[0] == SUPPORTED_MINORS[0]:
        return None
    return minors[0]


def removed_in(api_version: str, kind: str) -> int | None:
    group, version = split_api_version(api_version)
    minors = _served_minors().get((group, version, kind))
    if not minors or minors[-1] == SUPPORTED_MINORS[-1]:
        return None
    return minors[-1] + 1


def _stability(version: str) -> int:
    return 0 if "alpha" in version else 1 if "beta" in version else 2


_KUBE_API_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' API version priority, higher first: GA over beta over alpha, then the higher
    major, then the higher pre-release number (v1 > v1beta2 > v1beta1 > v1alpha1)."""
    match = _KUBE_API_VERSION_RE.match(version)
    if not match:
        return (-1, 0, 0)
    stability = {"alpha": 0, "beta": 1, None: 2}[match.group(2)]
    return (stability, int(match.group(1)), int(match.group(3) or 0))


def lifecycle(api_version: str, kind: str) -> tuple[int, int, str | None] | None:
    """(deprecated in minor, removed in minor, replacement apiVersion or None) of a pre-release API,
    as kube-apiserver's prerelease-lifecycle tags have it: the explicit ones carried over in
    ``clusters.api_lifecycle``, else, for a beta, Kubernetes' default rule (deprecated three minors
    after it was introduced, removed three after that), with a removal the schemas show taking
    precedence; an alpha API gets no derived dates.
    None for a GA API, an unknown one, or one present since the oldest schema whose removal the
    schemas do not show (its introduction, hence its deprecation, is not known)."""
    group, version = split_api_version(api_version)
    if _stability(version) == 2:
        return None
    explicit = api_lifecycle.EXPLICIT_LIFECYCLES.get((api_version, kind))
    if explicit:
        return explicit
    if _stability(version) == 0:
        return None  # alpha APIs get no derived dates (only explicit tags; kubernetes#138129)
    minors = _served_minors().get((group, version, kind))
    if not minors:
        return None
    removed = removed_in(api_version, kind)
    introduced = introduced_in(api_version, kind)
    if introduced is not None:
        deprecated = introduced + api_lifecycle.MINORS_TO_DEPRECATION
        return deprecated, removed or deprecated + api_lifecycle.MINORS_TO_REMOVAL, None
    if removed is not None:
        return removed - api_lifecycle.MINORS_TO_REMOVAL, removed, None
    return None


@functools.lru_cache(maxsize=4096)
def deprecation_warning(minor: int, api_version: str, kind: str) -> str | None:
    """kube-apiserver's Warning for a deprecated API served at ``minor``: '<gv> <Kind> is
    deprecated in v1.X+, unavailable in v1.Y+; use <gv2> <Kind>', from the minor that deprecates
    it on (``lifecycle``); None before that, for GA APIs and outside the schemas' range. The
    replacement is the lifecycle's, else the most stable other version of the group and kind that
    this minor serves."""
    known = lifecycle(api_version, kind)
    if known is None or minor not in SUPPORTED_MINORS:
        return None
    deprecated, removed, replacement = known
    if minor < deprecated:
        return None
    text = f"{api_version} {kind} is deprecated in v1.{deprecated}+, unavailable in v1.{removed}+"
    if replacement is None:
        group, version = split_api_version(api_version)
        better = [
            r
            for r in _api_resources(minor)
            if r.group == group and r.kind == kind and version_priority(r.version) > version_priority(version)
        ]
        if better:
            replacement = max(better, key=lambda r: version_priority(r.version)).api_version
    return text + (f"; use {replacement} {kind}" if replacement else "")


# ---------------------------------------------------------------------------------------------
# Compiled validators
#
# A compiled node is fn(value, path, problems, strict, prune) -> value (pruned copy when prune).


def _escape(token) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def _pointer(path: list) -> str:
    return "".join("/" + _escape(p) for p in path)


def pointer_to_field_path(pointer: str) -> str:
    """'/spec/template/spec/initContainers/0/restartPolicy' -> 'spec.template.spec.initContainers[0].restartPolicy'."""
    out = ""
    for raw in pointer.split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        if token.isdigit():
            out += f"[{token}]"
        else:
            out += ("." if out else "") + token
    return out


_TYPE_CHECKS = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _json_type(value) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPE_CHECKS[name](value):
            return name
    return type(value).__name__


def _accept(value, path, problems, strict, prune):
    return value


class _Compiler:
    def __init__(self, minor: int):
        self.minor = minor
        self.defs = _definitions(minor)
        self.by_def: dict[str, list] = {}

    def ref(self, name: str):
        cell = self.by_def.get(name)
        if cell is None:
            cell = [None]
            self.by_def[name] = cell
            cell[0] = self.compile(self.defs.get(name, {}))
        return lambda v, p, pr, s, pn: cell[0](v, p, pr, s, pn)

    def compile(self, node: dict):
        if not isinstance(node, dict) or not node:
            return _accept
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return _accept
        if "$ref" in node:
            return self.ref(node["$ref"].rsplit("/", 1)[-1])
        steps = []
        for key in ("oneOf", "anyOf"):
            if key in node:
                steps.append(self._any([self.compile(n) for n in node[key]]))
        if "allOf" in node:
            subs = [self.compile(n) for n in node["allOf"]]

            def all_of(v, p, pr, s, pn, subs=subs):
                for sub in subs:
                    v = sub(v, p, pr, s, pn)
                return v

            steps.append(all_of)
        types = node.get("type")
        if isinstance(types, str):
            types = [types]
        checks = [_TYPE_CHECKS[t] for t in types or () if t in _TYPE_CHECKS]
        enum = node.get("enum")
        props = {k: self.compile(v) for k, v in (node.get("properties") or {}).items()}
        required = tuple(node.get("required") or ())
        extra = node.get("additionalProperties", True)
        extra_fn = self.compile(extra) if isinstance(extra, dict) else None
        closed = extra is False
        items = self.compile(node["items"]) if isinstance(node.get("items"), dict) else None
        type_names = "/".join(t for t in (types or ()) if t != "null")

        def check(v, p, pr, s, pn):
            if checks and not any(c(v) for c in checks):
                pr.append(SchemaProblem(_pointer(p), "invalid", f"expected {type_names}, got {_json_type(v)}"))
                return v
            if enum is not None and v is not None and v not in enum:
                pr.append(
                    SchemaProblem(
                        _pointer(p),
                        "invalid",
                        f"Unsupported value: {json.dumps(v)}: supported values: "
                        + ", ".join(json.dumps(e) for e in enum if e is not None),
                    )
                )
            if isinstance(v, dict):
                out = {} if pn else v
                for key, val in v.items():
                    fn = props.get(key)
                    if fn is None:
                        fn = extra_fn
                    if fn is None:
                        if closed and s:
                            pr.append(
                                SchemaProblem(
                                    _pointer(p + [key]),
                                    "unknown_field",
                                    f'unknown field "{pointer_to_field_path(_pointer(p + [key]))}"',
                                )
                            )
                            continue
                        if pn:
                            out[key] = val
                        continue
                    p.append(key)
                    res = fn(val, p, pr, s, pn)
                    p.pop()
                    if pn:
                        out[key] = res
                for key in required:
                    if v.get(key) is None:
                        pr.append(SchemaProblem(_pointer(p + [key]), "invalid", "Required value"))
                return out
            if isinstance(v, list) and items is not None:
                out = [] if pn else v
                for i, val in enumerate(v):
                    p.append(i)
                    res = items(val, p, pr, s, pn)
                    p.pop()
                    if pn:
                        out.append(res)
                return out
            return v

        if not steps:
            return check

        def combined(v, p, pr, s, pn):
            for step in steps:
                v = step(v, p, pr, s, pn)
            return check(v, p, pr, s, pn)

        return combined

    @staticmethod
    def _any(subs):
        def any_of(v, p, pr, s, pn):
            first = None
            for sub in subs:
                trial: list = []
                res = sub(v, p, trial, s, pn)
                if not trial:
                    return res
                first = first or trial
            pr.extend(first or [])
            return v

        return any_of


@functools.cache
def _compiler(minor: int) -> _Compiler:
    return _Compiler(minor)


_COMPILE_LOCK = threading.RLock()  # a half-compiled recursive definition must never be run


@functools.lru_cache(maxsize=1024)
def _kind_validator(minor: int, api_version: str, kind: str):
    group, version = split_api_version(api_version)
    name = _kind_index(minor).get((group, version, kind))
    if name is None:
        return None
    with _COMPILE_LOCK:
        return _compiler(minor).ref(name)


def _run(manifest, minor: int, strict: bool, prune: bool):
    if not isinstance(manifest, dict):
        return manifest, [SchemaProblem("", "invalid", "object expected")]
    if minor not in SUPPORTED_MINORS:
        return manifest, [SchemaProblem("", "unknown_kind", f"no schemas for Kubernetes 1.{minor}")]
    api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
    if not isinstance(api_version, str) or not api_version:
        return manifest, [SchemaProblem("/apiVersion", "invalid", "Required value: apiVersion")]
    if not isinstance(kind, str) or not kind:
        return manifest, [SchemaProblem("/kind", "invalid", "Required value: kind")]
    fn = _kind_validator(minor, api_version, kind)
    if fn is None:
        return manifest, [
            SchemaProblem(
                "",
                "unknown_kind",
                f'no kind "{kind}" is registered for version "{api_version}" in Kubernetes 1.{minor}',
            )
        ]
    problems: list[SchemaProblem] = []
    out = fn(manifest, [], problems, strict, prune)
    return out, problems


@functools.lru_cache(maxsize=8192)
def _validate_cached(canonical: str, minor: int, strict: bool) -> tuple[SchemaProblem, ...]:
    return tuple(_run(json.loads(canonical), minor, strict, False)[1])


def validate_manifest(manifest: dict, minor: int, *, strict: bool = True) -> list[SchemaProblem]:
    """Check a manifest against the schema of Kubernetes 1.<minor>.

    strict=True reports fields the schema does not declare (code "unknown_field"), as the
    apiserver's fieldValidation=Strict does. Results are cached by manifest content, so checking
    the same manifests against a large fleet costs one validation per distinct version.
    """
    try:
        canonical = json.dumps(manifest, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return [SchemaProblem("", "invalid", "manifest is not JSON-serialisable")]
    return list(_validate_cached(canonical, minor, strict))


def validation_cache_hits() -> int:
    """How many validate_manifest calls the result cache has answered (tests, diagnostics)."""
    return _validate_cached.cache_info().hits


def clear_caches() -> None:
    """Forget every compiled schema and cached result (the next use compiles them again)."""
    _kind_validator.cache_clear()
    _compiler.cache_clear()
    _validate_cached.cache_clear()


def prune_unknown_fields(manifest: dict, minor: int) -> tuple[dict, list[SchemaProblem]]:
    """Return (copy without undeclared fields, all problems found), like fieldValidation=Warn."""
    return _run(manifest, minor, True, True)
