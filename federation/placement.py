"""KubeFed placement rules. Pure: no ORM.

Stored shape (KubeFed's own, normalised)::

    {"clusters": ["a", "b"]}                                     explicit list
    {"clusterSelector": {"matchLabels": {...}, "matchExpressions": [...]}}
    {}                                                           neither: not propagated

Rules: an explicit ``clusters`` list wins over ``clusterSelector``; an empty list selects none;
an empty selector selects all; neither set means the resource is not propagated.
"""

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY_RE = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}\Z")
_LABEL_VALUE_RE = re.compile(rf"^({_NAME})?\Z")


class PlacementError(ValueError):
    """A placement that cannot be understood; the message names the bad part."""


@dataclass(frozen=True)
class ClusterRef:
    """What placement needs to know about a cluster."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


def _check_key(key, where: str) -> None:
    if not isinstance(key, str) or len(key) > 316 or not _LABEL_KEY_RE.match(key):
        raise PlacementError(f"{where}: {key!r} is not a valid label key.")
    if "/" in key and len(key.split("/", 1)[0]) > 253:
        raise PlacementError(f"{where}: the prefix of {key!r} is longer than 253 characters.")


def _check_value(value, where: str) -> None:
    if isinstance(value, (bool, int, float)):
        # YAML read an unquoted true, yes, on, 1.30 or 010 as a boolean or a number: Python's repr
        # (True) is not what the user typed, and neither is the number's text (1.3, 8), so the
        # advice is the quotes, around the value as meant
        what = "a boolean" if isinstance(value, bool) else "a number"
        raise PlacementError(
            f"{where}: a label value is text, and YAML read this one as {what} ({json.dumps(value)}). "
            "Put the value in quotes as you meant it."
        )
    if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE_RE.match(value):
        raise PlacementError(f"{where}: {value!r} is not a valid label value.")


def normalize_selector(selector) -> dict:
    """Validate a label selector and return it in canonical form (sorted, no empty parts)."""
    if selector is None:
        selector = {}
    if not isinstance(selector, Mapping):
        raise PlacementError("clusterSelector must be a mapping with matchLabels and/or matchExpressions.")
    unknown = set(selector) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise PlacementError(f"clusterSelector: unknown field {sorted(unknown)[0]!r}.")
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise PlacementError("clusterSelector.matchLabels must be a mapping of label to value.")
    for key, value in match_labels.items():
        _check_key(key, "matchLabels")
        _check_value(value, f"matchLabels[{key}]")
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise PlacementError("clusterSelector.matchExpressions must be a list.")
    normalised = []
    for index, expression in enumerate(expressions):
        where = f"matchExpressions[{index}]"
        if not isinstance(expression, Mapping):
            raise PlacementError(f"{where} must be a mapping with key, operator and values.")
        unknown = set(expression) - {"key", "operator", "values"}
        if unknown:
            raise PlacementError(f"{where}: unknown field {sorted(unknown)[0]!r}.")
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values")
        _check_key(key, where)
        if operator not in OPERATORS:
            raise PlacementError(f"{where}: operator {operator!r} is not one of {', '.join(OPERATORS)}.")
        if operator in ("In", "NotIn"):
            if not isinstance(values, list) or not values:
                raise PlacementError(f"{where}: operator {operator} needs a non-empty list of values.")
            for value in values:
                _check_value(value, f"{where}.values")
            item = {"key": key, "operator": operator, "values": sorted(set(values))}
        else:
            if values:
                raise PlacementError(f"{where}: operator {operator} takes no values.")
            item = {"key": key, "operator": operator}
        normalised.append(item)
    result = {}
    if match_labels:
        result["matchLabels"] = dict(sorted(match_labels.items()))
    if normalised:
        result["matchExpressions"] = normalised
    return result


def normalize_placement(placement) -> dict:
    """Validate a placement (KubeFed shape; cluster entries may be names or ``{"name": ...}``)."""
    if placement is None:
        return {}
    if not isinstance(placement, Mapping):
        raise PlacementError("placement must be a mapping with clusters and/or clusterSelector.")
    unknown = set(placement) - {"clusters", "clusterSelector"}
    if unknown:
        raise PlacementError(f"placement: unknown field {sorted(unknown)[0]!r}.")
    result = {}
    if "clusters" in placement and placement["clusters"] is not None:
        clusters = placement["clusters"]
        if not isinstance(clusters, list):
            raise PlacementError("placement.clusters must be a list of cluster names.")
        names = []
        for index, entry in enumerate(clusters):
            name = entry.get("name") if isinstance(entry, Mapping) else entry
            if not isinstance(name, str) or not name.strip():
                raise PlacementError(f"placement.clusters[{index}] has no cluster name.")
            name = name.strip()
            if name not in names:
                names.append(name)
        result["clusters"] = sorted(names)
    if "clusterSelector" in placement and placement["clusterSelector"] is not None:
        result["clusterSelector"] = normalize_selector(placement["clusterSelector"])
    return result


def selector_matches(selector: Mapping, labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics; an empty selector matches everything."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        present = key in labels
        if operator == "In" and not (present and labels[key] in expression["values"]):
            return False
        if operator == "NotIn" and present and labels[key] in expression["values"]:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def is_propagated(placement: Mapping) -> bool:
    return placement.get("clusters") is not None or placement.get("clusterSelector") is not None


def select_clusters(placement: Mapping, clusters: Iterable[ClusterRef], *, selector_only: bool = False) -> list[str]:
    """Names of the clusters a (normalised) placement selects, sorted.

    An explicit list names clusters directly, whether or not they are registered; callers decide
    what an unknown name means (a form error, or a status row). ``selector_only`` is KubeFed's
    ``selectorOnly`` (how intersectWithClusterSelector reads a placement): the list is ignored,
    and a placement without ``clusterSelector`` selects nothing.
    """
    if selector_only:
        if placement.get("clusterSelector") is None:
            return []
        return sorted(c.name for c in clusters if selector_matches(placement["clusterSelector"], c.labels or {}))
    if placement.get("clusters") is not None:
        return sorted(placement["clusters"])
    if placement.get("clusterSelector") is not None:
        selector = placement["clusterSelector"]
        return sorted(c.name for c in clusters if selector_matches(selector, c.labels or {}))
    return []


def unknown_clusters(placement: Mapping, known: Iterable[str]) -> list[str]:
    known = set(known)
    return [name for name in placement.get("clusters") or [] if name not in known]


def describe_placement(placement: Mapping) -> str:
    """A short human summary for tables."""
    if placement.get("clusters") is not None:
        names = placement["clusters"]
        return ", ".join(names) if names else "no clusters (empty list)"
    if placement.get("clusterSelector") is not None:
        selector = placement["clusterSelector"]
        parts = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
        for expr in selector.get("matchExpressions") or []:
            values = ",".join(expr.get("values", []))
            parts.append(
                f"{expr['key']} {expr['operator']} ({values})" if values else f"{expr['operator']} {expr['key']}"
            )
        return "selector: " + "; ".join(parts) if parts else "all clusters (empty selector)"
    return "not propagated"
