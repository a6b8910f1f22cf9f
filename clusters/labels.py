"""The label vocabulary, one copy for FedPortal and the fleet simulator: Kubernetes label selectors
(``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``; terms joined by commas,
all must hold), matched against a labels mapping or applied to a queryset's JSON ``labels`` field
(one ORM filter that works on SQLite and PostgreSQL). Keys and values follow Kubernetes' rules
(clusters.validators)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import models
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast

from clusters.validators import label_key_error, label_value_error

EXISTS, NOT_EXISTS, EQUALS, NOT_EQUALS, IN, NOT_IN = "exists", "!exists", "=", "!=", "in", "notin"

_TERM_RE = re.compile(
    r"^\s*(?P<neg>!)?\s*(?P<key>[^\s!=(),]+)\s*"
    r"(?:(?P<op>==|=|!=)\s*(?P<value>[^\s!=(),]*)|\s+(?P<set>in|notin)\s*\((?P<values>[^()]*)\))?\s*$"
)


class SelectorError(ValueError):
    """A selector that cannot be parsed; ``term`` is the offending part, ``str(exc)`` the reason."""

    def __init__(self, message: str, term: str = ""):
        super().__init__(message)
        self.term = term


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels) -> bool:
        labels = labels or {}
        if self.op == EXISTS:
            return self.key in labels
        if self.op == NOT_EXISTS:
            return self.key not in labels
        if self.op in (EQUALS, IN):
            return self.key in labels and labels[self.key] in self.values
        return labels.get(self.key) not in self.values  # != and notin also hold when the key is absent


def split_terms(text: str) -> list[str]:
    """Commas separate terms, except inside ``in (...)``."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part for part in parts if part.strip()]


def parse_selector(text: str | None) -> list[Requirement]:
    """``"env=prod,tier in (web,api),!legacy"`` -> requirements; SelectorError naming the bad term."""
    requirements = []
    for term in split_terms(text or ""):
        match = _TERM_RE.match(term)
        if not match or (match.group("neg") and (match.group("op") or match.group("set"))):
            raise SelectorError(f"{term.strip()!r} is not a label selector term (k=v, k!=v, k in (a,b), k, !k)", term)
        key = match.group("key")
        error = label_key_error(key)
        if match.group("neg"):
            op, values = NOT_EXISTS, ()
        elif match.group("op"):
            op, values = (NOT_EQUALS if match.group("op") == "!=" else EQUALS), (match.group("value"),)
        elif match.group("set"):
            op = IN if match.group("set") == "in" else NOT_IN
            values = tuple(dict.fromkeys(v.strip() for v in match.group("values").split(",") if v.strip()))
        else:
            op, values = EXISTS, ()
        error = error or next((e for e in map(label_value_error, values) if e), None)
        if error:
            raise SelectorError(error, term)
        requirements.append(Requirement(key, op, values))
    return requirements


def matches(labels, requirements) -> bool:
    return all(requirement.matches(labels) for requirement in requirements)


_SELECTOR_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": NOT_EXISTS}


def label_selector_requirements(selector) -> list[Requirement] | None:
    """A metav1.LabelSelector (``matchLabels``, ``matchExpressions``) as requirements; None when it is
    not well formed (the schema, or the apiserver's own check of it, reports that)."""
    if not isinstance(selector, dict):
        return None
    match_labels, expressions = selector.get("matchLabels") or {}, selector.get("matchExpressions") or []
    if not isinstance(match_labels, dict) or not isinstance(expressions, list):
        return None
    requirements = [Requirement(str(key), EQUALS, (value,)) for key, value in match_labels.items()]
    for expression in expressions:
        if not isinstance(expression, dict) or expression.get("operator") not in _SELECTOR_OPERATORS:
            return None
        values = expression.get("values") or []
        if not isinstance(values, list):
            return None
        requirements.append(
            Requirement(str(expression.get("key")), _SELECTOR_OPERATORS[expression["operator"]], tuple(values))
        )
    return requirements


def filter_labels(queryset, requirements, *, field: str = "labels"):
    """``queryset`` narrowed to rows whose JSON ``field`` satisfies every requirement. Values are
    compared as text (Cast), which SQLite and PostgreSQL agree on (a bare key transform compares JSON,
    which SQLite cannot for a plain string)."""
    for index, requirement in enumerate(requirements):
        key = requirement.key
        has_key = models.Q(**{f"{field}__has_key": key})
        if requirement.op == EXISTS:
            queryset = queryset.filter(has_key)
            continue
        if requirement.op == NOT_EXISTS:
            queryset = queryset.exclude(has_key)
            continue
        alias = f"_label_{index}"
        queryset = queryset.alias(**{alias: Cast(KeyTextTransform(key, field), models.CharField())})
        in_values = models.Q(**{f"{alias}__in": requirement.values})
        if requirement.op in (EQUALS, IN):
            queryset = queryset.filter(has_key & in_values)
        else:  # != / notin: rows without the key match too
            queryset = queryset.exclude(has_key & in_values)
    return queryset
