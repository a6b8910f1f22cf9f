"""clusters.schemas: the per-version catalog shared by the simulator and the drift app."""

import pytest

from clusters import schemas
from tests.simulator.conftest import deployment


def test_supported_minors_come_from_the_package():
    assert schemas.SUPPORTED_MINORS[0] == 25 and 37 in schemas.SUPPORTED_MINORS
    assert list(schemas.SUPPORTED_MINORS) == sorted(schemas.SUPPORTED_MINORS)


@pytest.mark.parametrize(
    "text,minor",
    [
        ("v1.27.3", 27),
        ("1.30", 30),
        ("v1.29.4-eks-1234", 29),
        ("v1.9.0", None),
        ("v1.38.0", None),
        ("v2.1.0", None),
        ("", None),
        ("banana", None),
    ],
)
def test_schema_minor_for(text, minor):
    assert schemas.schema_minor_for(text) == minor


def test_api_resources_follow_removals():
    def gvs(minor):
        return {r.group_version for r in schemas.api_resources(minor)}

    assert "autoscaling/v2beta2" in gvs(25) and "autoscaling/v2beta2" not in gvs(26)
    assert "flowcontrol.apiserver.k8s.io/v1beta2" in gvs(28) and "flowcontrol.apiserver.k8s.io/v1beta2" not in gvs(29)


def test_api_resources_have_plural_scope_and_verbs():
    table = {(r.group, r.kind): r for r in schemas.api_resources(29)}
    assert table[("", "Endpoints")].plural == "endpoints"
    assert table[("networking.k8s.io", "Ingress")].plural == "ingresses"
    assert table[("networking.k8s.io", "NetworkPolicy")].plural == "networkpolicies"
    assert table[("apps", "Deployment")].namespaced and not table[("", "Namespace")].namespaced
    assert not table[("rbac.authorization.k8s.io", "ClusterRole")].namespaced
    assert not table[("admissionregistration.k8s.io", "ValidatingWebhookConfiguration")].namespaced
    assert table[("authentication.k8s.io", "TokenReview")].verbs == ("create",)
    assert not any(r.kind.endswith("List") or r.kind in ("Scale", "Eviction") for r in table.values())


def test_unknown_field_reported_by_pointer_for_older_versions_only():
    dep = deployment("x", init_restart_policy="Always")
    problems = schemas.validate_manifest(dep, 27)
    assert problems == [
        schemas.SchemaProblem(
            "/spec/template/spec/initContainers/0/restartPolicy",
            "unknown_field",
            'unknown field "spec.template.spec.initContainers[0].restartPolicy"',
        )
    ]
    assert schemas.validate_manifest(dep, 28) == []
    assert schemas.validate_manifest(dep, 27, strict=False) == []


def test_invalid_and_unknown_kind():
    bad = deployment("x")
    bad["spec"]["replicas"] = "two"
    codes = {(p.path, p.code) for p in schemas.validate_manifest(bad, 29)}
    assert ("/spec/replicas", "invalid") in codes
    hpa = {"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"}}
    assert schemas.validate_manifest(hpa, 25) == []
    assert [p.code for p in schemas.validate_manifest(hpa, 27)] == ["unknown_kind"]


def test_prune_unknown_fields_returns_a_copy():
    dep = deployment("x", init_restart_policy="Always")
    pruned, problems = schemas.prune_unknown_fields(dep, 27)
    assert "restartPolicy" not in pruned["spec"]["template"]["spec"]["initContainers"][0]
    assert dep["spec"]["template"]["spec"]["initContainers"][0]["restartPolicy"] == "Always"
    assert [p.code for p in problems] == ["unknown_field"]


def test_repeated_checks_are_answered_from_the_cache():
    manifest = deployment("cached", replicas=3)
    schemas.validate_manifest(manifest, 29)
    before = schemas.validation_cache_hits()
    for _ in range(5):
        assert schemas.validate_manifest(manifest, 29) == []
    assert schemas.validation_cache_hits() == before + 5


def test_pointer_to_field_path():
    assert schemas.pointer_to_field_path("/metadata/labels/a~1b") == "metadata.labels.a/b"


def test_concurrent_first_use_is_safe():
    import concurrent.futures

    schemas.clear_caches()
    dep = deployment("threads", init_restart_policy="Always")
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda m: schemas.prune_unknown_fields(dep, m)[1], [27, 28, 27, 28, 30, 30, 27, 28]))
    assert [len(r) for r in results] == [1, 0, 1, 0, 0, 0, 1, 0]


def test_api_lifecycle_helpers():
    assert schemas.removed_in("autoscaling/v2beta2", "HorizontalPodAutoscaler") == 26
    assert schemas.removed_in("apps/v1", "Deployment") is None
    assert schemas.introduced_in("flowcontrol.apiserver.k8s.io/v1", "FlowSchema") == 29
    assert schemas.introduced_in("apps/v1", "Deployment") is None
    assert schemas.deprecation_warning(29, "apps/v1", "Deployment") is None
    assert schemas.deprecation_warning(29, "flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema") == (
        "flowcontrol.apiserver.k8s.io/v1beta3 FlowSchema is deprecated in v1.29+, unavailable in v1.32+; "
        "use flowcontrol.apiserver.k8s.io/v1 FlowSchema"
    )


def test_resource_stability():
    table = {(r.group_version, r.kind): r for r in schemas.api_resources(29)}
    assert table[("apps/v1", "Deployment")].stability == "stable"
    assert table[("flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema")].stability == "beta"
    assert table[("resource.k8s.io/v1alpha2", "ResourceClaim")].stability == "alpha"
