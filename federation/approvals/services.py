"""Change-request workflow: every transition is an explicit, validated, audited service call.

Public API (views, the ``changes`` command and, later, fedctl call these):

    create_change_request(resource=None, *, actor, kind=None, revision=None, cluster=None,
                          title="", description="") -> ChangeRequest            (Draft)
    revise_change_request(cr, *, actor, revision) -> ChangeRequest   author or admin: new proposed revision; voids approvals
    refresh_change_request(cr, *, actor=None) -> ChangeRequest      re-hash content, re-snapshot diff, targets, preflight
    resource_settings_changed(resource, *, actor)   hook: retention/drift policy/rollout strategy changed, open requests re-hashed
    submit(cr, *, actor)                       Draft -> Submitted
    approve(cr, *, actor, comment="", seen_hash=None)   Submitted -> (Approved when enough valid approvals)
    reject(cr, *, actor, comment)              Submitted / Approved -> Rejected
    cancel(cr, *, actor, reason="")            Draft / Submitted / Approved -> Cancelled
    add_comment(cr, *, actor, body) -> Comment
    override_preflight(cr, *, actor, reason)   admin: blocking preflight problems no longer stop approval
    apply_change_request(cr, *, actor)         Approved -> Applying (propagation fan-out)
    emergency_apply(resource, *, actor, reason, revision=None) -> ChangeRequest   admin, flagged, Applying
    sync_change_request(cr) -> ChangeRequest   Applying -> Applied / PartiallyFailed / Failed when runs end
    approval_summary(cr) -> ApprovalSummary
    cluster_has_propagated_objects(cluster) -> bool   whether an unjoin must go through a request
    transition(cr, expected, new, *, verb, **fields)   the compare-and-set every state change uses

Errors: ``TransitionError`` (illegal or refused transition; ``str(exc)`` is the reason for the
user) and ``django.core.exceptions.PermissionDenied`` (missing role, approving content you wrote,
repointing someone else's request). What approvers agree to, and who counts as having written it,
is federation.approvals.content.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from clusters.models import Cluster
from clusters.services import unjoin_cluster
from federation import enqueue, propagation
from federation import services as federation_services
from federation.approvals import rollout
from federation.approvals.choices import ChangeKind, ChangeState, Decision, Severity
from federation.approvals.content import STAGED_KINDS, approved_content_hash, content_authors, request_content_hash
from federation.approvals.kinds import BUSY, handler_for
from federation.approvals.models import Approval, ChangeRequest, Comment, Rollout
from federation.approvals.preflight import run_preflight
from federation.approvals.selectors import outcome_rows
from federation.approvals.severity import flag_namespace_deletions, namespace_deletions
from federation.choices import DriftPolicy, PropagationReason, Retention, RunState, TargetState
from federation.models import FederatedResource, PropagatedVersion, PropagationRun, PropagationTarget, Revision
from federation.outcome_totals import retire_targets
from federation.protected import protected_namespace_of, protected_namespace_refusal
from federation.rollout_strategy import StrategyError, normalize_strategy
from fedportal.audit import record_event
from fedportal.masking import is_secret_kind, mask_secrets, secret_values
from fedportal.roles import Role, has_role, holders_of, require_role
from fedportal.text import with_article

logger = logging.getLogger(__name__)

PROD_LABEL = ("env", "prod")
SYNC_DELAY_SECONDS = 2


class TransitionError(Exception):
    """A transition that is not allowed now; the message says why (shown to the user, 4xx)."""


# --- small helpers ---------------------------------------------------------------------------


def _name(user) -> str:
    return user.get_username() if getattr(user, "pk", None) else "system"


def _user(user):
    return user if getattr(user, "pk", None) else None


def _fresh(cr: ChangeRequest | int) -> ChangeRequest:
    """The request as stored now, with what every transition reads joined in. The rest loads when
    first read: per-cluster diffs and outcome (large on a large fleet), and the base revision, the
    cluster (unjoins) and the author, which few transitions read. An eight-table join took
    PostgreSQL longer to plan than a second query takes to run, and a transition reads the request
    several times."""
    pk = cr.pk if isinstance(cr, ChangeRequest) else cr
    return (
        ChangeRequest.objects.select_related("resource__type", "resource__propagated_revision", "proposed_revision")
        .defer("diffs", "outcome")
        .get(pk=pk)
    )


def _snapshot(cr: ChangeRequest) -> dict:
    return {
        "state": cr.state,
        "kind": cr.kind,
        "proposed_hash": cr.proposed_hash,
        "proposed_revision": cr.proposed_revision.number if cr.proposed_revision_id and cr.proposed_revision else None,
    }


def transition(cr: ChangeRequest, expected: tuple[str, ...], new: str, *, verb: str, **fields) -> ChangeRequest:
    """Compare-and-set: move from one of ``expected`` to ``new``; TransitionError when the state moved on."""
    now = timezone.now()
    updated = ChangeRequest.objects.filter(pk=cr.pk, state__in=expected).update(state=new, updated_at=now, **fields)
    if not updated:
        actual = ChangeRequest.objects.filter(pk=cr.pk).values_list("state", flat=True).first()
        raise TransitionError(_illegal(cr.pk, actual, verb, expected))
    return _fresh(cr)


def _transition_audited(
    cr: ChangeRequest,
    expected: tuple[str, ...],
    new: str,
    *,
    verb: str,
    actor,
    action: str,
    summary: str,
    after: dict | None = None,
    **fields,
) -> ChangeRequest:
    """``transition`` and its audit event (state before -> ``new``, plus ``after``), in the caller's transaction."""
    before = cr.state
    cr = transition(cr, expected, new, verb=verb, **fields)
    _audit(action, cr, actor=actor, summary=summary, before={"state": before}, after={"state": new, **(after or {})})
    return cr


def _illegal(pk, actual, verb: str, expected) -> str:
    if actual is None:
        return f"CR-{pk} no longer exists."
    allowed = " or ".join(ChangeState(s).label for s in expected)
    return f"CR-{pk} is {ChangeState(actual).label}: only {with_article(allowed)} request can be {verb}."


def _require_state(cr: ChangeRequest, expected: tuple[str, ...], verb: str) -> None:
    if cr.state not in expected:
        raise TransitionError(_illegal(cr.pk, cr.state, verb, expected))


def _audit(action: str, cr: ChangeRequest, *, actor, summary: str, before=None, after=None) -> None:
    record_event(
        f"approvals.change.{action}",
        actor=actor,
        obj=cr,
        cluster=cr.cluster_name if cr.kind in (ChangeKind.UNJOIN, ChangeKind.UPGRADE) else "",
        summary=summary,
        before=before,
        after=after,
    )


