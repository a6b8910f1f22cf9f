"""ReplicaSchedulingPreference: KubeFed's replica planner as a pure, deterministic function.

Stored shape (KubeFed's RSP spec, minus targetKind)::

    {"totalReplicas": 10, "rebalance": true, "intersectWithClusterSelector": false,
     "clusters": {"c1": {"weight": 2}, "*": {"weight": 1, "minReplicas": 0, "maxReplicas": 5}}}

``plan`` is kubefed/pkg/controller/util/planner's Planner.Plan, step for step (see its
docstring); federation/scheduling_explain.py says in words why each cluster got what; federation/schedule.py
feeds both from the database (current replicas, capacity, the FederatedNamespace).
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

WILDCARD = "*"
MAX_TOTAL_REPLICAS = 1_000_000


class SchedulingError(ValueError):
    """A preference that cannot be understood; the message names the bad part."""


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
                raise SchedulingError(
                    f"{name}: maxReplicas ({item['maxReplicas']}) is below minReplicas ({item['minReplicas']})."
                )
        normalised[name.strip()] = item
    return {
        "totalReplicas": total,
        "rebalance": bool(raw.get("rebalance", False)),
        "intersectWithClusterSelector": bool(raw.get("intersectWithClusterSelector", False)),
        "clusters": normalised,
    }


def fnv32(text: str) -> int:
    """FNV-1 32-bit, as Go's hash/fnv New32 (what KubeFed uses to break weight ties)."""
    value = 0x811C9DC5
    for byte in text.encode():
        value = (value * 0x01000193) & 0xFFFFFFFF
        value ^= byte
    return value


def effective_clusters(spec: Mapping) -> dict:
    """The per-cluster preferences KubeFed schedules with: an RSP without ``clusters`` means
    ``{"*": {"weight": 1}}`` (KubeFed's ReplicaScheduler.GetSchedulingResult defaulting)."""
    return dict(spec.get("clusters") or {WILDCARD: {"weight": 1}})


def preference_for(clusters: Mapping, cluster: str) -> Mapping | None:
    """The cluster's own preference, else the ``*`` one, else None (no preference: 0 replicas)."""
    if cluster in clusters:
        return clusters[cluster]
    return clusters.get(WILDCARD)


@dataclass
class _Entry:
    name: str
    weight: int
    min_replicas: int
    max_replicas: int | None
    order: tuple


def plan(
    spec: Mapping,
    clusters: Iterable[str],
    *,
    key: str,
    current: Mapping[str, int] | None = None,
    capacity: Mapping[str, int] | None = None,
) -> tuple[dict[str, int], dict[str, int]]:
    """KubeFed's replica planner (pkg/controller/util/planner) as a plain function.

    ``spec`` is the RSP spec as written (``totalReplicas``, ``rebalance``, ``clusters`` with
    weight/minReplicas/maxReplicas per name or ``*``); ``clusters`` the available cluster names;
    ``key`` the resource's ``namespace/name``; ``current`` the replicas running per cluster;
    ``capacity`` the estimated capacity per cluster. Returns ``(replicas, overflow)``: replicas
    per available cluster (0 for clusters without a preference) and, per cluster whose capacity
    was exceeded, how many more it would have been given (with rebalance off, trimmed to what
    could not be placed anywhere else).

    The steps are KubeFed's: order by weight (descending), then by FNV-32 of cluster name
    followed by key; hand each its minReplicas (capped by capacity); with rebalance off, reserve
    the replicas already running (capped by maxReplicas and capacity); then rounds proportional
    to weight, rounding up, capped by maxReplicas and capacity, until nothing changes.
    """
    data = normalize_preference(spec)
    if data is None:
        raise SchedulingError("A replica scheduling preference needs totalReplicas.")
    prefs = effective_clusters(data)
    current = current or {}
    capacity = capacity or {}
    rebalance = data["rebalance"]

    replicas: dict[str, int] = {}
    overflow: dict[str, int] = {}
    entries: list[_Entry] = []
    for name in dict.fromkeys(clusters):  # the given order, duplicates dropped
        pref = preference_for(prefs, name)
        if pref is None:
            replicas[name] = 0
            continue
        entries.append(
            _Entry(
                name,
                pref.get("weight", 0),
                pref.get("minReplicas", 0),
                pref.get("maxReplicas"),
                (-pref.get("weight", 0), fnv32(name + key)),
            )
        )
    entries.sort(key=lambda entry: entry.order)

    remaining = data["totalReplicas"]
    for entry in entries:  # minimums first
        share = min(entry.min_replicas, remaining)
        if entry.name in capacity:
            share = min(share, capacity[entry.name])
        remaining -= share
        replicas[entry.name] = share

    preallocated: dict[str, int] = {}
    if not rebalance:  # what already runs is reserved before the rounds
        for entry in entries:
            planned = replicas[entry.name]
            count = current.get(entry.name)
            if count is not None and count > planned:
                target = count
                if entry.max_replicas is not None:
                    target = min(entry.max_replicas, target)
                if entry.name in capacity:
                    target = min(capacity[entry.name], target)
                extra = max(min(target - planned, remaining), 0)
                remaining -= extra
                preallocated[entry.name] = extra
                replicas[entry.name] = planned + extra

    active = entries
    modified = True
    while modified and remaining > 0:
        modified = False
        weight_sum = sum(entry.weight for entry in active)
        if weight_sum <= 0:
            break
        still_open = []
        distribute = remaining
        for entry in active:
            start = replicas[entry.name]
            extra = min((distribute * entry.weight + weight_sum - 1) // weight_sum, remaining)
            used = min(extra, preallocated.get(entry.name, 0))  # the reserved replicas count first
            preallocated[entry.name] = preallocated.get(entry.name, 0) - used
            extra -= used
            if used > 0:
                modified = True
            total = start + extra
            full = False
            if entry.max_replicas is not None and total > entry.max_replicas:
                total, full = entry.max_replicas, True
            if entry.name in capacity and total > capacity[entry.name]:
                overflow[entry.name] = total - capacity[entry.name]
                total, full = capacity[entry.name], True
            if not full:
                still_open.append(entry)
            remaining -= total - start
            replicas[entry.name] = total
            if total > start:
                modified = True
        active = still_open

    if not rebalance:  # only what could not be placed anywhere stays overflow
        overflow = {name: min(value, remaining) for name, value in overflow.items() if min(value, remaining) > 0}
    return replicas, overflow


def scheduled_replicas(replicas: Mapping[str, int], overflow: Mapping[str, int]) -> dict[str, int]:
    """What KubeFed writes as each cluster's spec.replicas override: planned plus overflow
    (ReplicaScheduler.schedule), so a cluster that frees capacity picks the overflow up."""
    return {name: count + overflow.get(name, 0) for name, count in replicas.items()}
