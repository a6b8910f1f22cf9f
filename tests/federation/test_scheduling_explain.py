"""The plan in words (federation/scheduling_explain.py)."""

from federation.scheduling_explain import explain


def rows(spec, clusters, **kw):
    return {row.cluster: row for row in explain(spec, clusters, key="shop/web", **kw)}


def test_capped_at_max_replicas():
    found = rows(
        {"totalReplicas": 30, "clusters": {"eu-1": {"weight": 1, "maxReplicas": 10}, "*": {"weight": 1}}},
        ["eu-1", "eu-2"],
    )
    assert (found["eu-1"].planned, found["eu-1"].reason) == (10, "capped at maxReplicas 10")
    assert (found["eu-2"].planned, found["eu-2"].reason) == (20, "weight 1 of 2")


def test_kept_running_with_rebalance_off():
    found = rows({"totalReplicas": 50, "clusters": {"*": {"weight": 1}}}, ["A", "B", "C"], current={"C": 30})
    assert (found["C"].current, found["C"].planned, found["C"].reason) == (30, 30, "kept 30 running (rebalance off)")


def test_capacity_moves_replicas_and_names_where():
    found = rows(
        {"totalReplicas": 34, "rebalance": True, "clusters": {"*": {"weight": 1}}},
        ["eu-1", "eu-2"],
        capacity={"eu-1": 10},
    )
    row = found["eu-1"]
    assert (row.capacity, row.planned, row.overflow, row.replicas) == (10, 10, 7, 17)
    assert row.reason == "capacity 10: 7 moved to eu-2; overflow 7 asked for on top, in case capacity frees up"
    assert found["eu-2"].planned == 24


def test_no_preference_and_rebalanced_replicas_are_named():
    found = rows(
        {"totalReplicas": 4, "rebalance": True, "clusters": {"a": {"weight": 1}}}, ["a", "b"], current={"b": 3}
    )
    assert found["b"].weight is None and found["b"].reason.startswith("no preference for b and no '*': 0 replicas")
    assert found["a"].reason == "weight 1 of 1"
    moved = rows(
        {"totalReplicas": 4, "rebalance": True, "clusters": {"*": {"weight": 1}}}, ["a", "b"], current={"b": 4}
    )
    assert moved["b"].reason == "2 of 4 running moved (rebalance on)"


def test_min_replicas_above_total_replicas_is_named_as_capped():
    """KubeFed's minimums pass gives a cluster at most what is left of totalReplicas; the words said
    "weight 1 of 2" (a reviewer's finding)."""
    found = rows(
        {"totalReplicas": 5, "clusters": {"dev": {"weight": 0}, "legacy": {"weight": 1, "minReplicas": 9}}},
        ["dev", "legacy"],
    )
    assert (found["legacy"].planned, found["legacy"].reason) == (5, "minReplicas 9 first, capped at totalReplicas 5")
    assert (found["dev"].planned, found["dev"].reason) == (0, "weight 0 and no minReplicas")


def test_min_replicas_left_short_by_clusters_that_sort_first():
    found = rows(
        {"totalReplicas": 5, "clusters": {"a": {"weight": 2, "minReplicas": 4}, "b": {"weight": 1, "minReplicas": 4}}},
        ["a", "b"],
    )
    assert (found["a"].planned, found["a"].reason) == (4, "minReplicas 4 first")
    assert (found["b"].planned, found["b"].reason) == (1, "minReplicas 4: 1 left after clusters that sort first")
