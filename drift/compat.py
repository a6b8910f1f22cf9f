"""API compatibility of a rendered manifest with a target cluster's Kubernetes version.

Plain data in and out: no ORM, no HTTP. Schemas come from ``clusters.schemas`` (the per-version
strict schemas of kubernetes-validate, compiled once per minor); this module adds what a person
needs to act on a result:

* **apiVersion availability, Pluto-style**: an apiVersion/kind not served at the target version is
  reported with the version it was removed in (or first appears in) and the apiVersion to use
  instead when the target serves the same kind elsewhere.
* **unsupported fields by path**: each field the target's schema does not declare, with the
  minimum newer version that accepts it, and an override that removes it for that cluster
  (``{"op": "remove", "path": <JSON pointer>}``, the form FederatedResource overrides take).
* **served APIs**: an apiVersion is accepted only when the cluster serves it: the group-versions its
  discovery advertised (``served``), or, before discovery was read, what a default apiserver of
  that minor serves (``clusters.served_apis``: no alpha APIs, no betas that are off by default).
  A kind in the schemas but not served is ``api_not_served``; a custom resource whose group-version
  a cluster's discovery (when read) does not list is ``crd_not_served``.
* **unverifiable**: versions outside the schemas' range, unreadable versions, and kinds no
  schema knows (CRDs) are "unverifiable", never a crash.

Results are cached by (manifest content hash, minor): a fleet of 1,000 clusters usually runs a
handful of minors, so ``check_fleet`` validates each manifest once per distinct minor, not once
per cluster.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from threading import Lock

from clusters import api_lifecycle, schemas, served_apis
from clusters.versions import minor_of
from drift.choices import CompatProblemCode, CompatStatus

_CACHE_SIZE = 50_000


@dataclass(frozen=True)
class CompatProblem:
    code: str
    path: str  # JSON pointer ("" for the whole object)
    message: str
    min_version: str | None = None  # "v1.28": the oldest supported version that accepts it
    removed_in: str | None = None
    available_from: str | None = None
    replacement: str | None = None  # apiVersion to use instead
    fix: dict | None = field(default=None, hash=False, compare=False)

    @property
    def field_path(self) -> str:
        return schemas.pointer_to_field_path(self.path) if self.path else ""

    def as_dict(self) -> dict:
        return {
            "code": str(self.code),
            "path": self.path,
            "field": self.field_path,
            "message": self.message,
            "min_version": self.min_version,
            "removed_in": self.removed_in,
            "available_from": self.available_from,
            "replacement": self.replacement,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class CompatResult:
    status: str
    minor: int | None
    problems: tuple[CompatProblem, ...] = ()

    @property
    def version_label(self) -> str:
        return f"v1.{self.minor}" if self.minor is not None else "unknown"

    @property
    def suggested_overrides(self) -> list[dict]:
        return [p.fix for p in self.problems if p.fix]

    @property
    def min_version(self) -> str | None:
        """The oldest version at which every reported field is accepted, when there is one."""
        needed = [p.min_version for p in self.problems]
        if not needed or any(v is None for v in needed):
            return None
        return max(needed, key=minor_of)

    def as_dict(self) -> dict:
        return {
            "status": str(self.status),
            "minor": self.minor,
            "problems": [p.as_dict() for p in self.problems],
            "suggested_overrides": self.suggested_overrides,
            "min_version": self.min_version,
        }


def label(minor: int) -> str:
    return f"v1.{minor}"


def supported_range() -> str:
    minors = schemas.SUPPORTED_MINORS
    return f"{label(minors[0])}–{label(minors[-1])}" if minors else "none"


def canonical_json(manifest) -> str:
    return json.dumps(manifest, sort_keys=True, separators=(",", ":"), default=str)


def content_hash(manifest) -> str:
    return hashlib.sha256(canonical_json(manifest).encode()).hexdigest()


# --- the cache ----------------------------------------------------------------------------------

_cache: OrderedDict[tuple, CompatResult] = OrderedDict()
_cache_lock = Lock()
cache_stats = {"hits": 0, "misses": 0}


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
        cache_stats.update(hits=0, misses=0)


def _cached(digest: str, minor: int, manifest, served: frozenset | str | None = None) -> CompatResult:
    key = (digest, minor, served)
    with _cache_lock:
        result = _cache.get(key)
        if result is not None:
            _cache.move_to_end(key)
            cache_stats["hits"] += 1
            return result
    result = _check_minor(manifest, minor, served)
    with _cache_lock:
        cache_stats["misses"] += 1
        _cache[key] = result
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return result


# --- checks -------------------------------------------------------------------------------------


# served_key's answer for a discovery that lists what a default apiserver of the minor serves, no more
DEFAULT_DISCOVERY = "default discovery"


def served_key(minor: int, served) -> frozenset | str | None:
    """``served`` (group-versions from a cluster's discovery) as a cache key: None when it is unknown
    (empty: not read yet), DEFAULT_DISCOVERY when it is what a default apiserver of ``minor`` serves
    (one cache entry for most of a fleet)."""
    if not served:
        return None
    wanted = frozenset(str(gv) for gv in served)
    return DEFAULT_DISCOVERY if wanted == served_apis.served_group_versions(minor) else wanted


def check_manifest(manifest, version, *, digest: str | None = None, served=None) -> CompatResult:
    """Is ``manifest`` accepted by a cluster at ``version`` (gitVersion string or int minor) serving
    the group-versions ``served`` (its discovery; None or empty: a default apiserver's)?"""
    minor = minor_of(version)
    if minor is None:
        return CompatResult(
            CompatStatus.UNVERIFIABLE,
            None,
            (
                CompatProblem(
                    CompatProblemCode.VERSION_UNVERIFIABLE,
                    "",
                    f"The cluster's version ({version!r:.60}) cannot be read.",
                ),
            ),
        )
    if minor not in schemas.SUPPORTED_MINORS:
        return CompatResult(
            CompatStatus.UNVERIFIABLE,
            minor,
            (
                CompatProblem(
                    CompatProblemCode.VERSION_UNVERIFIABLE,
                    "",
                    f"{label(minor)} is outside the schemas' range ({supported_range()}); it cannot be verified.",
                ),
            ),
        )
    key = served_key(minor, served)
    if digest is None:
        try:
            digest = content_hash(manifest)
        except (TypeError, ValueError):
            return _check_minor(manifest, minor, key)
    return _cached(digest, minor, manifest, key)


def _builtin_groups() -> frozenset[str]:
    global _BUILTIN_GROUPS
    if _BUILTIN_GROUPS is None:
        groups = {"extensions"}
        for minor in schemas.SUPPORTED_MINORS:
            groups.update(r.group for r in schemas.api_resources(minor))
        _BUILTIN_GROUPS = frozenset(groups)
    return _BUILTIN_GROUPS


_BUILTIN_GROUPS: frozenset[str] | None = None


def _served(minor: int, served: frozenset | str | None) -> frozenset:
    return served if isinstance(served, frozenset) else served_apis.served_group_versions(minor)


@functools.lru_cache(maxsize=4096)  # a scan of ~600 resources, asked once per manifest and minor
def _replacement(minor: int, group: str, kind: str, served: frozenset | str | None = None) -> str | None:
    enabled = _served(minor, served)
    candidates = [r for r in schemas.api_resources(minor) if r.kind == kind and r.group_version in enabled]
    if not candidates:
        return None
    candidates.sort(key=lambda r: (r.group != group, [-x for x in schemas.version_priority(r.version)], r.group))
    return candidates[0].api_version


def _api_problem(manifest: dict, minor: int, served: frozenset | str | None = None) -> CompatProblem | None | str:
    """A problem when the apiVersion/kind is not served at ``minor``; "unknown" for CRD-like kinds."""
    api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
        return None  # validate_manifest reports the missing field
    group, _ = schemas.split_api_version(api_version)
    replacement = _replacement(minor, group, kind, served)
    if schemas.find_resource(minor, api_version, kind) is not None:
        if api_version in _served(minor, served):
            return None
        message = (
            f"{api_version} {kind} exists in {label(minor)} but is not enabled on this cluster "
            f"(alpha and most beta APIs are off unless the apiserver's --runtime-config turns them on)."
        )
        if replacement:
            message += f" Use {replacement}."
        return CompatProblem(CompatProblemCode.API_NOT_SERVED, "/apiVersion", message, replacement=replacement)
    present = [m for m in schemas.SUPPORTED_MINORS if schemas.find_resource(m, api_version, kind) is not None]
    older = [m for m in present if m < minor]
    newer = [m for m in present if m > minor]
    if older:
        removed = max(older) + 1
        message = f"{api_version} {kind} was removed in {label(removed)}; {label(minor)} does not serve it."
        if replacement:
            message += f" Use {replacement}."
        return CompatProblem(
            CompatProblemCode.API_REMOVED, "/apiVersion", message, removed_in=label(removed), replacement=replacement
        )
    if newer:
        return _not_yet(api_version, kind, minor, min(newer), replacement)
    gone = api_lifecycle.removed_before_schemas(api_version, kind)
    if gone is not None:
        return _removed_before_schemas(api_version, kind, minor, gone, replacement)
    if group in _builtin_groups() and replacement:
        oldest = schemas.SUPPORTED_MINORS[0]
        return CompatProblem(
            CompatProblemCode.API_REMOVED,
            "/apiVersion",
            f"{api_version} {kind} is not served by any version from {label(oldest)} on (removed before "
            f"{label(oldest)}). Use {replacement}.",
            removed_in=f"<{label(oldest)}",
            replacement=replacement,
        )
    return "unknown"


def _not_yet(api_version: str, kind: str, minor: int, first: int, replacement: str | None) -> CompatProblem:
    """An API that first exists in a newer minor. Its ``min_version`` is the first minor whose
    default apiserver serves it (a beta off by default exists before it is served), None when no
    version of the schemas' range does (only --runtime-config turns it on)."""
    served_from = next(
        (m for m in schemas.SUPPORTED_MINORS if m >= first and api_version in served_apis.served_group_versions(m)),
        None,
    )
    message = f"{api_version} {kind} first appears in {label(first)}; {label(minor)} does not serve it yet."
    if served_from is None:
        message += (
            f" No version up to {label(schemas.SUPPORTED_MINORS[-1])} serves it by default "
            "(the apiserver's --runtime-config must turn it on)."
        )
    elif served_from != first:
        message += f" It is served by default from {label(served_from)}."
    if replacement:
        message += f" {label(minor)} serves {kind} as {replacement}."
    return CompatProblem(
        CompatProblemCode.API_NOT_YET,
        "/apiVersion",
        message,
        min_version=label(served_from) if served_from is not None else None,
        available_from=label(first),
        replacement=replacement,
    )


def _removed_before_schemas(
    api_version: str, kind: str, minor: int, gone: tuple[int, str | None], served_replacement: str | None
) -> CompatProblem:
    """A built-in API removed in v1.25 or earlier (``clusters.api_lifecycle``): the release that
    removed it and the migration guide's replacement, when this minor serves it."""
    removed, replacement = gone
    if replacement is not None and replacement != served_replacement:
        replacement = served_replacement  # the guide's is not served here: what this cluster serves instead
    message = f"{api_version} {kind} was removed in {label(removed)}; {label(minor)} does not serve it."
    message += f" Use {replacement}." if replacement else " No API replaces it."
    return CompatProblem(
        CompatProblemCode.API_REMOVED, "/apiVersion", message, removed_in=label(removed), replacement=replacement
    )


def _accepted_from(manifest: dict, minor: int, pointer: str, code: str) -> int | None:
    """The oldest minor newer than ``minor`` whose schema no longer reports (code, pointer)."""
    for newer in schemas.SUPPORTED_MINORS:
        if newer <= minor:
            continue
        problems = schemas.validate_manifest(manifest, newer, strict=True)
        if any(p.code == "unknown_kind" for p in problems):
            continue
        if not any(p.path == pointer and p.code == code for p in problems):
            return newer
    return None


def _check_minor(manifest, minor: int, served: frozenset | str | None = None) -> CompatResult:
    if not isinstance(manifest, dict):
        return CompatResult(
            CompatStatus.INCOMPATIBLE,
            minor,
            (CompatProblem(CompatProblemCode.INVALID, "", "The manifest is not an object."),),
        )
    api = _api_problem(manifest, minor, served)
    if api == "unknown" and served is not None and manifest.get("apiVersion") not in _served(minor, served):
        # a custom resource whose group-version the cluster's discovery does not list: no CRD serves it
        # there (as of the last inventory), and the apply would be answered 404
        return CompatResult(
            CompatStatus.INCOMPATIBLE,
            minor,
            (
                CompatProblem(
                    CompatProblemCode.CRD_NOT_SERVED,
                    "/apiVersion",
                    f"{manifest.get('apiVersion')} {manifest.get('kind')} is not served by this cluster: its discovery "
                    "(read with the last inventory) does not list the group-version. Install its CustomResourceDefinition "
                    "there, or leave the cluster out of the placement.",
                ),
            ),
        )
    if api == "unknown":
        return CompatResult(
            CompatStatus.UNVERIFIABLE,
            minor,
            (
                CompatProblem(
                    CompatProblemCode.UNKNOWN_KIND,
                    "",
                    f"No schema knows {manifest.get('apiVersion')} {manifest.get('kind')} (a custom resource?); "
                    "it cannot be verified.",
                ),
            ),
        )
    if api is not None:
        return CompatResult(CompatStatus.INCOMPATIBLE, minor, (api,))
    problems: list[CompatProblem] = []
    for problem in schemas.validate_manifest(manifest, minor, strict=True):
        if problem.code == "unknown_kind":
            return CompatResult(
                CompatStatus.UNVERIFIABLE, minor, (CompatProblem(CompatProblemCode.UNKNOWN_KIND, "", problem.message),)
            )
        accepted = _accepted_from(manifest, minor, problem.path, problem.code)
        field_path = schemas.pointer_to_field_path(problem.path) if problem.path else "(object)"
        if problem.code == "unknown_field":
            if accepted is not None:
                message = f"{field_path} is not supported by {label(minor)}; it is accepted from {label(accepted)}."
            else:
                message = (
                    f"{field_path} is not a field of {manifest.get('kind')} at {label(minor)} or any newer version."
                )
            problems.append(
                CompatProblem(
                    CompatProblemCode.UNKNOWN_FIELD,
                    problem.path,
                    message,
                    min_version=label(accepted) if accepted is not None else None,
                    fix={"op": "remove", "path": problem.path},
                )
            )
        else:
            message = f"{field_path}: {problem.message}"
            if accepted is not None:
                message += f" (accepted from {label(accepted)})"
            problems.append(
                CompatProblem(
                    CompatProblemCode.INVALID,
                    problem.path,
                    message,
                    min_version=label(accepted) if accepted is not None else None,
                )
            )
    status = CompatStatus.INCOMPATIBLE if problems else CompatStatus.COMPATIBLE
    return CompatResult(status, minor, tuple(problems))


# --- fleets -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompatMatrix:
    """``results[resource][cluster]`` -> CompatResult; ``by_minor[resource][minor]`` the same, deduplicated."""

    resources: list
    clusters: list[str]
    results: dict
    by_minor: dict
    checks: int  # distinct (manifest, minor) evaluations performed or read from cache

    def counts(self) -> dict[str, int]:
        counts = {s: 0 for s in CompatStatus.values}
        for row in self.results.values():
            for result in row.values():
                counts[str(result.status)] += 1
        return counts


def check_fleet(manifests: Mapping, cluster_versions: Mapping[str, str]) -> CompatMatrix:
    """Check every manifest against every cluster, evaluating once per distinct minor."""
    minors: dict[str, int | None] = {name: minor_of(version) for name, version in cluster_versions.items()}
    distinct = sorted({m for m in minors.values() if m is not None})
    results: dict = {}
    by_minor: dict = {}
    checks = 0
    unreadable = {
        name: check_manifest({}, version) for name, version in cluster_versions.items() if minors[name] is None
    }
    for key, manifest in manifests.items():
        try:
            digest = content_hash(manifest)
        except (TypeError, ValueError):
            digest = None
        per_minor = {minor: check_manifest(manifest, minor, digest=digest) for minor in distinct}
        checks += len(per_minor)
        by_minor[key] = per_minor
        results[key] = {
            name: (per_minor[minor] if minor is not None else unreadable[name]) for name, minor in minors.items()
        }
    return CompatMatrix(list(manifests), list(cluster_versions), results, by_minor, checks)
