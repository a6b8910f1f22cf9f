"""Why the replica planner gave each cluster what it did, in words. Pure: no ORM.

``explain`` runs ``scheduling.plan`` (and, to name what capacity moved where, the same plan
without capacity) and returns one ``ClusterSchedule`` per available cluster.
"""

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from federation.scheduling import (
    effective_clusters,
    normalize_preference,
    plan,
    preference_for,
    scheduled_replicas,
)


@dataclass
class ClusterSchedule:
    cluster: str
    weight: int | None  # None: no preference for this cluster
    min_replicas: int | None
    max_replicas: int | None
    current: int | None
    capacity: int | None
    planned: int
    overflow: int
    replicas: int  # what is applied: planned plus overflow, as KubeFed writes it
    reason: str

    def as_dict(self) -> dict:
        return asdict(self)


def capacity_reason(name: str, limit: int, moved: int, receivers: list[str]) -> str:
    if moved <= 0:
        return f"capacity {limit}"
    if receivers:
        return f"capacity {limit}: {moved} moved to {', '.join(receivers)}"
    return f"capacity {limit}: {moved} could not be placed on another cluster"


def explain(
    spec: Mapping,
    clusters: Iterable[str],
    *,
    key: str,
    current: Mapping[str, int] | None = None,
    capacity: Mapping[str, int] | None = None,
) -> list[ClusterSchedule]:
    names = list(dict.fromkeys(clusters))
    current = dict(current or {})
    capacity = dict(capacity or {})
    data = normalize_preference(spec)
    prefs = effective_clusters(data)
    replicas, overflow = plan(spec, names, key=key, current=current, capacity=capacity)
    uncapped = plan(spec, names, key=key, current=current)[0] if capacity else replicas
    applied = scheduled_replicas(replicas, overflow)
    weight_sum = sum((preference_for(prefs, n) or {}).get("weight", 0) for n in names)
    rows = []
    for name in sorted(names):
        pref = preference_for(prefs, name)
        planned = replicas[name]
        if pref is None:
            rows.append(
                ClusterSchedule(
                    name,
                    None,
                    None,
                    None,
                    current.get(name),
                    capacity.get(name),
                    planned,
                    overflow.get(name, 0),
                    applied[name],
                    f"no preference for {name} and no '*': 0 replicas (kept in the placement)",
                )
            )
            continue
        weight, minimum, maximum = pref.get("weight", 0), pref.get("minReplicas", 0), pref.get("maxReplicas")
        reasons = []
        if data["totalReplicas"] == 0:
            reasons.append("totalReplicas is 0")
        total = data["totalReplicas"]
        if minimum and planned >= min(minimum, capacity.get(name, minimum), total):
            # the planner's minimums pass gives at most what is left of totalReplicas
            reasons.append(
                f"minReplicas {minimum} first, capped at totalReplicas {total}"
                if minimum > total and planned == total
                else f"minReplicas {minimum} first"
            )
        elif minimum and planned and planned < min(minimum, capacity.get(name, minimum)):
            reasons.append(f"minReplicas {minimum}: {planned} left after clusters that sort first")
        running = current.get(name) or 0
        kept = min(running, planned)
        if not data["rebalance"] and kept > 0:
            reasons.append(
                f"kept {kept} running (rebalance off)"
                if kept == running
                else f"kept {kept} of {running} running (rebalance off)"
            )
        elif data["rebalance"] and running and running > planned:
            reasons.append(f"{running - planned} of {running} running moved (rebalance on)")
        if maximum is not None and planned == maximum and maximum < data["totalReplicas"]:
            reasons.append(f"capped at maxReplicas {maximum}")
        if name in capacity and (planned < uncapped[name] or overflow.get(name)):
            moved = max(uncapped[name] - planned, 0)
            receivers = sorted(n for n in names if replicas[n] > uncapped[n])
            reasons.append(capacity_reason(name, capacity[name], moved, receivers))
        if overflow.get(name):
            reasons.append(f"overflow {overflow[name]} asked for on top, in case capacity frees up")
        if not reasons:
            if weight == 0:
                reasons.append("weight 0 and no minReplicas")
            elif planned:
                reasons.append(f"weight {weight} of {weight_sum}")
            else:
                reasons.append(f"weight {weight} of {weight_sum}: nothing left after clusters that sort first")
        rows.append(
            ClusterSchedule(
                name,
                weight,
                minimum,
                maximum,
                current.get(name),
                capacity.get(name),
                planned,
                overflow.get(name, 0),
                applied[name],
                "; ".join(reasons),
            )
        )
    return rows
