"""Rollout strategies: the ordered waves a change goes through. Pure: no ORM.

Stored shape (``spec.rolloutStrategy`` in fedctl YAML, ``FederatedResource.rollout_strategy``,
or a change request's override), normalised::

    {"autoRollback": bool | None,     # None (not given): on when a target is labelled env=prod
     "waves": [{"name": "canary",
                "clusterSelector": {"matchLabels": {...}}   # or "clusters": ["a", "b"]
                "maxParallel": 1 | "25%",                   # default: all the wave's clusters at once
                "bakeSeconds": 60,                           # default 0
                "maxFailures": 0,                            # default 0
                "progressDeadlineSeconds": 600,              # optional: overrides the Deployment's own
                "requireApproval": false}]}

Wave assignment: a cluster goes in the first wave that selects it; a target no wave selects goes in
a final implicit wave named ``rest``. No strategy (``{}``) is one wave with every target, sent at
once: what propagation did before strategies existed.
"""

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from federation.placement import PlacementError, normalize_selector, selector_matches

WAVE_FIELDS = {
    "name",
    "clusterSelector",
    "clusters",
    "maxParallel",
    "bakeSeconds",
    "maxFailures",
    "progressDeadlineSeconds",
    "requireApproval",
}
IMPLICIT_WAVE = "rest"
MAX_WAVES = 20
_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?")  # fullmatch: "$" would let a final newline in
_PERCENT_RE = re.compile(r"(\d{1,3})%")
DEFAULT_PROGRESS_DEADLINE = 600  # seconds, Kubernetes' default spec.progressDeadlineSeconds


class StrategyError(ValueError):
    """A strategy that cannot be used; the message names the bad part."""


MAX_WHOLE = 2**31 - 1  # Kubernetes' int32 fields (progressDeadlineSeconds), and the columns the waves keep them in


