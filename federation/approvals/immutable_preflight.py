"""Preflight: an edit that changes a field kube-apiserver never lets change on an object that exists
(a Deployment's selector, a Job's template, an immutable ConfigMap's data: clusters.immutable_fields)
blocks approval, once per cluster that holds the object as FedPortal applied it. Its apply would be
refused there (422, "field is immutable") and the object left as it was, while clusters without it
would get the new content: a fleet split in two that nobody asked for. What was applied stands for the
stored object (with the apiserver's defaults on both sides), with the status last collected (a
suspended Job that never started may move its pods)."""

from clusters.immutable_fields import has_rules, immutable_changes, stored_after_apply
from federation.approvals.choices import ChangeKind, Severity
from federation.approvals.preflight import PreflightProblem
from federation.choices import DriftPolicy, SyncState, TargetAction
from federation.models import PropagatedVersion
from federation.overrides import OverrideError
from federation.propagation import plan_targets
from federation.propagation.common import render_args
from federation.rendering import RETAINED_PATHS, override_hash, render_manifest

REVISION_KINDS = (ChangeKind.CREATE, ChangeKind.EDIT, ChangeKind.ROLLBACK)


def immutable_field_check(change_request) -> list[PreflightProblem]:
    revision, resource = change_request.proposed_revision, change_request.resource
    if change_request.kind not in REVISION_KINDS or resource is None or revision is None:
        return []
    ftype = resource.type
    if not has_rules(ftype.group, ftype.kind):
        return []  # nothing of this kind is fixed once it exists: no query, no render
    # the clusters that get this revision (now or once ready): not those it removes the object from
    updated = [
        plan.cluster.name
        for plan in plan_targets(resource, revision)
        if plan.action not in (TargetAction.DELETE, TargetAction.ORPHAN)
    ]
    held = (
        PropagatedVersion.objects.filter(resource=resource, cluster__name__in=updated, applied_manifest__isnull=False)
        .exclude(live_uid="")
        .select_related("cluster")
        .order_by("cluster__name")
    )
    enforced = resource.drift_policy == DriftPolicy.ENFORCE
    retains = ftype.kind in RETAINED_PATHS
    rendered: dict[str, dict | None] = {}  # override hash -> manifest (None: an override that does not apply)
    problems = []
    for pv in held:
        if _gone_or_replaced(pv):
            continue  # ours is not there any more: the next propagation makes it (or leaves another's)
        if retains:
            # rendered as the propagation renders it over the object: the fields KubeFed retains from
            # the live one (a Job's generated selector and labels) come from what was applied
            manifest = _rendered(resource, revision, pv.cluster, live=pv.applied_manifest)
        else:  # the same for every cluster with the same overrides (most of a fleet): rendered once
            key = override_hash(revision.overrides, pv.cluster.name, None)
            if key not in rendered:
                rendered[key] = _rendered(resource, revision, pv.cluster, live=None)
            manifest = rendered[key]
        if manifest is None:
            continue  # the preview and the propagation report an override that does not apply
        stored = stored_after_apply(ftype.group, ftype.kind, manifest, pv.applied_manifest)
        changes = immutable_changes(ftype.group, ftype.kind, stored, _as_last_seen(pv), minor=pv.cluster.version_minor)
        if not changes:
            continue
        fields = ", ".join(dict.fromkeys(change.field for change in changes))
        name = pv.cluster.name
        way_out = f"Restore {fields}, or delete the object on {name} first so that it is made again"
        if enforced:
            way_out += " (its drift policy is Enforce, which would make it again as it was: set it to Report first)"
        problems.append(
            PreflightProblem(
                name,
                Severity.BLOCKING,
                f"{ftype.kind} {resource.qualified_name} exists on {name}, and {fields} cannot change on an object "
                f"that exists: kube-apiserver would refuse the update (422, field is immutable) and keep the object "
                f"as it is. {way_out}.",
            )
        )
    return problems


def _rendered(resource, revision, cluster, *, live) -> dict | None:
    try:
        args = render_args(resource, revision, cluster, live=live)
        return render_manifest(overrides=revision.overrides, replicas=None, **args)
    except OverrideError:
        return None


def _as_last_seen(pv: PropagatedVersion) -> dict:
    """What was applied, with the status last collected from the cluster: a suspended Job may move its
    pods only while it has no startTime. Without a collected status it is taken as started (the
    stricter answer: an admin may override the block)."""
    status = pv.remote_status if isinstance(pv.remote_status, dict) else {"startTime": "not collected"}
    return {**pv.applied_manifest, "status": status}


def _gone_or_replaced(pv: PropagatedVersion) -> bool:
    """Drift recorded that the object FedPortal applied was removed, or replaced by another."""
    return pv.sync_state == SyncState.OUT_OF_SYNC and any(
        isinstance(change, dict) and change.get("change") in ("removed", "replaced") for change in pv.drift or []
    )
