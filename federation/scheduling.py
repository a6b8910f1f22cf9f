"""ReplicaSchedulingPreference: KubeFed's replica planner as a pure, deterministic function.

Stored shape (KubeFed's RSP spec, minus targetKind)::

    {"totalReplicas": 10, "rebalance": true, "intersectWithClusterSelector": false,
     "clusters": {"c1": {"weight": 2}, "*": {"weight": 1, "minReplicas": 0, "maxReplicas": 5}}}

The algorithm follows kubefed/pkg/controller/util/planner: only clusters that have a preference
(their own entry or the ``*`` wildcard) take part; clusters are ordered by weight (descending)
then by a stable FNV-1 hash of the cluster and the resource key; each gets its minReplicas first;
the rest is handed out in rounds proportional to weight, rounding up, capped by maxReplicas and
by estimated capacity; without ``rebalance`` replicas already running stay where they are as far
as the plan allows.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

WILDCARD = "*"
MAX_TOTAL_REPLICAS = 1_000_000


class SchedulingError(ValueError):
    """A preference that cannot be understood; the message names the bad part."""


@dataclass(frozen=True)
class ClusterPreference:
    weight: int = 0
    min_replicas: int = 0
    max_replicas: int | None = None


@dataclass(frozen=True)
class Preference:
    total_replicas: int
    clusters: Mapping[str, ClusterPreference]
    rebalance: bool = False
    intersect_with_cluster_selector: bool = False


def _int(value, where: str, *, minimum: int = 0, maximum: int = MAX_TOTAL_REPLICAS) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SchedulingError(f"{where} must be a whole number, got {value!r}.")
    if value < minimum or value > maximum:
        raise SchedulingError(f"{where} must be between {minimum} and {maximum}, got {value}.")
    return value


def normalize_preference(raw) -> dict | None:
    """Validate the stored shape; ``None``/empty means no replica scheduling."""
    if raw in (None, {}):
        return None
    if not isinstance(raw, Mapping):
        raise SchedulingError("The replica scheduling preference must be a mapping.")
    unknown = set(raw) - {"totalReplicas", "rebalance", "intersectWithClusterSelector", "clusters", "targetKind"}
    if unknown:
        raise SchedulingError(f"Replica scheduling: unknown field {sorted(unknown)[0]!r}.")
    total = _int(raw.get("totalReplicas"), "totalReplicas")
    for flag in ("rebalance", "intersectWithClusterSelector"):
        if flag in raw and not isinstance(raw[flag], bool):
            raise SchedulingError(f"{flag} must be true or false.")
    clusters = raw.get("clusters") or {}
    if not isinstance(clusters, Mapping):
        raise SchedulingError("clusters must map cluster names (or '*') to weight/minReplicas/maxReplicas.")
    normalised = {}
    for name, pref in sorted(clusters.items()):
        if not isinstance(name, str) or not name.strip():
            raise SchedulingError("Every cluster preference needs a cluster name or '*'.")
        pref = pref or {}
        if not isinstance(pref, Mapping):
            raise SchedulingError(f"The preference for {name!r} must be a mapping.")
        extra = set(pref) - {"weight", "minReplicas", "maxReplicas"}
        if extra:
            raise SchedulingError(f"The preference for {name!r}: unknown field {sorted(extra)[0]!r}.")
        item = {
            "weight": _int(pref.get("weight", 0), f"{name}.weight"),
            "minReplicas": _int(pref.get("minReplicas", 0), f"{name}.minReplicas"),
        }
        if pref.get("maxReplicas") is not None:
            item["maxReplicas"] = _int(pref["maxReplicas"], f"{name}.maxReplicas")
            if item["maxReplicas"] < item["minReplicas"]:
                raise SchedulingError(f"{name}: maxReplicas ({item['maxReplicas']}) is below minReplicas ({item['minReplicas']}).")
        normalised[name.strip()] = item
    return {
        "totalReplicas": total,
        "rebalance": bool(raw.get("rebalance", False)),
        "intersectWithClusterSelector": bool(raw.get("intersectWithClusterSelector", False)),
        "clusters": normalised,
    }


def to_preference(data: Mapping) -> Preference:
    return Preference(
        total_replicas=data["totalReplicas"],
        rebalance=data.get("rebalance", False),
        intersect_with_cluster_selector=data.get("intersectWithClusterSelector", False),
        clusters={
            name: ClusterPreference(p.get("weight", 0), p.get("minReplicas", 0), p.get("maxReplicas"))
            for name, p in (data.get("clusters") or {}).items()
        },
    )


def _fnv32(text: str) -> int:
    """FNV-1 32-bit, as Go's hash/fnv New32 (what KubeFed uses to break weight ties)."""
    value = 0x811C9DC5
    for byte in text.encode():
        value = (value * 0x01000193) & 0xFFFFFFFF
        value ^= byte
    return value


