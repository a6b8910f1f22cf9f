import pytest

from federation.overrides import OverrideError, apply_overrides, check_overrides, normalize_overrides

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
}


def overrides(*ops, cluster="c2"):
    return normalize_overrides([{"clusterName": cluster, "clusterOverrides": list(ops)}])


def test_default_op_is_replace():
    assert overrides({"path": "/spec/replicas", "value": 5})[0]["clusterOverrides"] == [
        {"op": "replace", "path": "/spec/replicas", "value": 5}
    ]


def test_kubefed_example_sequence_applies_in_order():
    ops = overrides(
        {"path": "/spec/replicas", "value": 5},
        {"path": "/spec/template/spec/containers/0/image", "value": "nginx:1.17.0-alpine"},
        {"path": "/metadata/annotations", "op": "add", "value": {"foo": "bar"}},
        {"path": "/metadata/annotations/foo", "op": "remove"},
    )
    result = apply_overrides(DEPLOYMENT, ops, cluster="c2")
    assert result["spec"]["replicas"] == 5
    assert result["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.17.0-alpine"
    assert result["metadata"]["annotations"] == {}
    assert DEPLOYMENT["spec"]["replicas"] == 3  # input untouched


def test_other_clusters_are_not_affected():
    assert apply_overrides(DEPLOYMENT, overrides({"path": "/spec/replicas", "value": 5}), cluster="c1") == DEPLOYMENT


def test_add_creates_a_missing_key():
    result = apply_overrides(DEPLOYMENT, overrides({"op": "add", "path": "/spec/paused", "value": True}), cluster="c2")
    assert result["spec"]["paused"] is True


@pytest.mark.parametrize("op", ["replace", "remove"])
def test_missing_path_for_replace_or_remove_names_path_and_cluster(op):
    raw = {"op": op, "path": "/spec/strategy/type"}
    if op == "replace":
        raw["value"] = "Recreate"
    with pytest.raises(OverrideError) as info:
        apply_overrides(DEPLOYMENT, overrides(raw), cluster="c2")
    assert "/spec/strategy/type" in str(info.value) and "'c2'" in str(info.value)
    assert info.value.cluster == "c2" and info.value.path == "/spec/strategy/type"


def test_list_index_out_of_range_is_missing():
    with pytest.raises(OverrideError, match="containers/3/image"):
        apply_overrides(
            DEPLOYMENT, overrides({"path": "/spec/template/spec/containers/3/image", "value": "x"}), cluster="c2"
        )


@pytest.mark.parametrize("index", ["²", "١", "0x0", "-1", "01"])
@pytest.mark.parametrize("op", ["replace", "remove"])
def test_an_array_index_that_is_not_ascii_digits_is_missing(op, index):
    # RFC 6901: an array index is 0 or [1-9][0-9]*; "²" passes str.isdigit() and made int() raise (a 500)
    raw = {"op": op, "path": f"/spec/template/spec/containers/{index}/image"}
    if op == "replace":
        raw["value"] = "x"
    with pytest.raises(OverrideError, match="does not exist in the rendered template") as info:
        apply_overrides(DEPLOYMENT, overrides(raw), cluster="c2")
    assert info.value.cluster == "c2" and info.value.path == raw["path"]


def test_add_at_an_array_index_that_is_not_ascii_digits_is_an_override_error():
    with pytest.raises(OverrideError, match="add /spec/template/spec/containers/² failed"):
        apply_overrides(
            DEPLOYMENT,
            overrides({"op": "add", "path": "/spec/template/spec/containers/²", "value": {"name": "x"}}),
            cluster="c2",
        )


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"op": "move", "path": "/a", "from": "/b"}, "unknown field 'from'"),
        ({"op": "move", "path": "/a"}, "op 'move'"),
        ({"op": "replace", "path": "spec/replicas", "value": 1}, "not a JSON pointer"),
        ({"op": "replace", "path": "/spec/replicas"}, "needs a value"),
        ({"op": "replace", "path": "/metadata/name", "value": "x"}, "cannot be overridden"),
        ({"op": "add", "path": "/kind", "value": "x"}, "cannot be overridden"),
        ("replace /a", "must be a mapping"),
    ],
)
def test_malformed_operations_are_rejected(raw, message):
    with pytest.raises(OverrideError, match=message):
        overrides(raw)


def test_entries_for_the_same_cluster_are_merged_and_sorted():
    result = normalize_overrides(
        [
            {"clusterName": "b", "clusterOverrides": [{"path": "/x", "value": 1}]},
            {"clusterName": "a", "clusterOverrides": [{"path": "/y", "value": 1}]},
            {"clusterName": "b", "clusterOverrides": [{"path": "/z", "value": 1}]},
        ]
    )
    assert [e["clusterName"] for e in result] == ["a", "b"]
    assert [o["path"] for o in result[1]["clusterOverrides"]] == ["/x", "/z"]


def test_shape_errors():
    with pytest.raises(OverrideError, match="must be a list"):
        normalize_overrides({"clusterName": "a"})
    with pytest.raises(OverrideError, match="no clusterName"):
        normalize_overrides([{"clusterOverrides": []}])


def test_check_overrides_collects_every_problem():
    ops = normalize_overrides(
        [
            {"clusterName": "a", "clusterOverrides": [{"path": "/nope", "value": 1}]},
            {"clusterName": "b", "clusterOverrides": [{"path": "/spec/replicas", "value": 1}]},
            {"clusterName": "c", "clusterOverrides": [{"op": "remove", "path": "/spec/gone"}]},
        ]
    )
    problems = check_overrides(DEPLOYMENT, ops)
    assert [(p.cluster, p.path) for p in problems] == [("a", "/nope"), ("c", "/spec/gone")]


@pytest.mark.parametrize("value", ["oops", ["a"], 5])
@pytest.mark.parametrize("field", ["labels", "annotations"])
def test_an_override_cannot_leave_labels_or_annotations_that_are_not_a_mapping(field, value):
    """render_manifest adds FedPortal's label and annotation to these: a string there was a 500 on
    the preview and on creating a change request (a review's finding), so saving refuses it."""
    template = {"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}}, "spec": {}}
    overrides = normalize_overrides(
        [{"clusterName": "c1", "clusterOverrides": [{"op": "replace", "path": f"/metadata/{field}", "value": value}]}]
    )
    [problem] = check_overrides(template, overrides)
    assert f"metadata.{field} must stay a mapping" in str(problem)
    with pytest.raises(OverrideError, match="must stay a mapping"):
        apply_overrides(template, overrides, cluster="c1")
