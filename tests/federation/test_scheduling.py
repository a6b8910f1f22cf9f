import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.scheduling import SchedulingError, fnv32, normalize_preference, plan, scheduled_replicas
from tests.federation.kubefed_planner_cases import CASES


@pytest.mark.parametrize(
    "test, rebalance, clusters, total, available, current, capacity, replicas, overflow",
    CASES,
    ids=[f"{case[0]}-{i}" for i, case in enumerate(CASES)],
)
def test_kubefed_planner_table(test, rebalance, clusters, total, available, current, capacity, replicas, overflow):
    spec = {"totalReplicas": total, "rebalance": rebalance, "clusters": clusters}
    assert plan(spec, available, key="", current=current, capacity=capacity) == (replicas, overflow)


def test_the_table_has_every_kubefed_case():
    assert len(CASES) == 40


def test_fnv32_is_go_hash_fnv_new32():
    # FNV-1 (multiply, then xor) reference values: offset basis for "", and Go's fnv.New32 of "a".
    assert fnv32("") == 0x811C9DC5
    assert fnv32("a") == 0x050C5D7E


def test_tie_break_hashes_cluster_name_then_key():
    # With one replica and equal weights the cluster with the smallest FNV-32(name + key) gets it.
    key = "shop/web"
    names = ["eu-1", "eu-2", "us-1", "us-2"]
    replicas, _ = plan({"totalReplicas": 1, "clusters": {"*": {"weight": 1}}}, names, key=key)
    assert replicas[min(names, key=lambda n: fnv32(n + key))] == 1
    assert min(names, key=lambda n: fnv32(n + key)) != min(
        names, key=lambda n: fnv32(key + n)
    )  # the order matters here


def test_issue_examples_rebalance_false_reserves_running_replicas():
    spec = {"totalReplicas": 50, "clusters": {"*": {"weight": 1}}}
    assert plan(spec, ["A", "B", "C"], key="", current={"C": 30})[0] == {"A": 10, "B": 10, "C": 30}
    spec = {"totalReplicas": 1, "clusters": {"*": {"weight": 1}}}
    assert plan(spec, ["A", "B", "C"], key="", current={"A": 30})[0] == {"A": 1, "B": 0, "C": 0}


def test_rsp_without_clusters_defaults_to_every_cluster_weight_1():
    # KubeFed ReplicaScheduler.GetSchedulingResult: no clusters -> {"*": {weight: 1}}.
    assert plan({"totalReplicas": 4}, ["a", "b"], key="ns/x") == ({"a": 2, "b": 2}, {})


def test_clusters_without_preference_get_zero_replicas():
    # KubeFed Planner.Plan: an available cluster without its own or a "*" preference is planned with 0.
    assert plan({"totalReplicas": 5, "clusters": {"a": {"weight": 1}}}, ["a", "b"], key="") == ({"a": 5, "b": 0}, {})


def test_scheduled_replicas_add_overflow_as_kubefed_does():
    replicas, overflow = plan(
        {"totalReplicas": 50, "rebalance": True, "clusters": {"*": {"weight": 1}}},
        ["A", "B", "C"],
        key="",
        capacity={"C": 10},
    )
    assert scheduled_replicas(replicas, overflow) == {"A": 20, "B": 20, "C": 17}


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
    with pytest.raises(SchedulingError, match=message):
        plan(raw, ["a"], key="")


def test_empty_means_no_scheduling():
    assert normalize_preference(None) is None and normalize_preference({}) is None
    with pytest.raises(SchedulingError, match="needs totalReplicas"):
        plan({}, ["a"], key="")


# --- properties -----------------------------------------------------------------------------------

NAMES = ["a", "b", "c", "d", "e", "f"]
cluster_pref = st.fixed_dictionaries(
    {"weight": st.integers(0, 10), "minReplicas": st.integers(0, 5)},
    optional={"maxReplicas": st.integers(0, 40)},
).filter(lambda p: p.get("maxReplicas") is None or p["maxReplicas"] >= p.get("minReplicas", 0))
specs = st.builds(
    lambda total, clusters, wildcard, rebalance: {
        "totalReplicas": total,
        "rebalance": rebalance,
        "clusters": {**clusters, **({"*": wildcard} if wildcard else {})},
    },
    st.one_of(st.just(0), st.integers(0, 200)),
    st.dictionaries(st.sampled_from(NAMES[:4]), cluster_pref, max_size=4),
    st.one_of(st.none(), cluster_pref),
    st.booleans(),
)
available_names = st.lists(st.sampled_from(NAMES), min_size=0, max_size=6, unique=True)
counts = st.dictionaries(st.sampled_from(NAMES), st.integers(0, 60), max_size=6)


