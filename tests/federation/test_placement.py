import pytest
from hypothesis import given
from hypothesis import strategies as st

from federation.placement import (
    ClusterRef,
    PlacementError,
    describe_placement,
    is_propagated,
    normalize_placement,
    select_clusters,
    selector_matches,
    unknown_clusters,
)

FLEET = [
    ClusterRef("east", {"region": "us-east", "env": "prod"}),
    ClusterRef("west", {"region": "us-west", "env": "prod"}),
    ClusterRef("lab", {"region": "eu", "env": "dev", "gpu": "true"}),
]


def select(raw):
    return select_clusters(normalize_placement(raw), FLEET)


def test_explicit_list_wins_over_selector():
    assert select({"clusters": ["lab"], "clusterSelector": {"matchLabels": {"env": "prod"}}}) == ["lab"]


def test_empty_list_selects_none_even_with_selector():
    assert select({"clusters": [], "clusterSelector": {}}) == []


def test_empty_selector_selects_all():
    assert select({"clusterSelector": {}}) == ["east", "lab", "west"]


def test_neither_set_means_not_propagated():
    placement = normalize_placement({})
    assert select_clusters(placement, FLEET) == []
    assert not is_propagated(placement)
    assert describe_placement(placement) == "not propagated"


def test_kubefed_style_cluster_entries_are_accepted():
    assert normalize_placement({"clusters": [{"name": "b"}, {"name": "a"}, "a"]}) == {"clusters": ["a", "b"]}


def test_match_labels_and_expressions_all_operators():
    assert select({"clusterSelector": {"matchLabels": {"env": "prod"}}}) == ["east", "west"]
    assert select(
        {"clusterSelector": {"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu", "us-west"]}]}}
    ) == ["lab", "west"]
    assert select(
        {"clusterSelector": {"matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["eu"]}]}}
    ) == ["east", "west"]
    assert select({"clusterSelector": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}) == ["lab"]
    assert select({"clusterSelector": {"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}}) == [
        "east",
        "west",
    ]


def test_not_in_matches_clusters_without_the_label():
    assert selector_matches({"matchExpressions": [{"key": "x", "operator": "NotIn", "values": ["1"]}]}, {})


@pytest.mark.parametrize(
    "selector, message",
    [
        ({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]}, "operator 'Equals'"),
        ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "non-empty list"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "non-empty list"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "takes no values"),
        ({"matchExpressions": [{"key": "bad key!", "operator": "Exists"}]}, "not a valid label key"),
        ({"matchLabels": {"a": "bad value!"}}, "not a valid label value"),
        # unquoted YAML: the message said "True is not a valid label value" (Python's spelling)
        ({"matchLabels": {"canary": True}}, r"YAML read this one as a boolean \(true\). Put the value in quotes"),
        (
            {"matchExpressions": [{"key": "v", "operator": "In", "values": [1.29]}]},
            r"YAML read this one as a number \(1.29\). Put the value in quotes as you meant it.",
        ),
        ({"matchLabels": ["a"]}, "matchLabels must be a mapping"),
        ({"matchExpressions": {"key": "a"}}, "must be a list"),
        ({"matchLabel": {}}, "unknown field 'matchLabel'"),
        ("env=prod", "clusterSelector must be a mapping"),
    ],
)
def test_selector_syntax_errors_are_named(selector, message):
    with pytest.raises(PlacementError, match=message):
        normalize_placement({"clusterSelector": selector})


def test_placement_shape_errors():
    with pytest.raises(PlacementError, match="clusters must be a list"):
        normalize_placement({"clusters": "east"})
    with pytest.raises(PlacementError, match="no cluster name"):
        normalize_placement({"clusters": [{"nome": "east"}]})
    with pytest.raises(PlacementError, match="unknown field"):
        normalize_placement({"cluster": ["east"]})


def test_unknown_clusters_are_reported():
    assert unknown_clusters({"clusters": ["east", "mars"]}, ["east", "west"]) == ["mars"]


def test_describe_placement():
    assert describe_placement({"clusters": ["a", "b"]}) == "a, b"
    assert describe_placement({"clusterSelector": {}}) == "all clusters (empty selector)"


labels = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2"]), max_size=3)


@given(labels, labels)
def test_match_labels_is_subset_semantics(wanted, have):
    expected = all(have.get(k) == v for k, v in wanted.items())
    assert selector_matches({"matchLabels": wanted}, have) == expected


@given(st.sampled_from(["a", "b"]), st.lists(st.sampled_from(["1", "2"]), min_size=1), labels)
def test_in_and_not_in_are_complements_when_key_present(key, values, have):
    in_ = selector_matches({"matchExpressions": [{"key": key, "operator": "In", "values": values}]}, have)
    not_in = selector_matches({"matchExpressions": [{"key": key, "operator": "NotIn", "values": values}]}, have)
    if key in have:
        assert in_ != not_in
    else:
        assert not in_ and not_in


@pytest.mark.parametrize(
    "selector",
    [{"matchLabels": {"env\n": "prod"}}, {"matchLabels": {"env": "prod\n"}}],
)
def test_a_label_with_a_final_newline_is_refused(selector):
    """A pattern ending in "$" matches before a final newline: the patterns end in \\Z."""
    with pytest.raises(PlacementError):
        normalize_placement({"clusterSelector": selector})
