"""API removals and deprecations as Kubernetes states them, carried over as data.

Sources: the "Deprecated API Migration Guide" (https://kubernetes.io/docs/reference/using-api/deprecation-guide/,
CC BY 4.0) for removals; kube-apiserver's Warning header texts (k8s.io/apiserver
pkg/endpoints/deprecation WarningMessage over k8s.io/api's prerelease-lifecycle tags, Apache-2.0) for
deprecations, as kubectl prints them."""

import pytest

from clusters import schemas
from drift import compat
from drift.choices import CompatProblemCode, CompatStatus
from drift.compliance import evaluate_cluster


def manifest(api_version: str, kind: str) -> dict:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}


# (apiVersion, kind, removed in, replacement) from the migration guide's v1.25, v1.22 and v1.16 sections
REMOVALS = [
    ("batch/v1beta1", "CronJob", "v1.25", "batch/v1"),
    ("discovery.k8s.io/v1beta1", "EndpointSlice", "v1.25", "discovery.k8s.io/v1"),
    ("events.k8s.io/v1beta1", "Event", "v1.25", "events.k8s.io/v1"),
    ("autoscaling/v2beta1", "HorizontalPodAutoscaler", "v1.25", "autoscaling/v2"),
    ("policy/v1beta1", "PodDisruptionBudget", "v1.25", "policy/v1"),
    ("policy/v1beta1", "PodSecurityPolicy", "v1.25", None),
    ("node.k8s.io/v1beta1", "RuntimeClass", "v1.25", "node.k8s.io/v1"),
    ("extensions/v1beta1", "Ingress", "v1.22", "networking.k8s.io/v1"),
    ("networking.k8s.io/v1beta1", "Ingress", "v1.22", "networking.k8s.io/v1"),
    ("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition", "v1.22", "apiextensions.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", "ClusterRoleBinding", "v1.22", "rbac.authorization.k8s.io/v1"),
    ("extensions/v1beta1", "PodSecurityPolicy", "v1.16", None),
    ("extensions/v1beta1", "Deployment", "v1.16", "apps/v1"),
    ("apps/v1beta2", "StatefulSet", "v1.16", "apps/v1"),
    ("extensions/v1beta1", "NetworkPolicy", "v1.16", "networking.k8s.io/v1"),
]


@pytest.mark.parametrize("api_version,kind,removed_in,replacement", REMOVALS)
@pytest.mark.parametrize("version", ["v1.25.0", "v1.28.3", "v1.37.1"])
def test_a_removed_builtin_api_is_incompatible_naming_its_release(api_version, kind, removed_in, replacement, version):
    result = compat.check_manifest(manifest(api_version, kind), version)
    assert result.status == CompatStatus.INCOMPATIBLE
    (problem,) = result.problems
    assert problem.code == CompatProblemCode.API_REMOVED
    assert problem.removed_in == removed_in
    assert f"was removed in {removed_in}" in problem.message
    assert problem.replacement == replacement
    if replacement is None:
        assert "No API replaces it." in problem.message


def test_pod_security_policy_is_not_taken_for_a_custom_resource():
    result = compat.check_manifest(manifest("policy/v1beta1", "PodSecurityPolicy"), "v1.28.3")
    assert result.status != CompatStatus.UNVERIFIABLE
    assert "custom resource" not in result.problems[0].message


def test_removals_the_schemas_show_keep_their_release():
    # autoscaling/v2beta2 HPA is in the v1.25 schema and gone from v1.26 (guide: removed in v1.26)
    (problem,) = compat.check_manifest(manifest("autoscaling/v2beta2", "HorizontalPodAutoscaler"), 28).problems
    assert (problem.code, problem.removed_in, problem.replacement) == (
        CompatProblemCode.API_REMOVED,
        "v1.26",
        "autoscaling/v2",
    )