def _setting(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


# --- targets and required approvals ------------------------------------------------------------


def required_approvals_for(clusters, *, severe: bool = False) -> int:
    """Max over the target clusters: env=prod needs FEDPORTAL_APPROVALS_PROD, others
    FEDPORTAL_APPROVALS_DEFAULT; a request with no target needs the default. A severe request
    (it deletes a Namespace from a member) needs the production count whatever the environment."""
    default = max(1, _setting("FEDPORTAL_APPROVALS_DEFAULT", 1))
    prod = max(1, _setting("FEDPORTAL_APPROVALS_PROD", 2))
    needed = prod if severe else default
    for cluster in clusters:
        labels = cluster.labels or {}
        if labels.get(PROD_LABEL[0]) == PROD_LABEL[1]:
            needed = max(needed, prod)
    return needed


# a request that failed on every target still made its revision the propagated one
APPROVED_AND_SENT = (ChangeState.APPLYING, ChangeState.APPLIED, ChangeState.PARTIALLY_FAILED, ChangeState.FAILED)


def approvals_granted(resource: FederatedResource, revision: Revision) -> int | None:
    """How many approvals the content of ``revision`` went out with: the most any request that
    applied it needed (a rollback's restores content and carries none of its own);
    FEDPORTAL_APPROVALS_DEFAULT when only an emergency apply sent it; None when no request did (the
    content predates approvals: fixtures, an import). A cluster joining its placement that needs
    more (a production cluster, after a change approved for others) gets a reconcile request rather
    than the content (federation.membership)."""
    sent = ChangeRequest.objects.filter(
        resource=resource, state__in=APPROVED_AND_SENT, proposed_revision__content_hash=revision.content_hash
    ).exclude(kind=ChangeKind.ROLLBACK)
    granted = (
        sent.filter(emergency=False)
        .order_by("-required_approvals")
        .values_list("required_approvals", flat=True)
        .first()
    )
    if granted is not None:
        return granted
    return max(1, _setting("FEDPORTAL_APPROVALS_DEFAULT", 1)) if sent.exists() else None


def _present_versions(resource: FederatedResource):
    return [pv for pv in resource.propagated_versions.select_related("cluster") if pv.is_present]


def _targets(cr: ChangeRequest) -> list[Cluster]:
    handler = handler_for(cr.kind)
    if handler is not None:
        return handler.targets(cr)
    if cr.kind == ChangeKind.UNJOIN:
        return [cr.cluster] if cr.cluster_id else []
    if cr.resource_id is None:
        return []
    if cr.kind == ChangeKind.DELETE:
        return [pv.cluster for pv in _present_versions(cr.resource)]
    if cr.proposed_revision_id is None:
        return []
    plans = propagation.plan_targets(cr.resource, cr.proposed_revision)
    return [p.cluster for p in plans]


def _diffs(cr: ChangeRequest) -> list[dict]:
    """Per target cluster: what applying would do, against what is live now."""
    if handler_for(cr.kind) is not None:
        return []  # the kind's own page shows its plan
    if cr.kind == ChangeKind.UNJOIN:
        rows = []
        for pv in (
            PropagatedVersion.objects.filter(cluster=cr.cluster)
            .select_related("resource__type")
            .order_by("resource__namespace", "resource__name")
        ):
            if not pv.is_present:
                continue
            orphan = pv.resource.retention == Retention.ORPHAN
            rows.append(
                {
                    "cluster": cr.cluster_name,
                    "resource": str(pv.resource),
                    "action": "orphan" if orphan else "delete",
                    "diff": "",
                    "replicas": None,
                    "warnings": [],
                    "message": "Left in place (retention Orphan)." if orphan else "Will be deleted from the cluster.",
                }
            )
        if not rows:
            rows.append(
                {
                    "cluster": cr.cluster_name,
                    "resource": "",
                    "action": "unchanged",
                    "diff": "",
                    "replicas": None,
                    "warnings": [],
                    "message": "No propagated objects on this cluster.",
                }
            )
        return rows
    resource = cr.resource
    if resource is None:
        return []
    if cr.kind == ChangeKind.DELETE:
        orphan = resource.retention == Retention.ORPHAN
        return [
            {
                "cluster": pv.cluster.name,
                "resource": str(resource),
                "action": "orphan" if orphan else "delete",
                "diff": "",
                "replicas": None,
                "warnings": [],
                "message": "Left in place (retention Orphan)." if orphan else "Will be deleted.",
            }
            for pv in _present_versions(resource)
        ]
    if cr.proposed_revision_id is None:
        return []
    rows = []
    for preview in propagation.preview_revision(resource, cr.proposed_revision):
        rows.append(
            {
                "cluster": preview.cluster.name,
                "resource": str(resource),
                "action": preview.action,
                "diff": preview.diff,
                "replicas": preview.replicas,
                "message": preview.message,
                "warnings": list(preview.warnings),
                "replicas_before": preview.live_replicas,
            }
        )
    return rows


def _repropose(cr: ChangeRequest, new_hash: str, *, verb: str, **fields) -> tuple[ChangeRequest, int]:
    """An open request now proposes other content: an Approved one goes back to Submitted, a preflight
    override and the decision time are cleared. Returns (request, approvals given that are now void)."""
    new_state = ChangeState.SUBMITTED if cr.state == ChangeState.APPROVED else cr.state
    cr = transition(
        cr,
        (cr.state,),
        new_state,
        verb=verb,
        proposed_hash=new_hash,
        preflight_override_hash="",
        decided_at=None,
        **fields,
    )
    return cr, cr.approvals.filter(decision=Decision.APPROVE).exclude(content_hash=new_hash).count()


def _recheck_content(cr: ChangeRequest, *, actor=None) -> tuple[ChangeRequest, bool]:
    """Re-hash what an open request would apply (federation.approvals.content). When it changed
    (say the retention went from Orphan to Delete) the approvals given so far are void: the stored
    hash moves on, an Approved request goes back to Submitted. Returns (request, changed)."""
    cr = _fresh(cr)
    if not cr.is_open:
        return cr, False
    new_hash = request_content_hash(cr)
    if new_hash == cr.proposed_hash:
        return cr, False
    before = _snapshot(cr)
    with transaction.atomic():
        cr, voided = _repropose(cr, new_hash, verb="changed")
        settings_now = (
            {"retention": cr.resource.retention, "drift_policy": cr.resource.drift_policy} if cr.resource_id else {}
        )
        _audit(
            "content_changed",
            cr,
            actor=actor,
            summary=f"What CR-{cr.pk} would apply changed" + (f"; {voided} approval(s) void" if voided else ""),
            before=before,
            after={**_snapshot(cr), **settings_now, "voided": voided},
        )
    return cr, True


def refresh_change_request(
    cr: ChangeRequest, *, actor=None, preflight: bool = True, diffs: bool = True
) -> ChangeRequest:
    """Re-hash the content (_recheck_content), re-snapshot targets, required approvals, the per-cluster
    diff and preflight results. Reads the clusters (network) outside any transaction; never raises
    for an unreachable cluster. Operators and approvers refresh (the system, with no actor, too)."""
    if actor is not None and not (has_role(actor, Role.OPERATOR) or has_role(actor, Role.APPROVER)):
        raise PermissionDenied("Refreshing a change request needs the operator or approver role.")
    cr = _fresh(cr)
    if cr.is_finished:
        return cr
    cr, _changed = _recheck_content(cr, actor=actor)
    targets = _targets(cr)
    deletions = namespace_deletions(cr)
    fields = {
        "target_clusters": sorted({c.name for c in targets}),
        "required_approvals": required_approvals_for(targets, severe=bool(deletions)),
    }
    if diffs:
        fields.update(diffs=flag_namespace_deletions(_diffs(cr), deletions), diffs_at=timezone.now())
    if preflight:
        fields["preflight"] = [p.as_dict() for p in run_preflight(cr)]
        if cr.proposed_revision is not None and is_secret_kind(cr.proposed_revision.resource.type.kind):
            # a check's message may quote a field's value
            known = secret_values(cr.proposed_revision.snapshot, secret=True)
            fields["preflight"] = mask_secrets(fields["preflight"], known=known)
        fields["preflight_at"] = timezone.now()
    ChangeRequest.objects.filter(pk=cr.pk).update(**fields)
    return _fresh(cr)


def resource_settings_changed(resource: FederatedResource, *, actor) -> None:
    """federation.content_hooks: a resource's retention, drift policy or rollout strategy changed
    (inside the saving transaction). Its open requests, and open unjoins of clusters holding it, are re-hashed now
    (their approvals void at once) and their diffs re-taken after the commit (that reads clusters)."""
    clusters = PropagatedVersion.objects.filter(resource=resource).values("cluster_id")
    affected = ChangeRequest.objects.filter(state__in=ChangeState.open()).filter(
        Q(resource=resource) | Q(kind=ChangeKind.UNJOIN, cluster_id__in=clusters)
    )
    for pk in affected.values_list("pk", flat=True):
        _cr, changed = _recheck_content(pk, actor=actor)
        if changed:
            transaction.on_commit(lambda pk=pk: refresh_change_request(pk, actor=actor))


def cluster_has_propagated_objects(cluster: Cluster) -> bool:
    """Whether unjoining ``cluster`` must go through a change request (it holds our objects)."""
    return any(
        pv.is_present for pv in PropagatedVersion.objects.filter(cluster=cluster).only("status", "applied_manifest")
    )


# --- create / revise ---------------------------------------------------------------------------


def _default_kind(resource: FederatedResource, revision: Revision) -> str:
    if resource.propagated_revision_id is None:
        return ChangeKind.CREATE
    if revision.parent_id and revision.message.startswith("Rollback"):
        return ChangeKind.ROLLBACK
    return ChangeKind.EDIT


def _default_title(kind: str, subject: str, revision: Revision | None) -> str:
    suffix = f" (revision {revision.number})" if revision is not None else ""
    return f"{ChangeKind(kind).label} {subject}{suffix}"[:200]


def _strategy_override(raw) -> dict | None:
    """A request's own rollout strategy (None: the resource's; {}: every cluster at once)."""
    if raw is None:
        return None
    try:
        return normalize_strategy(raw)
    except StrategyError as exc:
        raise TransitionError(f"Rollout strategy: {exc}") from None


def create_change_request(
    resource: FederatedResource | None = None,
    *,
    actor,
    kind: str | None = None,
    revision: Revision | None = None,
    cluster: Cluster | None = None,
    title: str = "",
    description: str = "",
    snapshot: bool = True,
    rollout_strategy: dict | None = None,
) -> ChangeRequest:
    """Open a Draft. For a resource: proposes ``revision`` (default: its current revision); the kind
    is create (never propagated), edit, rollback or delete. For ``kind="unjoin"``: ``cluster``."""
    if kind == ChangeKind.UNJOIN:
        require_role(actor, Role.ADMIN)
        if cluster is None:
            raise TransitionError("An unjoin request needs the cluster to unjoin.")
        resource = None
        revision = None
    else:
        if kind == ChangeKind.RECONCILE and actor is not None:
            # FedPortal opens those when a cluster joins or is relabelled (federation.membership); one a
            # person opened re-applied the propagated revision everywhere, past an aborted rollout's waves
            raise TransitionError(
                "Reconcile requests are opened by FedPortal when a cluster joins or is relabelled. To repeat "
                "what was approved on one cluster use Re-sync; to change the clusters, edit the resource."
            )
        if kind != ChangeKind.RECONCILE:
            require_role(actor, Role.OPERATOR)
        if resource is None:
            raise TransitionError("A change request needs the federated resource it changes.")
        resource = FederatedResource.objects.select_related("type", "current_revision", "propagated_revision").get(
            pk=resource.pk
        )
        refusal = protected_namespace_refusal(resource)
        if refusal:
            raise TransitionError(refusal)
        if kind == ChangeKind.DELETE:
            revision = None
        else:
            revision = revision or resource.current_revision
            if revision is None:
                raise TransitionError(f"{resource} has no revision to propose.")
            if revision.resource_id != resource.pk:
                raise TransitionError("That revision belongs to another resource.")
            kind = kind or _default_kind(resource, revision)
            if kind not in (ChangeKind.CREATE, ChangeKind.EDIT, ChangeKind.ROLLBACK, ChangeKind.RECONCILE):
                raise TransitionError(f"Unknown change kind {kind!r}.")
            if kind == ChangeKind.CREATE and resource.propagated_revision_id is not None:
                # accepted, it opened a request that changed nothing under a "Create" title
                raise TransitionError(
                    f"{resource} was propagated already (revision {resource.propagated_revision.number}): a create "
                    "request is for a resource never propagated. Leave the kind out to propose its current revision."
                )
            if kind == ChangeKind.RECONCILE and resource.propagated_revision_id != revision.pk:
                raise TransitionError("A reconcile request re-applies the propagated revision, as approved.")
            if (
                kind not in (ChangeKind.CREATE, ChangeKind.RECONCILE)
                and resource.propagated_revision_id == revision.pk
                and not _settings_pending(resource)
                and not _clusters_behind(resource, revision)
                # every cluster then placed had it when its rollout was aborted: a cluster joining
                # since waits for the next change (federation.membership), and this is that change
                and not rollout.last_rollout_aborted(resource.pk)
            ):
                raise TransitionError(
                    f"Revision {revision.number} of {resource} is already what the clusters have; edit the resource first."
                )
    subject = cluster.name if kind == ChangeKind.UNJOIN else str(resource)  # "Unjoin cluster <name>"
    strategy = _strategy_override(rollout_strategy) if resource else None
    with transaction.atomic():
        cr = ChangeRequest.objects.create(
            kind=kind,
            title=(title or "").strip()[:200] or _default_title(kind, subject, revision),
            description=description or "",
            author=_user(actor),
            author_name=_name(actor),
            resource=resource,
            resource_repr=str(resource) if resource else "",
            cluster=cluster,
            cluster_name=cluster.name if cluster else "",
            proposed_revision=revision,
            proposed_hash=approved_content_hash(kind, resource, revision, cluster, strategy_override=strategy),
            base_revision=resource.propagated_revision if resource else None,
            rollout_strategy=strategy,
        )
        _audit(
            "create",
            cr,
            actor=actor,
            summary=f"Drafted CR-{cr.pk}: {cr.title}",
            after={
                **_snapshot(cr),
                "subject": cr.subject,
                "base_revision": resource.propagated_revision.number
                if resource and resource.propagated_revision
                else None,
            },
        )
    if snapshot:
        cr = refresh_change_request(cr, actor=actor)
    return cr


def revise_change_request(cr: ChangeRequest, *, actor, revision: Revision) -> ChangeRequest:
    """Point an open request at a new revision of its resource. Only the request's author may (or
    an admin, which the audit event records). Approvals given for the old content become void; an
    Approved request goes back to Submitted."""
    require_role(actor, Role.OPERATOR)
    cr = _fresh(cr)
    by_admin = cr.author_id != getattr(actor, "pk", None)
    if by_admin and not has_role(actor, Role.ADMIN):
        raise PermissionDenied(
            f"Only the author of CR-{cr.pk} ({cr.author_name}) or an admin can point it at another revision; "
            "draft your own request for your revision."
        )
    _require_state(cr, ChangeState.open(), "revised")
    if cr.kind in (ChangeKind.UNJOIN, ChangeKind.DELETE):
        raise TransitionError(f"A {ChangeKind(cr.kind).label.lower()} request has no revision to revise.")
    if revision.resource_id != cr.resource_id:
        raise TransitionError("That revision belongs to another resource.")
    if revision.pk == cr.proposed_revision_id:
        return cr
    before = _snapshot(cr)
    with transaction.atomic():
        new_hash = approved_content_hash(
            cr.kind, cr.resource, revision, cr.cluster, strategy_override=cr.rollout_strategy
        )
        fields = {"proposed_revision": revision}
        old_revision = cr.proposed_revision
        if cr.title == _default_title(cr.kind, str(cr.resource), old_revision):
            # a title FedPortal made names the revision: it follows the request (one a person wrote stays)
            fields["title"] = _default_title(cr.kind, str(cr.resource), revision)
        cr, voided = _repropose(cr, new_hash, verb="revised", **fields)
        _audit(
            "revise",
            cr,
            actor=actor,
            summary=f"CR-{cr.pk} now proposes revision {revision.number}"
            + (f"; {voided} approval(s) void" if voided else "")
            + (f" (by admin {_name(actor)}, not the author)" if by_admin else ""),
            before=before,
            after={**_snapshot(cr), "by_admin": by_admin},
        )
    return refresh_change_request(cr, actor=actor)


def revise_from_current(cr: ChangeRequest, *, actor) -> ChangeRequest:
    """After the resource was edited, propose its current revision instead."""
    cr = _fresh(cr)
    if cr.resource is None or cr.resource.current_revision is None:
        raise TransitionError("The resource has no current revision.")
    return revise_change_request(cr, actor=actor, revision=cr.resource.current_revision)


# --- submit / approve / reject / cancel -------------------------------------------------------


def may_submit(cr: ChangeRequest, user) -> bool:
    """Its author, or an admin, releases a draft for approval; a draft the system opened (a reconcile
    request, no author) any operator. Another operator submitting someone's draft released content its
    author had not released, and an operator who is an approver too could then approve it."""
    opened_by_the_system = cr.author_id is None and cr.kind == ChangeKind.RECONCILE
    return opened_by_the_system or cr.author_id == getattr(user, "pk", None) or has_role(user, Role.ADMIN)


def submit(cr: ChangeRequest, *, actor) -> ChangeRequest:
    require_role(actor, Role.OPERATOR)
    cr = _fresh(cr)
    _require_state(cr, (ChangeState.DRAFT,), "submitted")
    if not may_submit(cr, actor):
        raise PermissionDenied(f"Only the author of CR-{cr.pk} ({cr.author_name}) or an admin can submit it.")
    if cr.kind == ChangeKind.UNJOIN:
        require_role(actor, Role.ADMIN)
    handler = handler_for(cr.kind)
    if handler is not None:
        _check_kind(handler, cr)
    elif cr.kind != ChangeKind.UNJOIN and cr.resource_id is None:
        raise TransitionError(f"The resource of CR-{cr.pk} no longer exists; cancel the request.")
    elif cr.kind not in (ChangeKind.UNJOIN, ChangeKind.DELETE) and cr.proposed_revision_id is None:
        raise TransitionError(f"CR-{cr.pk} proposes no revision.")
    cr = refresh_change_request(cr, actor=actor)
    with transaction.atomic():
        cr = transition(cr, (ChangeState.DRAFT,), ChangeState.SUBMITTED, verb="submitted", submitted_at=timezone.now())
        _audit(
            "submit",
            cr,
            actor=actor,
            summary=f"Submitted CR-{cr.pk}: {cr.title} (needs {cr.required_approvals} approval(s))",
            before={"state": ChangeState.DRAFT},
            after={**_snapshot(cr), "targets": cr.target_clusters, "required_approvals": cr.required_approvals},
        )
    return cr


@dataclass
class ApprovalSummary:
    valid: int
    required: int
    void: int
    blocking: list[dict]
    overridden: bool

    @property
    def enough(self) -> bool:
        return self.valid >= self.required

    @property
    def blocked(self) -> bool:
        return bool(self.blocking) and not self.overridden


def approvers_among(user_ids) -> set[int]:
    """Those of ``user_ids`` who hold the approver role now (active; in the approver or admin group,
    or superusers): one query, none for an empty set."""
    if not user_ids:
        return set()
    return set(holders_of(Role.APPROVER).filter(pk__in=user_ids).values_list("pk", flat=True))


def approval_summary(cr: ChangeRequest, approvals=None, authors=None) -> ApprovalSummary:
    """Valid approvals: given for the content proposed now, by someone who wrote none of it and who
    still holds the approver role (an approver removed from the role meanwhile no longer counts)."""
    approvals = list(cr.approvals.all()) if approvals is None else approvals
    authors = content_authors(cr) if authors is None else authors
    approved = [a for a in approvals if a.decision == Decision.APPROVE]
    valid = {
        a.approver_id
        for a in approved
        if a.content_hash == cr.proposed_hash and a.approver_id is not None and a.approver_id not in authors
    }
    valid &= approvers_among(valid)
    blocking = [p for p in (cr.preflight or []) if p.get("severity") == Severity.BLOCKING]
    return ApprovalSummary(
        valid=len(valid),
        required=cr.required_approvals,
        void=sum(1 for a in approved if a.content_hash != cr.proposed_hash),
        blocking=blocking,
        overridden=bool(cr.preflight_override_hash) and cr.preflight_override_hash == cr.proposed_hash,
    )


def _refuse_content_author(cr: ChangeRequest, actor) -> None:
    wrote = content_authors(cr).get(getattr(actor, "pk", None))
    if wrote:
        raise PermissionDenied(
            f"You wrote part of what CR-{cr.pk} would apply ({wrote}): another approver must approve it."
        )


def _proposal_label(cr: ChangeRequest) -> str:
    revision = cr.proposed_revision
    return f"revision {revision.number}" if revision is not None else "other content"


def _auto_apply() -> bool:
    return bool(getattr(settings, "FEDPORTAL_APPROVALS_AUTO_APPLY", True))


def approve(cr: ChangeRequest, *, actor, comment: str = "", seen_hash: str | None = None) -> ChangeRequest:
    """Record an approval for the current content. When enough valid approvals exist the request
    becomes Approved (and, with FEDPORTAL_APPROVALS_AUTO_APPLY, is applied at once).
    ``seen_hash``: the content hash of what the approver reviewed (the page's form and, when given,
    the API's ``content_hash``); the approval is refused when the request proposes something else
    now (its author re-pointed it at a newer revision meanwhile)."""
    require_role(actor, Role.APPROVER)
    cr = _fresh(cr)
    if cr.author_id is not None and cr.author_id == getattr(actor, "pk", None):
        raise PermissionDenied("You wrote this request: another approver must approve it.")
    _require_state(cr, (ChangeState.SUBMITTED,), "approved")
    if seen_hash is not None and seen_hash != cr.proposed_hash:
        raise TransitionError(
            f"CR-{cr.pk} does not propose what you reviewed (it changed since you opened it, or the content "
            f"hash is not its): it proposes {_proposal_label(cr)}. Review it again before approving."
        )
    _refuse_content_author(cr, actor)  # before the refresh below, which a refused approver must not cause
    # What decides the approval is re-checked now: content, targets, approvals needed, preflight. The
    # live diff (one read per target cluster) was taken at submit and is re-taken by "Refresh diff".
    seen_hash = cr.proposed_hash
    cr = refresh_change_request(cr, actor=actor, diffs=False)
    if cr.proposed_hash != seen_hash:
        refresh_change_request(cr, actor=actor, preflight=False)
        raise TransitionError(
            f"What CR-{cr.pk} would apply changed while you were reviewing it (a retention or drift "
            "policy, a rollout strategy, or what is on the cluster); the diff is refreshed and earlier approvals are void: "
            "review it again."
        )
    handler = handler_for(cr.kind)
    if handler is not None:
        _check_kind(handler, cr)  # the kind's rules, again at approval
    if cr.kind == ChangeKind.UNJOIN and not (cr.author is not None and has_role(cr.author, Role.ADMIN)):
        # an unjoin is an admin's request: approving it is what carries it out (on its authority)
        raise TransitionError(
            f"CR-{cr.pk} unjoins a cluster, which an admin must request: its author {cr.author_name} "
            "no longer holds the admin role. Reject it; an admin can request it again."
        )
    _refuse_content_author(cr, actor)  # again: the refreshed content may hold another edit
    summary = approval_summary(cr)
    if summary.blocked:
        problems = _blocking_problems(summary)
        raise TransitionError(
            f"Preflight found blocking problems ({problems}). Fix the change, or an admin can override with a reason."
        )
    comment = (comment or "").strip()
    with transaction.atomic():
        # lock the row so two approvers counting at once cannot both miss the threshold
        locked = ChangeRequest.objects.select_for_update().get(pk=cr.pk)
        if locked.state != ChangeState.SUBMITTED or locked.proposed_hash != cr.proposed_hash:
            raise TransitionError(
                _illegal(cr.pk, locked.state, "approved", (ChangeState.SUBMITTED,))
                if locked.state != ChangeState.SUBMITTED
                else f"CR-{cr.pk} changed while you were reviewing it; review it again."
            )
        if cr.approvals.filter(approver=actor, content_hash=cr.proposed_hash, decision=Decision.APPROVE).exists():
            raise TransitionError(f"You already approved this version of CR-{cr.pk}.")
        try:
            with transaction.atomic():
                approval = Approval.objects.create(
                    change_request=cr,
                    approver=actor,
                    approver_name=_name(actor),
                    decision=Decision.APPROVE,
                    comment=comment,
                    content_hash=cr.proposed_hash,
                )
        except IntegrityError:
            raise TransitionError(f"You already approved this version of CR-{cr.pk}.") from None
        summary = approval_summary(cr)
        _audit(
            "approve",
            cr,
            actor=actor,
            summary=f"{_name(actor)} approved CR-{cr.pk} ({summary.valid} of {summary.required})"
            + (f": {comment}" if comment else ""),
            after={
                "approval": approval.pk,
                "content_hash": cr.proposed_hash,
                "comment": comment,
                "valid": summary.valid,
                "required": summary.required,
            },
        )
        if summary.enough:
            cr = _transition_audited(
                cr,
                (ChangeState.SUBMITTED,),
                ChangeState.APPROVED,
                verb="approved",
                actor=actor,
                action="approved",
                summary=f"CR-{cr.pk} approved ({summary.valid} of {summary.required})",
                decided_at=timezone.now(),
            )
    cr = _fresh(cr)
    if cr.state == ChangeState.APPROVED and _auto_apply():
        try:
            cr = _apply(cr, actor=actor, rechecked=True)
        except TransitionError as exc:
            raise TransitionError(
                f"CR-{cr.pk} is approved, but applying it failed: {exc} It stays Approved; apply it again once fixed."
            ) from exc
    return cr


def reject(cr: ChangeRequest, *, actor, comment: str) -> ChangeRequest:
    require_role(actor, Role.APPROVER)
    cr = _fresh(cr)
    if cr.author_id is not None and cr.author_id == getattr(actor, "pk", None):
        raise PermissionDenied("You wrote this request: withdraw it with Cancel instead of rejecting it.")
    comment = (comment or "").strip()
    if not comment:
        raise TransitionError("Say why you reject the request (a comment is required).")
    _require_state(cr, (ChangeState.SUBMITTED, ChangeState.APPROVED), "rejected")
    with transaction.atomic():
        cr = _transition_audited(
            cr,
            (ChangeState.SUBMITTED, ChangeState.APPROVED),
            ChangeState.REJECTED,
            verb="rejected",
            actor=actor,
            action="reject",
            summary=f"{_name(actor)} rejected CR-{cr.pk}: {comment}",
            after={"comment": comment},
            decided_at=timezone.now(),
            finished_at=timezone.now(),
        )
        Approval.objects.create(
            change_request=cr,
            approver=actor,
            approver_name=_name(actor),
            decision=Decision.REJECT,
            comment=comment,
            content_hash=cr.proposed_hash,
        )
    return cr


def cancel(cr: ChangeRequest, *, actor, reason: str = "") -> ChangeRequest:
    """The author (operator) or an admin withdraws an open request."""
    require_role(actor, Role.OPERATOR)
    cr = _fresh(cr)
    _require_state(cr, ChangeState.open(), "cancelled")
    if cr.author_id != getattr(actor, "pk", None) and not has_role(actor, Role.ADMIN):
        raise PermissionDenied("Only the author or an admin can cancel a change request.")
    with transaction.atomic():
        cr = _transition_audited(
            cr,
            ChangeState.open(),
            ChangeState.CANCELLED,
            verb="cancelled",
            actor=actor,
            action="cancel",
            summary=f"Cancelled CR-{cr.pk}" + (f": {reason}" if reason else ""),
            after={"reason": reason},
            finished_at=timezone.now(),
        )
    return cr


def add_comment(cr: ChangeRequest, *, actor, body: str) -> Comment:
    require_role(actor, Role.VIEWER)
    body = (body or "").strip()
    if not body:
        raise TransitionError("A comment cannot be empty.")
    if len(body) > 5000:
        raise TransitionError("A comment can be at most 5000 characters.")
    with transaction.atomic():
        comment = Comment.objects.create(change_request=cr, author=_user(actor), author_name=_name(actor), body=body)
        _audit(
            "comment",
            cr,
            actor=actor,
            summary=f"{_name(actor)} commented on CR-{cr.pk}: {body[:200]}",
            after={"comment": comment.pk, "body": body},
        )
    return comment


OVERRIDABLE_STATES = (ChangeState.DRAFT, ChangeState.SUBMITTED, ChangeState.APPROVED)


def override_preflight(cr: ChangeRequest, *, actor, reason: str) -> ChangeRequest:
    """Admin: let approval go ahead despite blocking preflight problems (for this content only); an
    Approved request too, whose apply a problem found since its approval refuses (``_recheck_at_apply``)."""
    require_role(actor, Role.ADMIN)
    reason = (reason or "").strip()
    if not reason:
        raise TransitionError("Give a reason for overriding the preflight checks.")
    cr = _fresh(cr)
    _require_state(cr, OVERRIDABLE_STATES, "overridden")
    with transaction.atomic():
        ChangeRequest.objects.filter(pk=cr.pk).update(
            preflight_override_reason=reason,
            preflight_override_hash=cr.proposed_hash,
            preflight_override_by=_user(actor),
            updated_at=timezone.now(),
        )
        _audit(
            "preflight_override",
            cr,
            actor=actor,
            summary=f"{_name(actor)} overrode preflight of CR-{cr.pk}: {reason}",
            after={"reason": reason, "problems": [p for p in cr.preflight if p.get("severity") == Severity.BLOCKING]},
        )
    return _fresh(cr)


# --- apply -------------------------------------------------------------------------------------


def _schedule_sync(cr_id: int, countdown: float = SYNC_DELAY_SECONDS) -> None:
    enqueue.sync_change_request(cr_id, countdown=countdown)


def _check_kind(handler, cr: ChangeRequest) -> None:
    try:
        handler.check(cr)
    except ValueError as exc:
        raise TransitionError(str(exc)) from None


def _start(cr: ChangeRequest, *, actor) -> list[PropagationRun]:
    """Start the propagation runs of a request (inside the caller's transaction)."""
    handler = handler_for(cr.kind)
    if handler is not None:
        _check_kind(handler, cr)
        try:
            handler.start(cr, actor=actor)
        except ValueError as exc:
            raise TransitionError(str(exc)) from None
        return []
    if cr.kind == ChangeKind.UNJOIN:
        if cr.cluster is None:
            raise TransitionError("The cluster to unjoin no longer exists.")
        runs = []
        for pv in PropagatedVersion.objects.filter(cluster=cr.cluster).select_related("resource__type"):
            if pv.is_present:
                run = propagation.remove_from_cluster(pv.resource, cluster=cr.cluster, actor=actor)
                if run is not None:
                    runs.append(run)
        return runs
    resource = cr.resource
    if resource is None:
        raise TransitionError("The resource of this request no longer exists.")
    if cr.kind == ChangeKind.DELETE:
        try:
            revision = federation_services.withdraw_resource(resource, actor=actor, message=f"Delete (CR-{cr.pk})")
        except federation_services.SpecError as exc:  # a page's error, not a 500
            raise TransitionError(f"The delete cannot be saved: {exc}") from None
        ChangeRequest.objects.filter(pk=cr.pk).update(proposed_revision=revision)
    else:
        revision = cr.proposed_revision
        if revision is None:
            raise TransitionError("The proposed revision no longer exists.")
    try:
        return [propagation.propagate_revision(resource, actor=actor, revision=revision)]
    except propagation.PropagationError as exc:
        raise TransitionError(str(exc)) from None


def apply_change_request(cr: ChangeRequest, *, actor) -> ChangeRequest:
    """Approved -> Applying: run federation's propagation; the outcome is recorded when it ends.
    Operators apply resource changes; an unjoin needs an admin."""
    require_role(actor, Role.OPERATOR)
    cr = _fresh(cr)
    if cr.kind == ChangeKind.UNJOIN:
        require_role(actor, Role.ADMIN)
    return _apply(cr, actor=actor)


def _clusters_behind(resource: FederatedResource, revision: Revision) -> bool:
    """A cluster holds the resource at another revision than ``revision`` (a staged rollout aborted
    or halted part way, or a cluster where applying it failed): a request for the revision the
    resource says it propagated is how the rest of the clusters get it."""
    return (
        PropagatedVersion.objects.filter(resource=resource, applied_manifest__isnull=False)
        .exclude(revision=revision)
        .exclude(status__in=(PropagationReason.REMOVED, PropagationReason.ORPHANED))
        .exists()
    )


def _settings_pending(resource: FederatedResource) -> bool:
    """The resource was switched to Enforce or to retention Delete and no applied request held that
    yet: a request for the revision the clusters have is how it gets approved (there is no new
    revision to propose)."""
    return (resource.drift_policy == DriftPolicy.ENFORCE and resource.approved_drift_policy != DriftPolicy.ENFORCE) or (
        resource.retention == Retention.DELETE and resource.approved_retention != Retention.DELETE
    )


def _adopt_approved_settings(cr: ChangeRequest) -> None:
    """The request's approved content held its resource's drift policy and retention (its hash was
    checked again just now): drift checks and removals outside a change request act on them from
    here on (``approved_drift_policy``, ``approved_retention``)."""
    if cr.kind in STAGED_KINDS and cr.resource_id:
        FederatedResource.objects.filter(pk=cr.resource_id).update(
            approved_drift_policy=F("drift_policy"), approved_retention=F("retention")
        )


def _apply(cr: ChangeRequest, *, actor, rechecked: bool = False) -> ChangeRequest:
    """Approved -> Applying. ``rechecked``: the approval that made it Approved re-checked its targets,
    approvals needed and preflight just now (auto-apply); a request applied later is checked again
    here (``_recheck_at_apply``)."""
    cr = _fresh(cr)
    _require_state(cr, (ChangeState.APPROVED,), "applied")
    cr, changed = _recheck_content(cr, actor=actor)
    if changed:
        refresh_change_request(cr, actor=actor)
        raise TransitionError(
            f"What CR-{cr.pk} would apply changed after it was approved; its approvals are void "
            "and it is back in Submitted for a new review."
        )
    if not rechecked:
        cr = _recheck_at_apply(cr, actor=actor)
    summary = approval_summary(cr)
    if not summary.enough:
        raise TransitionError(f"CR-{cr.pk} has {summary.valid} valid approval(s) of {summary.required}.")
    with transaction.atomic():
        rollout.lock_resource(cr.resource_id)
        try:
            rollout.refuse_during_rollout(cr.resource_id, applying=cr)
        except rollout.RolloutError as exc:
            raise TransitionError(str(exc)) from None
        # the run plans its clusters again: one relabelled into production since the check above (or
        # since the approval, on auto-apply) must not get the content with fewer approvals than it needs
        needed_now = required_approvals_for(_targets(cr))
        if needed_now > cr.required_approvals:
            raise TransitionError(
                f"The clusters CR-{cr.pk} reaches changed a moment ago: they need {needed_now} approvals now. "
                "Nothing was applied; apply it again to have it checked."
            )
        cr = transition(cr, (ChangeState.APPROVED,), ChangeState.APPLYING, verb="applied", applied_at=timezone.now())
        _adopt_approved_settings(cr)
        if rollout.is_staged(cr):
            try:
                rollout.start_rollout(cr, actor=actor)
            except propagation.PropagationError as exc:
                raise TransitionError(str(exc)) from None
            _audit(
                "apply",
                cr,
                actor=actor,
                summary=f"Applying CR-{cr.pk} wave by wave",
                before={"state": ChangeState.APPROVED},
                after={"state": ChangeState.APPLYING, "staged": True},
            )
            return _fresh(cr)
        runs = _start(cr, actor=actor)
        cr.runs.add(*runs)
        _audit(
            "apply",
            cr,
            actor=actor,
            summary=f"Applying CR-{cr.pk}: {len(runs)} propagation run(s)",
            before={"state": ChangeState.APPROVED},
            after={"state": ChangeState.APPLYING, "runs": [r.pk for r in runs]},
        )
        _schedule_sync(cr.pk, countdown=0 if not runs and handler_for(cr.kind) is None else SYNC_DELAY_SECONDS)
    return _fresh(cr)


def _blocking_problems(summary) -> str:
    """The blocking preflight problems of an approval summary, one "cluster: message" each."""
    return "; ".join(f"{p.get('cluster_name') or 'all'}: {p.get('message')}" for p in summary.blocking)


def _recheck_at_apply(cr: ChangeRequest, *, actor) -> ChangeRequest:
    """An Approved request applied some time after its approval (FEDPORTAL_APPROVALS_AUTO_APPLY off):
    what decided the approval is taken again, as ``approve`` takes it. A cluster relabelled into its
    placement may need more approvals now (a production one): the request goes back to Submitted for
    them. A cluster whose version changed may not accept the manifest now: a blocking preflight
    problem refuses the apply until the change is fixed or an admin overrides it."""
    cr = refresh_change_request(cr, actor=actor, diffs=False)
    summary = approval_summary(cr)
    if not summary.enough:  # more are needed now, or an approver left the role: Approved would stay stuck
        with transaction.atomic():
            _transition_audited(
                cr,
                (ChangeState.APPROVED,),
                ChangeState.SUBMITTED,
                verb="sent back for approval",
                actor=actor,
                action="needs_approvals",
                summary=f"CR-{cr.pk} needs {cr.required_approvals} approvals now ({summary.valid} valid): "
                f"its targets or its approvers changed since it was approved ({', '.join(cr.target_clusters)})",
                after={"required": cr.required_approvals, "valid": summary.valid, "targets": cr.target_clusters},
                decided_at=None,
            )
        raise TransitionError(
            f"CR-{cr.pk} needs {cr.required_approvals} approvals now (it has {summary.valid} valid): its targets or "
            f"its approvers changed since it was approved ({', '.join(cr.target_clusters)}). It is back in Submitted "
            "for another approver."
        )
    if summary.blocked:
        problems = _blocking_problems(summary)
        raise TransitionError(
            f"Preflight found blocking problems since CR-{cr.pk} was approved ({problems}). It stays Approved: "
            "fix the change or the cluster and apply again, or an admin can override with a reason."
        )
    return cr


def emergency_apply(
    resource: FederatedResource, *, actor, reason: str, revision: Revision | None = None
) -> ChangeRequest:
    """Admin only: propagate now without approvals. Creates a request flagged emergency in
    state Applying (the list flags it) and audits the bypass. This is the only direct path."""
    require_role(actor, Role.ADMIN)
    reason = (reason or "").strip()
    if not reason:
        raise TransitionError("An emergency apply needs a reason.")
    resource = FederatedResource.objects.select_related("type", "current_revision", "propagated_revision").get(
        pk=resource.pk
    )
    revision = revision or resource.current_revision
    if revision is None:
        raise TransitionError(f"{resource} has no revision to propagate.")
    if revision.resource_id != resource.pk:
        raise TransitionError("That revision belongs to another resource.")
    kind = ChangeKind.CREATE if resource.propagated_revision_id is None else ChangeKind.EDIT
    with transaction.atomic():
        rollout.lock_resource(resource.pk)
        try:
            rollout.refuse_during_rollout(resource.pk)
        except rollout.RolloutError as exc:
            raise TransitionError(str(exc)) from None
        cr = ChangeRequest.objects.create(
            kind=kind,
            state=ChangeState.APPLYING,
            emergency=True,
            emergency_reason=reason,
            title=f"EMERGENCY: {_default_title(kind, str(resource), revision)}"[:200],
            description=reason,
            author=_user(actor),
            author_name=_name(actor),
            resource=resource,
            resource_repr=str(resource),
            proposed_revision=revision,
            proposed_hash=approved_content_hash(kind, resource, revision, None),
            base_revision=resource.propagated_revision,
            required_approvals=0,
            submitted_at=timezone.now(),
            decided_at=timezone.now(),
            applied_at=timezone.now(),
            target_clusters=sorted({p.cluster.name for p in propagation.plan_targets(resource, revision)}),
        )
        _adopt_approved_settings(cr)  # the admin's audited bypass decides for the policy and retention too
        try:
            run = propagation.propagate_revision(resource, actor=actor, revision=revision, emergency=True)
        except propagation.PropagationError as exc:
            raise TransitionError(str(exc)) from None
        cr.runs.add(run)
        _audit(
            "emergency_apply",
            cr,
            actor=actor,
            summary=f"EMERGENCY apply of {resource} revision {revision.number} by {_name(actor)} without approval: {reason}",
            after={
                **_snapshot(cr),
                "reason": reason,
                "run": run.pk,
                "protected_namespace": protected_namespace_of(resource),
                # what drift checks and removals act on from now (_adopt_approved_settings)
                "drift_policy": resource.drift_policy,
                "retention": resource.retention,
            },
        )
        _schedule_sync(cr.pk)
    return _fresh(cr)


def sync_change_request(cr: ChangeRequest | int) -> ChangeRequest:
    """Applying -> Applied / PartiallyFailed / Failed once every run has finished. Idempotent:
    a request not Applying, or with runs still going, is left as it is (outcome refreshed)."""
    cr = _fresh(cr)
    if cr.state != ChangeState.APPLYING:
        return cr
    handler = handler_for(cr.kind)
    if handler is not None:
        return _sync_kind(handler, cr)
    if Rollout.objects.filter(change_request_id=cr.pk).exists():
        return cr  # a staged rollout settles its request itself (federation.approvals.rollout)
    runs = list(cr.runs.all())
    rows = outcome_rows(runs)
    if any(run.finished_at is None for run in runs):
        ChangeRequest.objects.filter(pk=cr.pk, state=ChangeState.APPLYING).update(outcome=rows)
        return _fresh(cr)
    states = {run.state for run in runs}
    if not runs or states == {RunState.SUCCEEDED}:
        final = ChangeState.APPLIED
    elif states == {RunState.FAILED}:
        final = ChangeState.FAILED
    else:
        final = ChangeState.PARTIALLY_FAILED
    with transaction.atomic():
        updated = ChangeRequest.objects.filter(pk=cr.pk, state=ChangeState.APPLYING).update(
            state=final, outcome=rows, finished_at=timezone.now(), updated_at=timezone.now()
        )
        if not updated:
            return _fresh(cr)
        failed = [r for r in rows if r["state"] == TargetState.FAILED]
        _audit(
            "finish",
            cr,
            actor=None,
            summary=f"CR-{cr.pk} {ChangeState(final).label}: {len(rows) - len(failed)} cluster(s) done, {len(failed)} failed",
            before={"state": ChangeState.APPLYING},
            after={
                "state": final,
                "outcome": {f"{r['cluster']}:{r['resource']}": f"{r['state']} {r['reason']}".strip() for r in rows},
            },
        )
        if final == ChangeState.APPLIED:
            _finish_side_effects(_fresh(cr))  # same transaction: Applied means the row/cluster is gone too
    return _fresh(cr)


def _sync_kind(handler, cr: ChangeRequest) -> ChangeRequest:
    """An Applying request of a registered kind: the handler moves it on; it ends Applied or Failed."""
    done = handler.sync(cr)
    if done == BUSY:
        return _fresh(cr)
    if done is None:
        _schedule_sync(cr.pk, countdown=1)
        return _fresh(cr)
    final, message = done
    with transaction.atomic():
        updated = ChangeRequest.objects.filter(pk=cr.pk, state=ChangeState.APPLYING).update(
            state=final,
            apply_error=message if final != ChangeState.APPLIED else "",
            finished_at=timezone.now(),
            updated_at=timezone.now(),
        )
        if updated:
            _audit(
                "finish",
                cr,
                actor=None,
                summary=f"CR-{cr.pk} {ChangeState(final).label}: {message}",
                before={"state": ChangeState.APPLYING},
                after={"state": final, "message": message},
            )
    return _fresh(cr)


def _finish_side_effects(cr: ChangeRequest) -> None:
    """After a fully applied delete, the resource row goes; after an unjoin, the cluster."""
    if cr.kind == ChangeKind.DELETE and cr.resource_id:
        resource = cr.resource
        with transaction.atomic():
            record_event(
                "federation.resource.delete",
                actor=cr.author,
                obj=resource,
                summary=f"Deleted {resource} (CR-{cr.pk})",
                before={"retention": resource.retention},
            )
            # runs PROTECT their revision; they go with the resource (the outcome stays on the request,
            # and in /metrics' totals)
            retire_targets(PropagationTarget.objects.filter(run__resource=resource))
            PropagationRun.objects.filter(resource=resource).delete()
            resource.delete()
    elif cr.kind == ChangeKind.UNJOIN and cr.cluster_id:
        # the approved request is the authority, not its author's roles today (an author who since
        # left the admin role, or left, must not leave it Applying for ever)
        unjoin_cluster(cr.cluster, note=f"(CR-{cr.pk}, requested by {cr.author_name} and approved)")


def sync_running_requests() -> int:
    """Re-check every Applying request (a safety net for a lost sync task)."""
    count = 0
    rollout.resume_stale_rollouts()
    for pk in ChangeRequest.objects.filter(state=ChangeState.APPLYING).values_list("pk", flat=True):
        try:
            if sync_change_request(pk).state != ChangeState.APPLYING:
                count += 1
        except Exception:  # one request that cannot finish must not stop the sweep of the others
            logger.exception("CR-%s could not be synced; the next sweep tries again", pk)
    return count