def pref_of(spec, name):
    clusters = spec["clusters"] or {"*": {"weight": 1}}
    return clusters.get(name, clusters.get("*"))


def room(spec, available, capacity):
    """The most replicas bounds and capacity let the rounds place (None: unbounded)."""
    total, unbounded = 0, False
    for name in available:
        p = pref_of(spec, name)
        if p is None:
            continue
        limit = p.get("maxReplicas")
        if name in capacity:
            limit = capacity[name] if limit is None else min(limit, capacity[name])
        if p.get("weight", 0) == 0:
            limit = p.get("minReplicas", 0) if limit is None else min(p.get("minReplicas", 0), limit)
        if limit is None:
            unbounded = True
        else:
            total += limit
    return None if unbounded else total


@settings(max_examples=400, deadline=None)
@given(specs, available_names, counts, counts)
def test_plan_properties(spec, available, current, capacity):
    replicas, overflow = plan(spec, available, key="ns/x", current=current, capacity=capacity)
    assert (replicas, overflow) == plan(
        spec, list(reversed(available)), key="ns/x", current=dict(current), capacity=dict(capacity)
    ), "deterministic, whatever the clusters' order"
    assert set(replicas) == set(available), "every available cluster is in the plan, 0 without a preference"
    assert sum(replicas.values()) <= spec["totalReplicas"]
    for name, count in replicas.items():
        p = pref_of(spec, name)
        assert count >= 0
        if p is None:
            assert count == 0
            continue
        if name in capacity:
            assert count <= capacity[name], "capacity respected"
        if p.get("maxReplicas") is not None:
            assert count <= max(p["maxReplicas"], p.get("minReplicas", 0)), "maxReplicas respected"
    assert all(value > 0 for value in overflow.values()) and set(overflow) <= set(capacity)
    limit = room(spec, available, capacity)
    weighted = any((pref_of(spec, n) or {}).get("weight", 0) > 0 for n in available)
    if weighted and (limit is None or limit >= spec["totalReplicas"]):
        assert sum(replicas.values()) == spec["totalReplicas"], "everything placed when capacity allows"


@settings(max_examples=400, deadline=None)
@given(specs, available_names, counts, counts)
def test_minimums_come_first(spec, available, current, capacity):
    replicas, _ = plan(spec, available, key="ns/x", current=current, capacity=capacity)
    wanted = {
        n: min(pref_of(spec, n).get("minReplicas", 0), capacity.get(n, 10**9)) for n in available if pref_of(spec, n)
    }
    if sum(wanted.values()) <= spec["totalReplicas"]:
        for name, minimum in wanted.items():
            assert replicas[name] >= minimum, "minReplicas respected when the total covers them"


@settings(max_examples=400, deadline=None)
@given(specs, available_names, counts, counts)
def test_rebalance_false_never_moves_a_running_replica_unless_forced(spec, available, current, capacity):
    spec = {**spec, "rebalance": False}
    replicas, _ = plan(spec, available, key="ns/x", current=current, capacity=capacity)
    preferred = [n for n in available if pref_of(spec, n) is not None]
    keepable, needed = {}, 0
    for name in preferred:
        p = pref_of(spec, name)
        running = current.get(name, 0)
        keepable[name] = min(running, p.get("maxReplicas", running), capacity.get(name, running))
        needed += max(min(p.get("minReplicas", 0), capacity.get(name, 10**9)), keepable[name])
    if needed <= spec["totalReplicas"]:  # neither maxReplicas, capacity nor the total forces a move
        for name, count in keepable.items():
            assert replicas[name] >= count, f"{name} keeps its {count} running replicas"


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 500), st.lists(st.integers(1, 10), min_size=1, max_size=6))
def test_unbounded_weighted_plans_place_everything_roughly_by_weight(total, weights):
    clusters = {f"c{i}": {"weight": w} for i, w in enumerate(weights)}
    replicas, overflow = plan(
        {"totalReplicas": total, "rebalance": True, "clusters": clusters}, list(clusters), key="k"
    )
    assert sum(replicas.values()) == total and overflow == {}
    weight_sum = sum(weights)
    for i, w in enumerate(weights):
        assert abs(replicas[f"c{i}"] - total * w / weight_sum) <= len(weights)
