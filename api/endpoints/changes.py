"""/api/v1/change-requests: the approval workflow over federation.approvals.services — the same
role checks, four-eyes rules and audit events as the pages."""

from datetime import datetime
from typing import Any, Literal

from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Status

from api.auth import needs
from api.common import READ_ERRORS, WRITE_ERRORS, In, Out, PageParams, require_viewer
from api.errors import ApiError
from api.pagination import page
from clusters.models import Cluster
from federation import propagation
from federation.approvals import rollout as rollouts
from federation.approvals import selectors, services
from federation.approvals.choices import ChangeKind, ChangeState
from federation.approvals.models import ChangeRequest, Rollout
from federation.models import FederatedResource
from fedportal.roles import Role, require_role

router = Router(tags=["change requests"])

# values spelled once, in federation.approvals.choices ("" = any state)
StateName = Literal[("", *ChangeState.values)]
# what a person may open: FedPortal opens reconcile requests itself (a cluster joined or was relabelled)
RESOURCE_KINDS = (ChangeKind.CREATE, ChangeKind.EDIT, ChangeKind.ROLLBACK, ChangeKind.DELETE)
KindName = Literal[tuple(kind for kind in ChangeKind.values if kind != ChangeKind.RECONCILE)]


class ChangeRequestOut(Out):
    id: int
    state: str
    kind: str
    title: str
    subject: str
    author: str
    emergency: bool
    resource_id: int | None
    cluster_id: int | None
    proposed_revision: int | None
    target_clusters: list[str]
    required_approvals: int
    approvals: int
    created_at: datetime
    updated_at: datetime
    submitted_at: datetime | None
    decided_at: datetime | None
    finished_at: datetime | None


class ApprovalOut(Out):
    id: int
    approver: str
    decision: str
    comment: str
    valid: bool
    created_at: datetime


class ProgressOut(Out):
    run_id: int
    state: str
    total: int
    done: int
    failed: int
    pending: int


class ChangeRequestDetailOut(ChangeRequestOut):
    description: str
    content_hash: str = Field(description="what an approval of this request approves; send it back when approving")
    approval_list: list[ApprovalOut]
    blocking_preflight: bool
    preflight: list[dict[str, Any]]
    diffs: list[dict[str, Any]]
    outcome: list[dict[str, Any]]
    rollout: list[ProgressOut]
    apply_error: str
    rollout_strategy: dict[str, Any] | None = Field(
        description="this request's own rollout strategy (part of content_hash); null: the resource's"
    )
    staged: bool = Field(
        description="open: whether applying it goes wave by wave (false: every cluster at once); since: whether it did"
    )


class ChangeRequestPage(Out):
    items: list[ChangeRequestOut]
    next_cursor: str | None


class ChangeFilters(PageParams):
    state: StateName = ""
    author: str = Field("", max_length=150)
    resource: str = Field("", max_length=320, description="resource name contains")
    cluster: str = Field("", max_length=63, description="targets this cluster")
    emergency: bool | None = None
    q: str = Field("", max_length=200, description="title or resource contains")


class ChangeRequestIn(In):
    kind: KindName | None = None
    resource_id: int | None = None
    revision: int | None = Field(None, ge=1, description="revision number to propose (default: the current one)")
    cluster_id: int | None = Field(None, description="the cluster to unjoin (kind=unjoin)")
    title: str = Field("", max_length=200)
    description: str = Field("", max_length=20000)


class DecisionIn(In):
    comment: str = Field("", max_length=5000)


class ApproveIn(DecisionIn):
    content_hash: str = Field(
        ...,
        min_length=1,
        max_length=64,
        description="the content_hash of the request you reviewed (its detail): the approval is refused (409) when "
        "the request proposes something else now. Required: without it, an approval sent after the author pointed "
        "the request at other content counted for content the approver never saw.",
    )


class CancelIn(In):
    reason: str = Field("", max_length=5000)


# what a list item reads (list_item): a list page leaves the diffs, preflight and outcome JSON in the database
LIST_FIELDS = (
    "id",
    "state",
    "kind",
    "title",
    "cluster_name",
    "resource_repr",
    "author_name",
    "emergency",
    "resource_id",
    "cluster_id",
    "proposed_revision_id",
    "proposed_revision__number",
    "target_clusters",
    "required_approvals",
    "created_at",
    "updated_at",
    "submitted_at",
    "decided_at",
    "finished_at",
)


