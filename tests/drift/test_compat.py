"""API compatibility of rendered manifests with target versions, and upgrade guidance."""

import copy
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusters import served_apis
from drift import compat
from drift.choices import CompatProblemCode, CompatStatus
from drift.compat import check_fleet, check_manifest
from drift.skew import ClusterVersion
from drift.upgrade import UpgradePathError, plan_upgrade, upgrade_path

SIDECAR = "/spec/template/spec/initContainers/0/restartPolicy"


def deployment(name="web", *, sidecar=False, extra=None):
    init = [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}] if sidecar else []
    container = {"name": "web", "image": "nginx:1.25"}
    container.update(extra or {})
    spec = {"containers": [container]}
    if init:
        spec["initContainers"] = init
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


HPA_V2BETA2 = {
    "apiVersion": "autoscaling/v2beta2",
    "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "web"},
    "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 4},
}


@pytest.fixture(autouse=True)
def fresh_cache():
    compat.clear_cache()
    yield
    compat.clear_cache()


def test_plain_deployment_is_compatible_everywhere():
    for minor in range(25, 32):
        assert check_manifest(deployment(), f"v1.{minor}.4").status == CompatStatus.COMPATIBLE


@pytest.mark.parametrize("minor", [25, 26, 27])
def test_v1_28_only_field_is_flagged_for_older_targets_with_fix(minor):
    result = check_manifest(deployment(sidecar=True), f"v1.{minor}.0")
    assert result.status == CompatStatus.INCOMPATIBLE
    [problem] = result.problems
    assert problem.code == CompatProblemCode.UNKNOWN_FIELD
    assert problem.path == SIDECAR
    assert problem.field_path == "spec.template.spec.initContainers[0].restartPolicy"
    assert problem.min_version == "v1.28"
    assert problem.fix == {"op": "remove", "path": SIDECAR}
    assert result.suggested_overrides == [{"op": "remove", "path": SIDECAR}]
    assert result.min_version == "v1.28"


@pytest.mark.parametrize("minor", [28, 29, 30, 31])
def test_v1_28_only_field_is_fine_from_1_28(minor):
    assert check_manifest(deployment(sidecar=True), minor).status == CompatStatus.COMPATIBLE


def test_suggested_override_really_makes_it_compatible():
    import jsonpatch

    manifest = deployment(sidecar=True)
    result = check_manifest(manifest, 27)
    patched = jsonpatch.apply_patch(manifest, result.suggested_overrides)
    assert check_manifest(patched, 27).status == CompatStatus.COMPATIBLE


def test_field_unknown_at_every_version_has_no_minimum_but_still_a_removal_fix():
    result = check_manifest(deployment(extra={"colour": "blue"}), 29)
    [problem] = result.problems
    assert problem.min_version is None
    assert "any newer version" in problem.message
    assert problem.fix == {"op": "remove", "path": "/spec/template/spec/containers/0/colour"}


def test_removed_api_version_says_when_and_what_to_use_instead():
    assert check_manifest(HPA_V2BETA2, 25).status == CompatStatus.COMPATIBLE
    result = check_manifest(HPA_V2BETA2, 26)
    assert result.status == CompatStatus.INCOMPATIBLE
    [problem] = result.problems
    assert problem.code == CompatProblemCode.API_REMOVED
    assert problem.removed_in == "v1.26"
    assert problem.replacement == "autoscaling/v2"


def test_api_removed_before_the_schema_range_is_still_incompatible():
    ingress = {"apiVersion": "extensions/v1beta1", "kind": "Ingress", "metadata": {"name": "x"}}
    result = check_manifest(ingress, 27)
    assert result.status == CompatStatus.INCOMPATIBLE
    assert result.problems[0].replacement == "networking.k8s.io/v1"