def preference_for(preference: Preference, cluster: str) -> ClusterPreference | None:
    if cluster in preference.clusters:
        return preference.clusters[cluster]
    return preference.clusters.get(WILDCARD)


def participating_clusters(preference: Preference, available: Iterable[str]) -> list[str]:
    return sorted(name for name in set(available) if preference_for(preference, name) is not None)


def plan_replicas(
    preference: Preference,
    available_clusters: Iterable[str],
    *,
    key: str = "",
    current: Mapping[str, int] | None = None,
    capacity: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Replicas per cluster. ``available_clusters`` must already be the Ready, non-isolated ones.

    Every participating cluster appears in the result (possibly with 0). The sum equals
    ``totalReplicas`` unless maxReplicas/capacity make that impossible (then it is the most
    that fits). Same inputs, same answer.
    """
    capacity = capacity or {}
    current = current or {}
    prefs = []
    for name in sorted(set(available_clusters)):
        pref = preference_for(preference, name)
        if pref is not None:
            prefs.append((name, pref))
    prefs.sort(key=lambda item: (-item[1].weight, _fnv32(key + item[0]), item[0]))
    ordered = list(prefs)

    remaining = preference.total_replicas
    plan: dict[str, int] = {}
    for name, pref in prefs:
        minimum = min(pref.min_replicas, remaining)
        if pref.max_replicas is not None:
            minimum = min(minimum, pref.max_replicas)
        if name in capacity:
            minimum = min(minimum, capacity[name])
        remaining -= minimum
        plan[name] = minimum

    active = list(prefs)
    modified = True
    while modified and remaining > 0:
        modified = False
        weight_sum = sum(pref.weight for _, pref in active)
        if weight_sum <= 0:
            break
        next_active = []
        distribute = remaining
        for name, pref in active:
            start = plan[name]
            extra = min((distribute * pref.weight + weight_sum - 1) // weight_sum, remaining)
            total = start + extra
            if pref.max_replicas is not None and total > pref.max_replicas:
                total = pref.max_replicas
            if name in capacity and total > capacity[name]:
                total = capacity[name]
            if total > start:
                plan[name] = total
                remaining -= total - start
                modified = True
            limit = pref.max_replicas if pref.max_replicas is not None else None
            if name in capacity:
                limit = capacity[name] if limit is None else min(limit, capacity[name])
            if pref.weight > 0 and (limit is None or plan[name] < limit):
                next_active.append((name, pref))
        active = next_active

    if preference.rebalance or not current:
        return plan

    # No rebalance: keep replicas where they already run as far as bounds and the total allow,
    # then top clusters up towards the plan.
    kept: dict[str, int] = {}
    for name, pref in ordered:
        replicas = max(int(current.get(name, 0)), 0)
        if pref.max_replicas is not None:
            replicas = min(replicas, pref.max_replicas)
        if name in capacity:
            replicas = min(replicas, capacity[name])
        kept[name] = replicas
    if sum(kept.values()) > preference.total_replicas:
        return plan
    remaining = preference.total_replicas - sum(kept.values())
    for name, _ in ordered:
        extra = min(max(plan[name] - kept[name], 0), remaining)
        kept[name] += extra
        remaining -= extra
    return kept


def max_schedulable(preference: Preference, available_clusters: Iterable[str], capacity: Mapping[str, int] | None = None) -> int | None:
    """The most replicas the bounds allow, or None when unbounded."""
    capacity = capacity or {}
    total = 0
    for name in participating_clusters(preference, available_clusters):
        pref = preference_for(preference, name)
        limit = pref.max_replicas
        if name in capacity:
            limit = capacity[name] if limit is None else min(limit, capacity[name])
        if pref.weight == 0:
            limit = pref.min_replicas if limit is None else min(pref.min_replicas, limit)
        elif limit is None:
            return None
        total += limit
    return total
