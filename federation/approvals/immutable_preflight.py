"""Preflight: an edit that changes a field kube-apiserver never lets change on an object that exists
(a Deployment's selector, a Job's template, an immutable ConfigMap's data: clusters.immutable_fields)
blocks approval, once per cluster that holds the object as FedPortal applied it. Its apply would be
refused there (422, "field is immutable") and the object left as it was, while clusters without it
would get the new content: a fleet split in two that nobody asked for."""

from clusters.immutable_fields import immutable_changes
from federation.approvals.choices import ChangeKind, Severity
from federation.approvals.preflight import PreflightProblem
from federation.models import PropagatedVersion
from federation.overrides import OverrideError
from federation.propagation.common import render_args
from federation.rendering import render_manifest

REVISION_KINDS = (ChangeKind.CREATE, ChangeKind.EDIT, ChangeKind.ROLLBACK)


def immutable_field_check(change_request) -> list[PreflightProblem]:
    revision, resource = change_request.proposed_revision, change_request.resource
    if change_request.kind not in REVISION_KINDS or resource is None or revision is None:
        return []
    ftype = resource.type
    held = (
        PropagatedVersion.objects.filter(
            resource=resource, cluster__name__in=change_request.target_clusters or [], applied_manifest__isnull=False
        )
        .exclude(live_uid="")
        .select_related("cluster")
        .order_by("cluster__name")
    )
    problems = []
    for pv in held:
        try:
            manifest = render_manifest(
                overrides=revision.overrides, replicas=None, **render_args(resource, revision, pv.cluster, live=None)
            )
        except OverrideError:
            continue  # the preview and the propagation report an override that does not apply
        changes = immutable_changes(ftype.group, ftype.kind, manifest, pv.applied_manifest)
        if not changes:
            continue
        fields = ", ".join(dict.fromkeys(change.field for change in changes))
        name = pv.cluster.name
        problems.append(
            PreflightProblem(
                name,
                Severity.BLOCKING,
                f"{ftype.kind} {resource.qualified_name} exists on {name}, and {fields} cannot change on an object "
                f"that exists: kube-apiserver would refuse the update (422, field is immutable) and keep the object "
                f"as it is. Restore {fields}, or delete the object on {name} first so that it is made again.",
            )
        )
    return problems
