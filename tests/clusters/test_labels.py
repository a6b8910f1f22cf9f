"""clusters.labels: the one label-selector vocabulary (parser, matcher, ORM filter)."""

import pytest

from clusters.labels import (
    EQUALS,
    EXISTS,
    IN,
    NOT_EQUALS,
    NOT_EXISTS,
    NOT_IN,
    Requirement,
    SelectorError,
    matches,
    parse_selector,
)
from clusters.models import Cluster
from tests.clusters.factories import ClusterFactory


def test_parse_every_operator():
    assert parse_selector("env=prod, tier==web,zone!=a, region in (eu, us), size notin (xl), team, !legacy") == [
        Requirement("env", EQUALS, ("prod",)),
        Requirement("tier", EQUALS, ("web",)),
        Requirement("zone", NOT_EQUALS, ("a",)),
        Requirement("region", IN, ("eu", "us")),
        Requirement("size", NOT_IN, ("xl",)),
        Requirement("team", EXISTS),
        Requirement("legacy", NOT_EXISTS),
    ]
    assert parse_selector("") == [] and parse_selector(None) == []


@pytest.mark.parametrize(
    ("text", "term"),
    [
        ("env=pr od", "env=pr od"),
        ("=x", "=x"),
        ("a in (", "a in ("),
        ("!a=b", "!a=b"),
        ("-x=y", "-x=y"),
        ("env=" + "v" * 64, "env=" + "v" * 64),
    ],
)
def test_bad_terms_are_refused_naming_the_term(text, term):
    with pytest.raises(SelectorError) as info:
        parse_selector(text)
    assert info.value.term.strip() == term


def test_matches_follows_kubernetes_semantics_for_missing_keys():
    labels = {"env": "prod", "topology.kubernetes.io/region": "eu"}
    assert matches(labels, parse_selector("env=prod,topology.kubernetes.io/region in (eu,us)"))
    assert matches(labels, parse_selector("tier!=web,tier notin (web),!tier"))  # absent key: != and notin hold
    assert not matches(labels, parse_selector("env!=prod"))
    assert not matches(labels, parse_selector("tier in (web)"))


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("env=prod", ["a"]),
        ("env", ["a", "b"]),
        ("!env", ["c"]),
        ("env!=prod", ["b", "c"]),
        ("env in (prod,dev)", ["a", "b"]),
        ("env notin (prod)", ["b", "c"]),
        ("topology.kubernetes.io/region=eu,env=prod", ["a"]),
    ],
)
def test_the_orm_filter_agrees_with_matches(selector, expected):
    for name, labels in (
        ("a", {"env": "prod", "topology.kubernetes.io/region": "eu"}),
        ("b", {"env": "dev"}),
        ("c", {}),
    ):
        ClusterFactory(name=name, labels=labels)
    requirements = parse_selector(selector)
    found = sorted(Cluster.objects.with_labels(requirements).values_list("name", flat=True))
    assert found == expected
    assert found == sorted(c.name for c in Cluster.objects.all() if matches(c.labels, requirements))
