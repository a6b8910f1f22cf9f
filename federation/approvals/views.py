"""Change-request pages: check the role, validate, call a service or selector, render.

Every page serves its full template, or a named partial when the request comes from htmx.
Transitions are POSTs: without JavaScript they redirect back to the request (or re-render it
with the reason and a 4xx status); with htmx they swap the request's action panel in place.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from clusters.models import Cluster
from federation import propagation
from federation.approvals import rollout as rollouts
from federation.approvals import selectors, services
from federation.approvals.choices import ChangeKind, ChangeState, Decision, RolloutState
from federation.approvals.content import content_review
from federation.approvals.filtersets import ChangeRequestFilterSet
from federation.approvals.forms import (
    ApproveForm,
    CancelForm,
    ChangeRequestCreateForm,
    CommentForm,
    DecisionForm,
    ReasonForm,
    RejectForm,
    WaveApproveForm,
)
from federation.approvals.models import ChangeRequest
from federation.approvals.tables import ChangeRequestTable
from federation.models import FederatedResource, Revision
from federation.preview_groups import group_previews
from fedportal.htmx import redirect_page, render_page
from fedportal.roles import Role, has_role, role_required
from fedportal.tables import configure, export_csv, wants_csv

PAGE_SIZE = 25


# --- lists -----------------------------------------------------------------------------------------


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def change_list(request):
    filterset = ChangeRequestFilterSet(request.GET, queryset=selectors.base_queryset())
    if wants_csv(request):
        return export_csv(request, filterset, ChangeRequestTable, "change-requests")
    table = ChangeRequestTable(selectors.with_approval_counts(filterset.qs))
    context = {
        "filter": filterset,
        "form": filterset.form,
        "table": configure(request, table, per_page=PAGE_SIZE),
        "authors": selectors.authors(),
        "title": "Change requests",
    }
    template = "approvals/changerequest_list.html"
    return render_page(request, template, context, "rows")


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.APPROVER)
def inbox(request):
    table = ChangeRequestTable(selectors.inbox_for(request.user), empty_text="Nothing is waiting for your approval.")
    context = {
        "table": configure(request, table, per_page=PAGE_SIZE),
        "title": "Waiting for my approval",
        "inbox": True,
        "waiting_waves": selectors.waves_waiting_for(request.user),
    }
    template = "approvals/changerequest_inbox.html"
    return render_page(request, template, context, "rows")


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def badge(request):
    """The navigation badge: the count only (a fragment with or without htmx)."""
    count = selectors.badge_count(request.user)
    return render(request, "approvals/partials/badge.html", {"count": count})


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def home_panel(request):
    context = {
        "counts": selectors.state_counts(),
        "waiting": selectors.badge_count(request.user),
        "is_approver": has_role(request.user, Role.APPROVER),
        "recent": list(selectors.base_queryset().order_by("-updated_at")[:5]),
    }
    template = "approvals/changerequest_summary.html"
    return render_page(request, template, context, "panel")


# --- detail ----------------------------------------------------------------------------------------


def _detail_context(request, cr: ChangeRequest, **extra) -> dict:
    approvals = list(cr.approvals.all())
    authors, settings_changes = content_review(cr)
    summary = services.approval_summary(cr, approvals, authors)
    user = request.user
    is_author = cr.author_id == user.pk
    wrote_content = user.pk in authors
    runs = list(cr.runs.all().order_by("id"))
    progress = [(run, propagation.run_progress(run)) for run in runs]
    newer_revision = None
    if cr.is_open and cr.resource_id and cr.kind in (ChangeKind.CREATE, ChangeKind.EDIT, ChangeKind.ROLLBACK):
        current = cr.resource.current_revision_id
        if current and current != cr.proposed_revision_id:
            newer_revision = Revision.objects.filter(pk=current).first()
    rollout = rollouts.rollout_status(cr)
    planned_waves = rollouts.planned_waves(cr) if rollout is None and cr.is_open else []
    rollout_state = rollout["state"] if rollout else None
    operator = has_role(user, Role.OPERATOR)
    waiting = rollouts.waiting_wave(cr) if rollout_state == RolloutState.WAITING_APPROVAL else None
    approved_wave = waiting is not None and any(a.get("user_id") == user.pk for a in waiting.approvals)
    content = selectors.masked_content(cr)  # a Secret's values masked
    context = {
        "cr": cr,
        "content": content,
        "rollout": rollout,
        "planned_waves": planned_waves,
        "skips_waves": cr.is_open and rollouts.skips_waves(cr),
        "settings_changes": settings_changes,
        "rollback_of": cr.rollback_of if cr.rollback_of_id else None,
        "can_pause": operator and rollout_state in (RolloutState.PROGRESSING, RolloutState.WAITING_APPROVAL),
        "can_resume": operator and rollout_state in (RolloutState.PAUSED, RolloutState.HALTED),
        "can_abort": operator
        and rollout_state
        in (RolloutState.PROGRESSING, RolloutState.PAUSED, RolloutState.WAITING_APPROVAL, RolloutState.HALTED),
        "can_rollback": operator
        and rollout_state in (RolloutState.PAUSED, RolloutState.HALTED, RolloutState.WAITING_APPROVAL)
        and cr.base_revision_id is not None,
        "can_approve_wave": waiting is not None
        and has_role(user, Role.APPROVER)
        and not wrote_content
        and not approved_wave,
        "approved_wave": approved_wave,
        "wave_approval_count": rollouts.wave_approval_count(cr, waiting) if waiting is not None else None,
        "waiting_wave": rollouts.waiting_wave_name(rollout),
        "diff_groups": group_previews(content["diffs"]),
        "approvals": [(a, a.decision != Decision.APPROVE or a.is_valid_for(cr)) for a in approvals],
        "summary": summary,
        "comments": list(cr.comments.all()),
        "progress": progress,
        "newer_revision": newer_revision,
        "audit_events": selectors.audit_trail(cr),
        "is_author": is_author,
        "can_submit": cr.state == ChangeState.DRAFT
        and has_role(user, Role.OPERATOR)
        and services.may_submit(cr, user)
        and (cr.kind != ChangeKind.UNJOIN or has_role(user, Role.ADMIN)),
        "can_decide": cr.state == ChangeState.SUBMITTED and has_role(user, Role.APPROVER) and not wrote_content,
        "wrote_content": authors.get(user.pk, "") if not is_author else "",
        "can_reject": cr.state in (ChangeState.SUBMITTED, ChangeState.APPROVED)
        and has_role(user, Role.APPROVER)
        and not is_author,
        "can_cancel": cr.is_open and has_role(user, Role.OPERATOR) and (is_author or has_role(user, Role.ADMIN)),
        "can_apply": cr.state == ChangeState.APPROVED
        and has_role(user, Role.OPERATOR)
        and (cr.kind != ChangeKind.UNJOIN or has_role(user, Role.ADMIN)),
        "can_refresh": cr.is_open and has_role(user, Role.OPERATOR),
        "can_revise": cr.is_open and has_role(user, Role.OPERATOR) and (is_author or has_role(user, Role.ADMIN)),
        "can_override": cr.state in services.OVERRIDABLE_STATES
        and has_role(user, Role.ADMIN)
        and bool(summary.blocking)
        and not summary.overridden,
        "can_comment": has_role(user, Role.VIEWER),
        "decision_form": DecisionForm(),
        "reject_form": RejectForm(),
        "comment_form": CommentForm(),
        "override_form": ReasonForm(),
        "cancel_form": CancelForm(),
        "polling": cr.state == ChangeState.APPLYING
        or rollout_state in (RolloutState.PROGRESSING, RolloutState.WAITING_APPROVAL, RolloutState.PAUSED),
    }
    context["rollout_buttons"] = [
        ("pause", "Pause", context["can_pause"], ""),
        ("resume", "Resume", context["can_resume"], "primary"),
        ("rollback", "Roll back", context["can_rollback"], "danger"),
        ("abort", "Abort", context["can_abort"], "danger"),
    ]
    context.update(extra)
    return context


def _get_cr(pk) -> ChangeRequest:
    return get_object_or_404(
        ChangeRequest.objects.select_related(
            "resource__type", "proposed_revision", "base_revision", "author", "cluster"
        ),
        pk=pk,
    )


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def change_detail(request, pk):
    cr = _get_cr(pk)
    template = "approvals/changerequest_detail.html"
    return render_page(request, template, _detail_context(request, cr), "panel")


def _respond(request, cr, *, error: str = "", status: int = 200, message: str = "", **extra):
    """After a transition: htmx gets the action panel; a plain POST is redirected back (or, on
    error, gets the page with the reason and a 4xx status)."""
    # an action answered into the panel: the page's flash from before it is old news (the panel's
    # periodic refresh leaves it alone)
    cleared = bool(request.htmx)
    if error:
        template = "approvals/changerequest_detail.html"
        context = _detail_context(request, _get_cr(cr.pk), error=error, clear_page_messages=cleared, **extra)
        return render_page(request, template, context, "panel", status=status)
    if request.htmx:
        context = _detail_context(request, _get_cr(cr.pk), notice=message, clear_page_messages=True)
        return render(request, "approvals/changerequest_detail.html#panel", context)
    if message:
        messages.success(request, message)
    return redirect("approvals:change_detail", pk=cr.pk)


def _run(request, cr, call, message):
    try:
        result = call()
    except services.TransitionError as exc:
        return _respond(request, cr, error=str(exc), status=409)
    except PermissionDenied as exc:
        return _respond(request, cr, error=str(exc) or "You may not do that.", status=403)
    return _respond(request, result if isinstance(result, ChangeRequest) else cr, message=message)


@require_POST
@vary_on_headers("HX-Request")
@role_required(Role.OPERATOR)
def change_submit(request, pk):
    cr = _get_cr(pk)
    return _run(request, cr, lambda: services.submit(cr, actor=request.user), f"Submitted CR-{cr.pk} for approval.")


@require_POST
@vary_on_headers("HX-Request")
@role_required(Role.APPROVER)
def change_approve(request, pk):
    cr = _get_cr(pk)
    form = ApproveForm(request.POST)
    if not form.is_valid():
        return _respond(request, cr, error=_first_error(form), status=400, decision_form=form)
    return _run(
        request,
        cr,
        lambda: services.approve(
            cr, actor=request.user, comment=form.cleaned_data["comment"], seen_hash=form.cleaned_data["content_hash"]
        ),
        f"Approved CR-{cr.pk}.",
    )


def _first_error(form) -> str:
    return next(iter(form.errors.values()))[0]


@require_POST
@vary_on_headers("HX-Request")
@role_required(Role.APPROVER)
def change_reject(request, pk):
    cr = _get_cr(pk)
    form = RejectForm(request.POST)
    if not form.is_valid():
        return _respond(
            request, cr, error="Say why you reject the request (a comment is required).", status=400, reject_form=form
        )
    return _run(
        request,
        cr,
        lambda: services.reject(cr, actor=request.user, comment=form.cleaned_data["comment"]),
        f"Rejected CR-{cr.pk}.",
    )


@require_POST
@vary_on_headers("HX-Request")
@role_required(Role.OPERATOR)
def change_cancel(request, pk):
    cr = _get_cr(pk)
    form = CancelForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    return _run(request, cr, lambda: services.cancel(cr, actor=request.user, reason=reason), f"Cancelled CR-{cr.pk}.")


@require_POST
@vary_on_headers("HX-Request")
@role_required(Role.OPERATOR)
def change_apply(request, pk):
    cr = _get_cr(pk)
    return _run(request, cr, lambda: services.apply_change_request(cr, actor=request.user), f"Applying CR-{cr.pk}.")


ROLLOUT_ACTIONS = {
    "pause": (rollouts.pause_rollout, "Paused the rollout of CR-{pk}."),
    "resume": (rollouts.resume_rollout, "Resumed the rollout of CR-{pk}."),
    "abort": (rollouts.abort_rollout, "Aborted the rollout of CR-{pk}."),
    "rollback": (rollouts.rollback_rollout, "Rolling back CR-{pk}."),
}


def _run_rollout(request, cr, call, message):
    try:
        call()
    except rollouts.RolloutError as exc:
        return _respond(request, cr, error=str(exc), status=409)
    except PermissionDenied as exc:
        return _respond(request, cr, error=str(exc) or "You may not do that.", status=403)
    return _respond(request, cr, message=message)


@require_POST
@vary_on_headers("HX-Request")
@role_required(Role.OPERATOR)
def change_rollout(request, pk):
    """Operator: pause, resume, abort or roll back a staged rollout (``action`` in the form)."""
    cr = _get_cr(pk)
    action = request.POST.get("action", "")
    if action not in ROLLOUT_ACTIONS:
        return _respond(request, cr, error="Choose pause, resume, abort or rollback.", status=400)
    service, message = ROLLOUT_ACTIONS[action]
    return _run_rollout(request, cr, lambda: service(cr, actor=request.user), message.format(pk=cr.pk))


@require_POST
@vary_on_headers("HX-Request")
@role_required(Role.APPROVER)
def change_wave_approve(request, pk):
    """Approver: let the wave waiting for approval start (the author cannot); the form names the
    wave the approver saw waiting."""
    cr = _get_cr(pk)
    form = WaveApproveForm(request.POST)
    if not form.is_valid():
        return _respond(request, cr, error=_first_error(form), status=400)
    wave = form.cleaned_data["wave"]
    return _run_rollout(
        request,
        cr,
        lambda: rollouts.approve_wave(cr, actor=request.user, wave_name=wave),
        f"Approved wave {wave} of CR-{cr.pk}.",
    )


@require_POST
@vary_on_headers("HX-Request")
@role_required(Role.OPERATOR)
def change_refresh(request, pk):
    """Re-snapshot the diff and preflight; with ``revise=1``, propose the resource's current revision."""
    cr = _get_cr(pk)
    if request.POST.get("revise"):
        return _run(
            request,
            cr,
            lambda: services.revise_from_current(cr, actor=request.user),
            f"CR-{cr.pk} now proposes the current revision; earlier approvals are void.",
        )
    if not cr.is_open:
        return _respond(
            request, cr, error=f"CR-{cr.pk} is {cr.get_state_display()}: only an open request is refreshed.", status=409
        )
    return _run(
        request, cr, lambda: services.refresh_change_request(cr, actor=request.user), "Diff and preflight refreshed."
    )