def test_an_api_off_by_default_points_at_the_version_that_serves_it():
    vap = manifest("admissionregistration.k8s.io/v1beta1", "ValidatingAdmissionPolicy")
    # v1beta1 exists from v1.28 but no default apiserver serves it (the GA v1 came in v1.30)
    assert compat.check_manifest(vap, 28).problems[0].code == CompatProblemCode.API_NOT_SERVED
    (problem,) = compat.check_manifest(vap, 27).problems
    assert problem.code == CompatProblemCode.API_NOT_YET
    assert problem.available_from == "v1.28"
    assert problem.min_version is None
    assert "--runtime-config" in problem.message
    # an API served by default from its first version keeps that version
    flowschema = manifest("flowcontrol.apiserver.k8s.io/v1", "FlowSchema")
    (problem,) = compat.check_manifest(flowschema, 27).problems
    assert (problem.min_version, problem.available_from) == ("v1.29", "v1.29")


# (minor, apiVersion, kind, kube-apiserver's Warning or None), the texts as kubectl prints them
WARNINGS = [
    (
        25,
        "autoscaling/v2beta2",
        "HorizontalPodAutoscaler",
        "autoscaling/v2beta2 HorizontalPodAutoscaler is deprecated in v1.23+, unavailable in v1.26+; "
        "use autoscaling/v2 HorizontalPodAutoscaler",
    ),
    (
        26,
        "storage.k8s.io/v1beta1",
        "CSIStorageCapacity",
        "storage.k8s.io/v1beta1 CSIStorageCapacity is deprecated in v1.24+, unavailable in v1.27+; "
        "use storage.k8s.io/v1 CSIStorageCapacity",
    ),
    (
        28,
        "flowcontrol.apiserver.k8s.io/v1beta2",
        "FlowSchema",
        "flowcontrol.apiserver.k8s.io/v1beta2 FlowSchema is deprecated in v1.26+, unavailable in v1.29+; "
        "use flowcontrol.apiserver.k8s.io/v1beta3 FlowSchema",
    ),
    (
        29,
        "flowcontrol.apiserver.k8s.io/v1beta3",
        "FlowSchema",
        "flowcontrol.apiserver.k8s.io/v1beta3 FlowSchema is deprecated in v1.29+, unavailable in v1.32+; "
        "use flowcontrol.apiserver.k8s.io/v1 FlowSchema",
    ),
    # before its deprecating minor an API is not deprecated, even with a newer version beside it
    (28, "flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema", None),
    (25, "flowcontrol.apiserver.k8s.io/v1beta2", "FlowSchema", None),
    # the default rule: introduced v1.28, deprecated three minors later (v1.31), removed three after
    (30, "admissionregistration.k8s.io/v1beta1", "ValidatingAdmissionPolicy", None),
    (
        31,
        "admissionregistration.k8s.io/v1beta1",
        "ValidatingAdmissionPolicy",
        "admissionregistration.k8s.io/v1beta1 ValidatingAdmissionPolicy is deprecated in v1.31+, "
        "unavailable in v1.34+; use admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy",
    ),
    (29, "apps/v1", "Deployment", None),
    # alpha APIs get no derived dates: MutatingAdmissionPolicy v1alpha1 has only an "introduced" tag
    (36, "admissionregistration.k8s.io/v1alpha1", "MutatingAdmissionPolicy", None),
]


@pytest.mark.parametrize("minor,api_version,kind,warning", WARNINGS)
def test_deprecation_warnings_are_kube_apiservers(minor, api_version, kind, warning):
    assert schemas.deprecation_warning(minor, api_version, kind) == warning


def test_unverifiable_targets_are_not_called_compatible():
    def explanation(compat_counts):
        result = evaluate_cluster(
            name="n",
            role="member",
            version="",
            isolated=False,
            skew_severity="P3",
            skew_messages=["unknown"],
            compat=compat_counts,
            propagation={},
        )
        return next(rule.explanation for rule in result.rules if rule.rule == "api_compat")

    assert explanation({"unverifiable": 3}) == (
        "None of the 3 targeting resources can be verified against this cluster's version."
    )
    assert explanation({"compatible": 2, "unverifiable": 1}) == (
        "2 of 3 targeting resources are compatible; 1 cannot be verified."
    )
    assert explanation({"compatible": 2}) == "All 2 targeting resources are compatible."
