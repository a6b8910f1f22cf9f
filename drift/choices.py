"""Status strings of the drift app. Nothing else in drift spells these values out."""

from django.db import models


class Severity(models.TextChoices):
    """Impact levels from the seed's version-drift impact matrix (000, section 1.3.2)."""

    P0 = "P0", "P0 blocking"
    P1 = "P1", "P1 severe"
    P2 = "P2", "P2 moderate"
    P3 = "P3", "P3 low"


SEVERITY_ORDER = {Severity.P0: 0, Severity.P1: 1, Severity.P2: 2, Severity.P3: 3}


class SkewRule(models.TextChoices):
    HOST_OLDER_THAN_MEMBER = "host_older_than_member", "Host older than a member"
    HOST_MEMBER_SKEW = "host_member_skew", "Host–member minor skew too large"
    MEMBER_MEMBER_SKEW = "member_member_skew", "Member–member minor skew too large"
    KUBELET_NEWER = "kubelet_newer_than_apiserver", "Kubelet newer than its apiserver"
    KUBELET_TOO_OLD = "kubelet_too_old", "Kubelet too far behind its apiserver"
    VERSION_UNKNOWN = "version_unknown", "Cluster version unknown"
    KUBELET_VERSION_UNKNOWN = "kubelet_version_unknown", "Kubelet version unknown"


class CompatStatus(models.TextChoices):
    COMPATIBLE = "compatible", "Compatible"
    INCOMPATIBLE = "incompatible", "Incompatible"
    UNVERIFIABLE = "unverifiable", "Unverifiable"


class CompatProblemCode(models.TextChoices):
    UNKNOWN_FIELD = "unknown_field", "Field not supported"
    INVALID = "invalid", "Invalid value"
    API_REMOVED = "api_removed", "apiVersion removed"
    API_NOT_YET = "api_not_yet_available", "apiVersion not yet available"
    API_NOT_SERVED = "api_not_served", "apiVersion not enabled on the cluster"
    CRD_NOT_SERVED = "crd_not_served", "Custom resource not served by the cluster"
    UNKNOWN_KIND = "unknown_kind", "Kind unknown to the schemas"
    VERSION_UNVERIFIABLE = "version_unverifiable", "Version outside the schemas' range"