def _whole(value, where: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise StrategyError(f"{where} must be a whole number, not {value!r}.")
    if value < minimum:
        raise StrategyError(f"{where} must be {minimum} or more, not {value}.")
    if value > MAX_WHOLE:
        raise StrategyError(f"{where} must be at most {MAX_WHOLE}, not {value}.")
    return value


def _max_parallel(value, where: str):
    if isinstance(value, str):
        match = _PERCENT_RE.fullmatch(value.strip())
        if not match or not 1 <= int(match.group(1)) <= 100:
            raise StrategyError(f'{where} must be a count (1 or more) or a percentage like "25%", not {value!r}.')
        return f"{int(match.group(1))}%"
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WHOLE:
        raise StrategyError(f'{where} must be a count (1 to {MAX_WHOLE}) or a percentage like "25%", not {value!r}.')
    return value


def normalize_strategy(raw) -> dict:
    """Validate a strategy and return it in canonical form; ``{}`` (none) for None or an empty mapping."""
    if raw is None or raw == {}:
        return {}
    if not isinstance(raw, Mapping):
        raise StrategyError("rolloutStrategy must be a mapping with autoRollback and waves.")
    unknown = set(raw) - {"autoRollback", "waves"}
    if unknown:
        raise StrategyError(f"rolloutStrategy: unknown field {sorted(unknown)[0]!r}.")
    auto = raw.get("autoRollback")  # None: on when the rollout reaches an env=prod cluster (auto_rollback_for)
    if auto is not None and not isinstance(auto, bool):
        raise StrategyError(f"rolloutStrategy.autoRollback must be true or false, not {auto!r}.")
    waves = raw.get("waves")
    if not isinstance(waves, list) or not waves:
        raise StrategyError("rolloutStrategy.waves must be a non-empty list of waves.")
    if len(waves) > MAX_WAVES:
        raise StrategyError(f"rolloutStrategy.waves: at most {MAX_WAVES} waves, not {len(waves)}.")
    seen: set[str] = set()
    out = []
    for index, wave in enumerate(waves):
        where = f"waves[{index}]"
        if not isinstance(wave, Mapping):
            raise StrategyError(f"{where} must be a mapping with name and clusterSelector or clusters.")
        unknown = set(wave) - WAVE_FIELDS
        if unknown:
            raise StrategyError(f"{where}: unknown field {sorted(unknown)[0]!r}.")
        name = wave.get("name")
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise StrategyError(f"{where}.name must be lower-case letters, digits and '-' (at most 40), not {name!r}.")
        if name in seen or name == IMPLICIT_WAVE:
            raise StrategyError(
                f"{where}.name {name!r} is used twice"
                if name in seen
                else f"{where}.name {name!r} is reserved for the implicit last wave."
            )
        seen.add(name)
        where = f"wave {name}"
        entry: dict = {"name": name}
        if "clusters" in wave and wave["clusters"] is not None:
            clusters = wave["clusters"]
            if not isinstance(clusters, list) or not all(isinstance(c, str) and c for c in clusters):
                raise StrategyError(f"{where}: clusters must be a list of cluster names.")
            entry["clusters"] = sorted(set(clusters))
        elif "clusterSelector" in wave:
            try:
                entry["clusterSelector"] = normalize_selector(wave["clusterSelector"])
            except PlacementError as exc:
                raise StrategyError(f"{where}: {exc}") from exc
        else:
            raise StrategyError(f"{where}: give clusterSelector or clusters.")
        if wave.get("maxParallel") is not None:
            entry["maxParallel"] = _max_parallel(wave["maxParallel"], f"{where}: maxParallel")
        entry["bakeSeconds"] = _whole(wave.get("bakeSeconds", 0), f"{where}: bakeSeconds")
        entry["maxFailures"] = _whole(wave.get("maxFailures", 0), f"{where}: maxFailures")
        if wave.get("progressDeadlineSeconds") is not None:
            entry["progressDeadlineSeconds"] = _whole(
                wave["progressDeadlineSeconds"], f"{where}: progressDeadlineSeconds", minimum=1
            )
        approval = wave.get("requireApproval", False)
        if not isinstance(approval, bool):
            raise StrategyError(f"{where}: requireApproval must be true or false, not {approval!r}.")
        entry["requireApproval"] = approval
        out.append(entry)
    return {"autoRollback": auto, "waves": out}


def auto_rollback_for(strategy: Mapping, targets: Mapping[str, Mapping[str, str]]) -> bool:
    """The strategy's switch; when it does not say, on for a rollout that reaches env=prod."""
    if strategy.get("autoRollback") is not None:
        return bool(strategy["autoRollback"])
    return any((labels or {}).get("env") == "prod" for labels in targets.values())


@dataclass
class WavePlan:
    """One wave of a rollout: its settings and the clusters it sends the change to, in order."""

    name: str
    clusters: list[str]
    max_parallel: int
    bake_seconds: int = 0
    max_failures: int = 0
    progress_deadline: int | None = None  # None: each Deployment's own spec.progressDeadlineSeconds
    require_approval: bool = False
    settings: dict = field(default_factory=dict)


def parallel_count(max_parallel, size: int) -> int:
    """How many of a wave's ``size`` clusters may be applied at once: a count, or a percentage of
    the wave rounded up (at least one), as Kubernetes rounds maxSurge."""
    if size <= 0:
        return 1
    if max_parallel is None:
        return size
    if isinstance(max_parallel, str):
        return max(1, math.ceil(size * int(max_parallel.rstrip("%")) / 100))
    return max(1, min(int(max_parallel), size))


def assign_waves(strategy: Mapping, targets: Mapping[str, Mapping[str, str]]) -> list[WavePlan]:
    """Split ``targets`` (cluster name -> labels) into waves: earlier waves win, unmatched targets
    go in a final implicit wave, waves left empty are dropped. No strategy: one wave of everything."""
    names = sorted(targets)
    if not strategy or not strategy.get("waves"):
        return [WavePlan(IMPLICIT_WAVE, names, max_parallel=max(1, len(names)))] if names else []
    left = list(names)
    plans = []
    for wave in strategy["waves"]:
        if "clusters" in wave:
            wanted = set(wave["clusters"])
            chosen = [n for n in left if n in wanted]
        else:
            chosen = [n for n in left if selector_matches(wave.get("clusterSelector") or {}, targets[n] or {})]
        if not chosen:
            continue
        left = [n for n in left if n not in set(chosen)]
        plans.append(
            WavePlan(
                wave["name"],
                chosen,
                max_parallel=parallel_count(wave.get("maxParallel"), len(chosen)),
                bake_seconds=wave.get("bakeSeconds", 0),
                max_failures=wave.get("maxFailures", 0),
                progress_deadline=wave.get("progressDeadlineSeconds"),
                require_approval=wave.get("requireApproval", False),
                settings=dict(wave),
            )
        )
    if left:
        plans.append(WavePlan(IMPLICIT_WAVE, left, max_parallel=len(left)))
    return plans
