import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.scheduling import (
    SchedulingError,
    max_schedulable,
    normalize_preference,
    plan_replicas,
    to_preference,
)


def pref(raw):
    return to_preference(normalize_preference(raw))


def test_weights_2_1_1_1_split_ten_replicas_4_2_2_2():
    preference = pref({"totalReplicas": 10, "clusters": {"c1": {"weight": 2}, "*": {"weight": 1}}})
    assert plan_replicas(preference, ["c1", "c2", "c3", "c4"], key="ns/web") == {"c1": 4, "c2": 2, "c3": 2, "c4": 2}


def test_kubefed_example_2_3():
    preference = pref({"totalReplicas": 10, "rebalance": True, "clusters": {"cluster1": {"weight": 2}, "cluster2": {"weight": 3}}})
    assert plan_replicas(preference, ["cluster1", "cluster2", "cluster3"]) == {"cluster1": 4, "cluster2": 6}


def test_clusters_without_preference_and_no_wildcard_get_nothing():
    preference = pref({"totalReplicas": 5, "clusters": {"a": {"weight": 1}}})
    assert plan_replicas(preference, ["a", "b"]) == {"a": 5}


def test_unavailable_clusters_do_not_count_and_replicas_move():
    preference = pref({"totalReplicas": 9, "clusters": {"*": {"weight": 1}}})
    assert plan_replicas(preference, ["a", "b"]) == {"a": 5, "b": 4} or plan_replicas(preference, ["a", "b"]) == {"a": 4, "b": 5}
    assert sum(plan_replicas(preference, ["a", "b"]).values()) == 9


def test_min_replicas_first_then_weights():
    preference = pref({"totalReplicas": 10, "clusters": {"a": {"weight": 1, "minReplicas": 6}, "b": {"weight": 1}}})
    plan = plan_replicas(preference, ["a", "b"])
    assert plan["a"] >= 6 and sum(plan.values()) == 10


def test_max_replicas_caps_and_the_rest_goes_elsewhere():
    preference = pref({"totalReplicas": 10, "clusters": {"a": {"weight": 9, "maxReplicas": 2}, "b": {"weight": 1}}})
    assert plan_replicas(preference, ["a", "b"]) == {"a": 2, "b": 8}


def test_when_bounds_forbid_the_total_the_most_that_fits_is_planned():
    preference = pref({"totalReplicas": 10, "clusters": {"*": {"weight": 1, "maxReplicas": 3}}})
    assert plan_replicas(preference, ["a", "b"]) == {"a": 3, "b": 3}
    assert max_schedulable(preference, ["a", "b"]) == 6


def test_zero_weight_without_min_gets_zero():
    preference = pref({"totalReplicas": 4, "clusters": {"a": {"weight": 0}, "b": {"weight": 1}}})
    assert plan_replicas(preference, ["a", "b"]) == {"a": 0, "b": 4}


def test_without_rebalance_existing_replicas_stay():
    preference = pref({"totalReplicas": 6, "rebalance": False, "clusters": {"*": {"weight": 1}}})
    assert plan_replicas(preference, ["a", "b", "c"], current={"a": 6}) == {"a": 6, "b": 0, "c": 0}
    rebalanced = pref({"totalReplicas": 6, "rebalance": True, "clusters": {"*": {"weight": 1}}})
    assert plan_replicas(rebalanced, ["a", "b", "c"], current={"a": 6}) == {"a": 2, "b": 2, "c": 2}


def test_without_rebalance_new_replicas_follow_the_plan():
    preference = pref({"totalReplicas": 8, "clusters": {"*": {"weight": 1}}})
    plan = plan_replicas(preference, ["a", "b"], current={"a": 2})
    assert plan["a"] >= 2 and sum(plan.values()) == 8


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"clusters": {}}, "totalReplicas must be a whole number"),
        ({"totalReplicas": -1}, "between 0"),
        ({"totalReplicas": "10"}, "whole number"),
        ({"totalReplicas": 1, "clusters": {"a": {"weight": -1}}}, "a.weight"),
        ({"totalReplicas": 1, "clusters": {"a": {"minReplicas": 3, "maxReplicas": 2}}}, "below minReplicas"),
        ({"totalReplicas": 1, "clusters": {"a": {"wieght": 1}}}, "unknown field 'wieght'"),
        ({"totalReplicas": 1, "rebalance": "yes"}, "true or false"),
        ({"totalReplicas": 1, "clusters": ["a"]}, "clusters must map"),
    ],
)
def test_invalid_preferences_are_named(raw, message):
    with pytest.raises(SchedulingError, match=message):
        normalize_preference(raw)


def test_empty_means_no_scheduling():
    assert normalize_preference(None) is None and normalize_preference({}) is None


names = st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f"]), min_size=1, max_size=6, unique=True)
cluster_pref = st.fixed_dictionaries(
    {"weight": st.integers(0, 10), "minReplicas": st.integers(0, 5)},
    optional={"maxReplicas": st.integers(5, 40)},
)
preferences = st.builds(
    lambda total, clusters, wildcard, rebalance: {
        "totalReplicas": total,
        "rebalance": rebalance,
        "clusters": {**clusters, **({"*": wildcard} if wildcard else {})},
    },
    st.integers(0, 200),
    st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), cluster_pref, max_size=4),
    st.one_of(st.none(), cluster_pref),
    st.booleans(),
)
currents = st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e", "f"]), st.integers(0, 50), max_size=6)


@settings(max_examples=300, deadline=None)
@given(preferences, names, currents)
def test_plan_properties(raw, available, current):
    preference = pref(raw)
    plan = plan_replicas(preference, available, key="ns/x", current=current)
    again = plan_replicas(preference, list(reversed(available)), key="ns/x", current=dict(current))
    assert plan == again, "deterministic regardless of input order"
    total = sum(plan.values())
    assert total <= raw["totalReplicas"]
    for name, replicas in plan.items():
        p = preference.clusters.get(name) or preference.clusters["*"]
        assert replicas >= 0
        if p.max_replicas is not None:
            assert replicas <= p.max_replicas, "maxReplicas respected"
    # When the bounds allow the total and somebody can take replicas, all of them are placed.
    capacity = max_schedulable(preference, available)
    has_weight = any((preference.clusters.get(n) or preference.clusters.get("*")).weight > 0 for n in plan)
    if plan and has_weight and (capacity is None or capacity >= raw["totalReplicas"]):
        assert total == raw["totalReplicas"]
    # Minimums are met first whenever the total covers them.
    mins = sum(min(preference.clusters.get(n, preference.clusters.get("*")).min_replicas,
                   preference.clusters.get(n, preference.clusters.get("*")).max_replicas or 10**9) for n in plan)
    if raw["rebalance"] and mins <= raw["totalReplicas"]:
        for name, replicas in plan.items():
            p = preference.clusters.get(name) or preference.clusters["*"]
            assert replicas >= min(p.min_replicas, p.max_replicas or 10**9)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 500), st.lists(st.integers(1, 10), min_size=1, max_size=6))
def test_unbounded_weighted_plans_place_everything_roughly_by_weight(total, weights):
    clusters = {f"c{i}": {"weight": w} for i, w in enumerate(weights)}
    plan = plan_replicas(pref({"totalReplicas": total, "rebalance": True, "clusters": clusters}), list(clusters))
    assert sum(plan.values()) == total
    weight_sum = sum(weights)
    for i, w in enumerate(weights):
        # rounding up in one round can move at most one replica per cluster off the exact share
        assert abs(plan[f"c{i}"] - total * w / weight_sum) <= len(weights)