def test_api_not_yet_present_says_first_version():
    vap = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "x"},
        "spec": {},
    }
    result = check_manifest(vap, 29)
    [problem] = result.problems
    assert problem.code == CompatProblemCode.API_NOT_YET
    assert problem.available_from == "v1.30"
    # a default 1.29 apiserver does not serve the v1beta1 either (a beta added after KEP-3136)
    assert problem.replacement is None
    served = set(served_apis.served_group_versions(29)) | {"admissionregistration.k8s.io/v1beta1"}
    [problem] = check_manifest(vap, 29, served=served).problems
    assert problem.replacement == "admissionregistration.k8s.io/v1beta1"


def test_an_api_in_the_schemas_but_off_by_default_is_not_served():
    """kube-apiserver's DefaultAPIResourceConfigSource (pkg/controlplane/instance.go): alpha and
    post-KEP-3136 betas are off; a cluster whose discovery lists the group-version accepts it."""
    vac = {
        "apiVersion": "storage.k8s.io/v1beta1",
        "kind": "VolumeAttributesClass",
        "metadata": {"name": "fast"},
        "driverName": "csi.example.com",
    }
    default = check_manifest(vac, "v1.32.0")
    assert default.status == CompatStatus.INCOMPATIBLE
    [problem] = default.problems
    assert problem.code == CompatProblemCode.API_NOT_SERVED
    assert problem.path == "/apiVersion"
    enabled = set(served_apis.served_group_versions(32)) | {"storage.k8s.io/v1beta1"}
    assert check_manifest(vac, "v1.32.0", served=enabled).status == CompatStatus.COMPATIBLE
    assert check_manifest(vac, "v1.32.0").status == CompatStatus.INCOMPATIBLE  # the cache keeps them apart


@pytest.mark.parametrize("version", ["v1.24.9", "v1.99.0", "garbage", "", None, 3.5])
def test_versions_outside_schema_range_are_unverifiable_not_errors(version):
    result = check_manifest(deployment(), version)
    assert result.status == CompatStatus.UNVERIFIABLE
    assert result.problems[0].code == CompatProblemCode.VERSION_UNVERIFIABLE


WIDGET = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}


def test_a_custom_resource_is_unverifiable_where_it_is_served_or_discovery_is_not_read():
    for served in (None, [], [*served_apis.served_group_versions(29), "example.com/v1"]):
        result = check_manifest(WIDGET, 29, served=served)
        assert result.status == CompatStatus.UNVERIFIABLE
        assert result.problems[0].code == CompatProblemCode.UNKNOWN_KIND


@pytest.mark.parametrize("crds", [[], ["other.example.com/v1"], ["example.com/v2"]])
def test_a_custom_resource_its_clusters_discovery_does_not_list_is_incompatible(crds):
    """No CustomResourceDefinition serves it there: the apply would be answered 404. A discovery
    that lists exactly a default apiserver's (no CRD at all) was taken for an unread one."""
    result = check_manifest(WIDGET, "v1.29.4", served=[*served_apis.served_group_versions(29), *crds])
    assert result.status == CompatStatus.INCOMPATIBLE
    (problem,) = result.problems
    assert problem.code == CompatProblemCode.CRD_NOT_SERVED and problem.path == "/apiVersion"
    assert "does not list the group-version" in problem.message


@pytest.mark.parametrize(
    "bad", [None, [], "text", {"kind": "Deployment"}, {"apiVersion": "apps/v1"}, {"apiVersion": 3, "kind": []}]
)
def test_malformed_manifests_are_reported_not_raised(bad):
    result = check_manifest(bad, 29)
    assert result.status in (CompatStatus.INCOMPATIBLE, CompatStatus.UNVERIFIABLE)
    assert result.problems


def test_results_are_cached_per_content_and_minor():
    check_manifest(deployment(sidecar=True), 27)
    check_manifest(deployment(sidecar=True), "v1.27.9")
    assert compat.cache_stats == {"hits": 1, "misses": 1}