def _number(revision) -> int | None:
    return revision.number if revision is not None else None


def change_out(cr: ChangeRequest, approval_count: int | None = None) -> dict:
    count = getattr(cr, "approval_count", None) if approval_count is None else approval_count
    return {
        "id": cr.pk,
        "state": cr.state,
        "kind": cr.kind,
        "title": cr.title,
        "subject": cr.subject,
        "author": cr.author_name,
        "emergency": cr.emergency,
        "resource_id": cr.resource_id,
        "cluster_id": cr.cluster_id,
        "proposed_revision": _number(cr.proposed_revision) if cr.proposed_revision_id else None,
        "target_clusters": list(cr.target_clusters or []),
        "required_approvals": cr.required_approvals,
        "approvals": count or 0,
        "created_at": cr.created_at,
        "updated_at": cr.updated_at,
        "submitted_at": cr.submitted_at,
        "decided_at": cr.decided_at,
        "finished_at": cr.finished_at,
    }


def change_detail_out(cr: ChangeRequest) -> dict:
    cr = selectors.base_queryset().get(pk=cr.pk)
    approvals = list(cr.approvals.all())
    summary = services.approval_summary(cr, approvals)
    rollout = []
    for run in cr.runs.all().order_by("id"):
        progress = propagation.run_progress(run)
        rollout.append(
            {
                "run_id": run.pk,
                "state": run.state,
                "total": progress.total,
                "done": progress.done,
                "failed": progress.failed,
                "pending": progress.pending,
            }
        )
    return {
        **change_out(cr, summary.valid),
        "description": cr.description,
        "content_hash": cr.proposed_hash,
        "approval_list": [
            {
                "id": a.pk,
                "approver": a.approver_name,
                "decision": a.decision,
                "comment": a.comment,
                "valid": a.is_valid_for(cr),
                "created_at": a.created_at,
            }
            for a in approvals
        ],
        "blocking_preflight": summary.blocked,
        **selectors.masked_content(cr),
        "rollout": rollout,
        "rollout_strategy": cr.rollout_strategy,
        # open: what applying it would do now; since: whether it went wave by wave
        "staged": rollouts.is_staged(cr) if cr.is_open else Rollout.objects.filter(change_request=cr).exists(),
    }


def _get(change_id: int) -> ChangeRequest:
    return get_object_or_404(ChangeRequest, pk=change_id)


@router.get("", response={200: ChangeRequestPage, **READ_ERRORS}, summary="List change requests (newest first)")
def list_changes(request, filters: Query[ChangeFilters]):
    require_viewer(request)
    qs = selectors.filter_change_requests(
        state=filters.state,
        author=filters.author,
        resource=filters.resource,
        cluster=filters.cluster,
        emergency=filters.emergency,
        q=filters.q,
        approval_counts=False,
    )
    # values(): 50 model instances (and their revisions) were a sixth of the request's CPU
    qs = qs.select_related(None).values(*LIST_FIELDS)
    rows, next_cursor = page(
        qs, scope="change-requests", key="id", cursor=filters.cursor, limit=filters.limit, descending=True
    )
    counts = selectors.valid_approval_counts([row["id"] for row in rows])
    return {"items": [list_item(row, counts.get(row["id"], 0)) for row in rows], "next_cursor": next_cursor}


def list_item(row: dict, approvals: int) -> dict:
    """``change_out`` of a ``values(*LIST_FIELDS)`` row."""
    return {
        "id": row["id"],
        "state": row["state"],
        "kind": row["kind"],
        "title": row["title"],
        "subject": f"cluster {row['cluster_name']}" if row["kind"] == ChangeKind.UNJOIN else row["resource_repr"],
        "author": row["author_name"],
        "emergency": row["emergency"],
        "resource_id": row["resource_id"],
        "cluster_id": row["cluster_id"],
        "proposed_revision": row["proposed_revision__number"],
        "target_clusters": list(row["target_clusters"] or []),
        "required_approvals": row["required_approvals"],
        "approvals": approvals,
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "submitted_at": row["submitted_at"],
        "decided_at": row["decided_at"],
        "finished_at": row["finished_at"],
    }


