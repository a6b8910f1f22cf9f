"""What kube-apiserver knows of an API's lifecycle that the per-version schemas cannot tell.

The schemas (kubernetes-validate, v1.25 on) show in which minors a group/version/kind exists, so
a removal from v1.26 on is read off them. Two things are not in them, and are carried over here
as data:

* ``REMOVED_BEFORE_SCHEMAS``: the built-in APIs removed in v1.25 or earlier (absent from every
  schema), with the release that removed them and the apiVersion to use instead. Source: the
  Kubernetes "Deprecated API Migration Guide"
  (https://kubernetes.io/docs/reference/using-api/deprecation-guide/, CC BY 4.0), sections v1.25,
  v1.22 and v1.16.
* ``EXPLICIT_LIFECYCLES``: the beta APIs still served at v1.25 whose deprecation is not Kubernetes'
  default rule (below) or whose introduction predates the schemas: (deprecated, removed,
  replacement). Source: their ``+k8s:prerelease-lifecycle-gen`` tags in k8s.io/api
  (zz_generated.prerelease-lifecycle.go, Apache-2.0), as kube-apiserver words them in its
  ``Warning`` header, e.g. "autoscaling/v2beta2 HorizontalPodAutoscaler is deprecated in v1.23+,
  unavailable in v1.26+; use autoscaling/v2 HorizontalPodAutoscaler".

Kubernetes' default rule (prerelease-lifecycle-gen): an API not tagged otherwise is deprecated
three minors after it was introduced and removed three minors after that. kube-apiserver
(k8s.io/apiserver/pkg/endpoints/deprecation) warns from the deprecating minor on.
"""

from __future__ import annotations

MINORS_TO_DEPRECATION = 3
MINORS_TO_REMOVAL = 3

_APPS_V1 = "apps/v1"

# (apiVersion, kind) -> (minor that no longer serves it, apiVersion to use instead or None)
REMOVED_BEFORE_SCHEMAS: dict[tuple[str, str], tuple[int, str | None]] = {
    # v1.25
    ("batch/v1beta1", "CronJob"): (25, "batch/v1"),
    ("discovery.k8s.io/v1beta1", "EndpointSlice"): (25, "discovery.k8s.io/v1"),
    ("events.k8s.io/v1beta1", "Event"): (25, "events.k8s.io/v1"),
    ("autoscaling/v2beta1", "HorizontalPodAutoscaler"): (25, "autoscaling/v2"),
    ("policy/v1beta1", "PodDisruptionBudget"): (25, "policy/v1"),
    ("policy/v1beta1", "PodSecurityPolicy"): (25, None),  # no replacement: Pod Security Admission
    ("node.k8s.io/v1beta1", "RuntimeClass"): (25, "node.k8s.io/v1"),
    # v1.22
    ("admissionregistration.k8s.io/v1beta1", "MutatingWebhookConfiguration"): (22, "admissionregistration.k8s.io/v1"),
    ("admissionregistration.k8s.io/v1beta1", "ValidatingWebhookConfiguration"): (
        22,
        "admissionregistration.k8s.io/v1",
    ),
    ("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition"): (22, "apiextensions.k8s.io/v1"),
    ("apiregistration.k8s.io/v1beta1", "APIService"): (22, "apiregistration.k8s.io/v1"),
    ("authentication.k8s.io/v1beta1", "TokenReview"): (22, "authentication.k8s.io/v1"),
    ("authorization.k8s.io/v1beta1", "SubjectAccessReview"): (22, "authorization.k8s.io/v1"),
    ("authorization.k8s.io/v1beta1", "LocalSubjectAccessReview"): (22, "authorization.k8s.io/v1"),
    ("authorization.k8s.io/v1beta1", "SelfSubjectAccessReview"): (22, "authorization.k8s.io/v1"),
    ("certificates.k8s.io/v1beta1", "CertificateSigningRequest"): (22, "certificates.k8s.io/v1"),
    ("coordination.k8s.io/v1beta1", "Lease"): (22, "coordination.k8s.io/v1"),
    ("extensions/v1beta1", "Ingress"): (22, "networking.k8s.io/v1"),
    ("networking.k8s.io/v1beta1", "Ingress"): (22, "networking.k8s.io/v1"),
    ("networking.k8s.io/v1beta1", "IngressClass"): (22, "networking.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", "ClusterRole"): (22, "rbac.authorization.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", "ClusterRoleBinding"): (22, "rbac.authorization.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", "Role"): (22, "rbac.authorization.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", "RoleBinding"): (22, "rbac.authorization.k8s.io/v1"),
    ("scheduling.k8s.io/v1beta1", "PriorityClass"): (22, "scheduling.k8s.io/v1"),
    ("storage.k8s.io/v1beta1", "CSIDriver"): (22, "storage.k8s.io/v1"),
    ("storage.k8s.io/v1beta1", "CSINode"): (22, "storage.k8s.io/v1"),
    ("storage.k8s.io/v1beta1", "StorageClass"): (22, "storage.k8s.io/v1"),
    ("storage.k8s.io/v1beta1", "VolumeAttachment"): (22, "storage.k8s.io/v1"),
    # v1.16
    ("extensions/v1beta1", "NetworkPolicy"): (16, "networking.k8s.io/v1"),
    ("extensions/v1beta1", "PodSecurityPolicy"): (16, None),  # moved to policy/v1beta1, itself gone in v1.25
    ("extensions/v1beta1", "DaemonSet"): (16, _APPS_V1),
    ("apps/v1beta2", "DaemonSet"): (16, _APPS_V1),
    ("extensions/v1beta1", "Deployment"): (16, _APPS_V1),
    ("apps/v1beta1", "Deployment"): (16, _APPS_V1),
    ("apps/v1beta2", "Deployment"): (16, _APPS_V1),
    ("apps/v1beta1", "StatefulSet"): (16, _APPS_V1),
    ("apps/v1beta2", "StatefulSet"): (16, _APPS_V1),
    ("extensions/v1beta1", "ReplicaSet"): (16, _APPS_V1),
    ("apps/v1beta1", "ReplicaSet"): (16, _APPS_V1),
    ("apps/v1beta2", "ReplicaSet"): (16, _APPS_V1),
}

_FLOWCONTROL = "flowcontrol.apiserver.k8s.io"

# (apiVersion, kind) -> (deprecated in minor, removed in minor, apiVersion to use instead or None)
EXPLICIT_LIFECYCLES: dict[tuple[str, str], tuple[int, int, str | None]] = {
    ("autoscaling/v2beta2", "HorizontalPodAutoscaler"): (23, 26, "autoscaling/v2"),
    (f"{_FLOWCONTROL}/v1beta1", "FlowSchema"): (23, 26, f"{_FLOWCONTROL}/v1beta2"),
    (f"{_FLOWCONTROL}/v1beta1", "PriorityLevelConfiguration"): (23, 26, f"{_FLOWCONTROL}/v1beta2"),
    (f"{_FLOWCONTROL}/v1beta2", "FlowSchema"): (26, 29, f"{_FLOWCONTROL}/v1beta3"),
    (f"{_FLOWCONTROL}/v1beta2", "PriorityLevelConfiguration"): (26, 29, f"{_FLOWCONTROL}/v1beta3"),
    ("storage.k8s.io/v1beta1", "CSIStorageCapacity"): (24, 27, "storage.k8s.io/v1"),
}


def removed_before_schemas(api_version: str, kind: str) -> tuple[int, str | None] | None:
    """(minor that removed it, replacement apiVersion or None) for a built-in API gone by v1.25."""
    return REMOVED_BEFORE_SCHEMAS.get((api_version, kind))