def test_fleet_check_computes_once_per_distinct_minor():
    manifests = {f"r{i}": deployment(f"web{i}", sidecar=i % 2 == 0) for i in range(20)}
    clusters = {f"c{i}": f"v1.{25 + i % 7}.{i % 3}" for i in range(300)}
    clusters["weird"] = "not-a-version"
    matrix = check_fleet(manifests, clusters)
    assert matrix.checks == 20 * 7
    assert compat.cache_stats["misses"] == 20 * 7
    assert matrix.results["r0"]["c2"].status == CompatStatus.INCOMPATIBLE  # v1.27, sidecar
    assert matrix.results["r1"]["c2"].status == CompatStatus.COMPATIBLE
    assert matrix.results["r0"]["weird"].status == CompatStatus.UNVERIFIABLE
    counts = matrix.counts()
    assert sum(counts.values()) == 20 * 301


def test_thousand_clusters_by_two_hundred_resources_compute_in_seconds():
    manifests = {f"r{i}": deployment(f"web{i}", sidecar=i % 3 == 0) for i in range(200)}
    clusters = {f"c{i}": f"v1.{25 + i % 7}.0" for i in range(1000)}
    started = time.perf_counter()
    check_fleet(manifests, clusters)
    assert time.perf_counter() - started < 20


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=10,
)


@settings(max_examples=60, deadline=None)
@given(json_values, st.sampled_from(["spec", "metadata", "status", "foo"]), st.integers(20, 40))
def test_check_never_crashes_on_arbitrary_content(value, key, minor):
    manifest = copy.deepcopy(deployment())
    manifest[key] = value
    result = check_manifest(manifest, minor)
    assert result.status in CompatStatus.values


# --- upgrade guidance ---------------------------------------------------------------------------


def test_upgrade_path_is_one_minor_at_a_time():
    assert upgrade_path("v1.25.3", "v1.28.0") == [26, 27, 28]
    assert upgrade_path("v1.28.0", 28) == []
    with pytest.raises(UpgradePathError, match="downgrades"):
        upgrade_path("v1.29.0", "v1.27.0")
    with pytest.raises(UpgradePathError):
        upgrade_path("nonsense", 28)


def test_upgrade_plan_shows_when_manifests_become_compatible_or_break():
    manifests = {"sidecar": deployment(sidecar=True), "hpa": HPA_V2BETA2, "plain": deployment("plain")}
    cluster = ClusterVersion("old", "member", "v1.25.2")
    host = ClusterVersion("host", "host", "v1.29.0")
    plan = plan_upgrade(cluster, "v1.29.0", manifests, host=host)
    assert [s.minor for s in plan.steps] == [26, 27, 28, 29]
    assert plan.incompatible_at_start == ["sidecar"]
    by_minor = {s.minor: s for s in plan.steps}
    assert by_minor[26].became_incompatible == ("hpa",)
    assert by_minor[28].became_compatible == ("sidecar",)
    assert by_minor[28].still_incompatible == ("hpa",)
    assert by_minor[28].skew_findings == ()
    assert by_minor[26].skew_findings  # still 3 minors behind the host
    assert plan.start_skew
    assert plan.first_clean_step is None  # hpa stays broken: rewrite it as autoscaling/v2


field_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["/spec", "/spec/template/spec", "/spec/template/spec/containers/0", "/metadata"]),
            field_names,
        ),
        min_size=1,
        max_size=4,
    ),
    st.integers(25, 31),
)
def test_suggested_overrides_always_remove_every_unknown_field(extra_fields, minor):
    import jsonpatch

    manifest = deployment(sidecar=True)
    for parent, name in extra_fields:
        target = jsonpatch.JsonPointer(parent).resolve(manifest)
        target.setdefault(f"x{name}", {"nested": [1, 2]})
    result = check_manifest(manifest, minor)
    assert result.status == CompatStatus.INCOMPATIBLE
    patched = jsonpatch.apply_patch(manifest, result.suggested_overrides)
    assert check_manifest(patched, minor).status == CompatStatus.COMPATIBLE