@router.get(
    "/{int:change_id}",
    response={200: ChangeRequestDetailOut, **READ_ERRORS},
    summary="One change request: state, approvals, per-cluster diff, rollout progress",
)
def get_change(request, change_id: int):
    require_viewer(request)
    return change_detail_out(_get(change_id))


@router.post(
    "",
    response={201: ChangeRequestDetailOut, **WRITE_ERRORS},
    auth=needs(Role.OPERATOR),
    summary="Open a change request (Draft)",
)
def create_change(request, body: ChangeRequestIn):
    kwargs = {"actor": request.user, "title": body.title, "description": body.description}
    if body.kind == ChangeKind.UNJOIN:
        require_role(request.user, Role.ADMIN)  # before the body's checks, as for every write's role
        if body.cluster_id is None:
            raise ApiError(
                400, "invalid", "An unjoin request needs cluster_id.", {"cluster_id": ["Required for kind=unjoin."]}
            )
        cr = services.create_change_request(
            kind=ChangeKind.UNJOIN, cluster=get_object_or_404(Cluster, pk=body.cluster_id), **kwargs
        )
    else:
        if body.resource_id is None:
            raise ApiError(400, "invalid", "A change request needs resource_id.", {"resource_id": ["Required."]})
        if body.cluster_id is not None:  # it was ignored: a request for one resource goes where its placement says
            raise ApiError(
                400,
                "invalid",
                "cluster_id is for an unjoin request only; a change request for a resource goes to its placement.",
                {"cluster_id": ["Only with kind=unjoin."]},
            )
        if body.kind is not None and body.kind not in RESOURCE_KINDS:  # an upgrade goes through /clusters
            raise ApiError(
                422,
                "invalid_request",
                f"kind {body.kind!r} is not a change of a resource; use one of {', '.join(RESOURCE_KINDS)} "
                "(or leave it out).",
                {"kind": [f"One of {', '.join(RESOURCE_KINDS)} for a resource."]},
            )
        resource = get_object_or_404(FederatedResource, pk=body.resource_id)
        revision = get_object_or_404(resource.revisions, number=body.revision) if body.revision else None
        cr = services.create_change_request(resource, kind=body.kind, revision=revision, **kwargs)
    return Status(201, change_detail_out(cr))


# each step of the workflow answers with the request as it now is
TRANSITION = {200: ChangeRequestDetailOut, **WRITE_ERRORS}


def _transition(request, change_id: int, service, **kwargs) -> dict:
    return change_detail_out(service(_get(change_id), actor=request.user, **kwargs))


@router.post("/{int:change_id}/submit", response=TRANSITION, auth=needs(Role.OPERATOR), summary="Draft -> Submitted")
def submit_change(request, change_id: int):
    return _transition(request, change_id, services.submit)


@router.post(
    "/{int:change_id}/approve",
    response=TRANSITION,
    auth=needs(Role.APPROVER),
    summary="Approve (an approver who is not the author); applied once enough approvals",
)
def approve_change(request, change_id: int, body: ApproveIn):
    return _transition(request, change_id, services.approve, comment=body.comment, seen_hash=body.content_hash)


@router.post(
    "/{int:change_id}/reject", response=TRANSITION, auth=needs(Role.APPROVER), summary="Reject (comment required)"
)
def reject_change(request, change_id: int, body: DecisionIn):
    try:
        return _transition(request, change_id, services.reject, comment=body.comment)
    except services.TransitionError as exc:
        if body.comment.strip():
            raise
        # the service asks for the comment before it looks at the state: bad input, not a conflict
        raise ApiError(400, "invalid", str(exc), {"comment": ["Required: say why you reject the request."]}) from None


@router.post(
    "/{int:change_id}/cancel", response=TRANSITION, auth=needs(Role.OPERATOR), summary="Withdraw an open request"
)
def cancel_change(request, change_id: int, body: CancelIn):
    return _transition(request, change_id, services.cancel, reason=body.reason)