@require_POST
@vary_on_headers("HX-Request")
@role_required(Role.ADMIN)
def change_override(request, pk):
    cr = _get_cr(pk)
    form = ReasonForm(request.POST)
    if not form.is_valid():
        return _respond(
            request, cr, error="Give a reason for overriding the preflight checks.", status=400, override_form=form
        )
    return _run(
        request,
        cr,
        lambda: services.override_preflight(cr, actor=request.user, reason=form.cleaned_data["reason"]),
        "Preflight overridden.",
    )


@require_POST
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def change_comment(request, pk):
    cr = _get_cr(pk)
    form = CommentForm(request.POST)
    if not form.is_valid():
        # the form's own words: empty, too long, or a null character (which Django's CharField refuses)
        return _respond(request, cr, error=" ".join(form.errors["body"]), status=400, comment_form=form)
    return _run(
        request,
        cr,
        lambda: services.add_comment(cr, actor=request.user, body=form.cleaned_data["body"]),
        "Comment added.",
    )


# --- create ----------------------------------------------------------------------------------------


def _done(request, cr, message):
    messages.success(request, message)
    url = reverse("approvals:change_detail", args=[cr.pk])
    return redirect_page(request, url)


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@role_required(Role.OPERATOR)
def change_create(request, resource_pk):
    """The "Request change" button's target: open a Draft for a resource's (current) revision."""
    resource = get_object_or_404(
        FederatedResource.objects.select_related("type", "current_revision", "propagated_revision"), pk=resource_pk
    )
    initial = {"revision": getattr(resource.current_revision, "number", None), "kind": "", "title": ""}
    initial.update({key: request.GET[key] for key in ("kind", "revision", "title") if request.GET.get(key)})
    form = ChangeRequestCreateForm(request.POST if request.method == "POST" else None, initial=initial)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            revision = None
            if data.get("revision"):
                revision = resource.revisions.filter(number=data["revision"]).first()
                if revision is None:
                    form.add_error("revision", f"{resource} has no revision {data['revision']}.")
            if not form.errors:
                try:
                    cr = services.create_change_request(
                        resource,
                        actor=request.user,
                        kind=data.get("kind") or None,
                        revision=revision,
                        title=data.get("title", ""),
                        description=data.get("description", ""),
                        rollout_strategy=data.get("rollout_strategy_yaml"),
                    )
                except services.TransitionError as exc:
                    form.add_error(None, str(exc))
                    status = 409
                else:
                    return _done(request, cr, f"Drafted CR-{cr.pk}. Check the diff, then submit it for approval.")
    context = {
        "form": form,
        "resource": resource,
        "open_requests": list(resource.change_requests.filter(state__in=ChangeState.open()).order_by("-id")[:10]),
    }
    template = "approvals/changerequest_form.html"
    return render_page(request, template, context, "form", status=status)


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@role_required(Role.ADMIN)
def change_create_unjoin(request, cluster_pk):
    cluster = get_object_or_404(Cluster, pk=cluster_pk)
    form = ReasonForm(request.POST if request.method == "POST" else None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                cr = services.create_change_request(
                    kind=ChangeKind.UNJOIN, cluster=cluster, actor=request.user, description=form.cleaned_data["reason"]
                )
            except services.TransitionError as exc:
                form.add_error(None, str(exc))
                status = 409
            else:
                return _done(request, cr, f"Drafted CR-{cr.pk} to unjoin {cluster.name}.")
    template = "approvals/changerequest_unjoin.html"
    return render_page(request, template, {"form": form, "cluster": cluster}, "form", status=status)


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@role_required(Role.ADMIN)
def emergency_apply(request, resource_pk):
    """Admin only: propagate now, without approval; audited and flagged in the list."""
    resource = get_object_or_404(FederatedResource.objects.select_related("type", "current_revision"), pk=resource_pk)
    form = ReasonForm(request.POST if request.method == "POST" else None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                cr = services.emergency_apply(resource, actor=request.user, reason=form.cleaned_data["reason"])
            except services.TransitionError as exc:
                form.add_error(None, str(exc))
                status = 409
            else:
                return _done(request, cr, f"Emergency apply started (CR-{cr.pk}).")
    template = "approvals/emergency_form.html"
    return render_page(request, template, {"form": form, "resource": resource}, "form", status=status)
