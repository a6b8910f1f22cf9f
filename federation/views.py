"""Federation views: check the role, validate, call a service or selector, render.

Every view serves a full page, and its named partial when the request comes from htmx.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from clusters.models import Cluster
from federation import propagation, schedule, selectors, services, watching
from federation.choices import Health, PropagationReason, SyncState, Toggle
from federation.filtersets import ResourceFilterSet
from federation.forms import (
    OVERRIDE_PREFIX,
    RSP_PREFIX,
    FederatedTypeForm,
    OverrideFormSet,
    PreviewForm,
    ResourceForm,
    RevisionCompareForm,
    RspFormSet,
    collect_overrides,
    collect_scheduling,
    override_initial,
    restore_secret_values,
    rsp_initial,
)
from federation.health import health_of, shown_sync_state
from federation.models import FederatedResource, FederatedType, Revision
from federation.preview_groups import group_previews
from federation.tables import ResourceTable
from fedportal.htmx import redirect_page, render_page
from fedportal.masking import (
    MaskedValueError,
    is_secret_kind,
    mask_secrets,
    secret_values,
)
from fedportal.roles import Role, has_role, role_required
from fedportal.tables import configure, export_csv, wants_csv
from fedportal.text import is_number

PAGE_SIZE = 50
# Service error keys -> the form field that shows them.
_FIELD_FOR = {
    "template": "template_yaml",
    "namespace": "namespace",
    "name": "name",
    "retention": "retention",
    "drift_policy": "drift_policy",
    "rollout_strategy": "rollout_strategy_yaml",
}


# --- resources: list and detail --------------------------------------------------------------------


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def resource_list(request):
    filterset = ResourceFilterSet(request.GET, queryset=selectors.resources())
    if wants_csv(request):
        return export_csv(request, filterset, ResourceTable, "federated-resources")
    context = {
        "filter": filterset,
        "form": filterset.form,
        "table": configure(request, ResourceTable(filterset.qs), per_page=PAGE_SIZE),
        "can_edit": has_role(request.user, Role.OPERATOR),
    }
    return render_page(request, "federation/resource_list.html", context, "rows")


STATUS_FILTERS = {
    "failing": ("only failing", lambda row: not row.is_healthy and row.status != PropagationReason.PENDING),
    "outofsync": ("only out of sync", lambda row: row.sync_state == SyncState.OUT_OF_SYNC),
    "unhealthy": ("only unhealthy", lambda row: row.health != Health.HEALTHY),
}


def _detail_context(request, resource):
    run = selectors.latest_run(resource)
    all_rows = selectors.cluster_rows(resource)
    targets = selectors.run_targets(run)
    for row in all_rows:
        row.target = targets.get(row.cluster_id)
        row.health = health_of(row, resource.type.kind)
        row.shown_sync_state = shown_sync_state(row.sync_state, row.cluster.state)
    if is_secret_kind(resource.type.kind):  # an API server's error message may quote a value
        known = secret_values(
            [
                resource.current_revision.snapshot if resource.current_revision else None,
                *[row.applied_manifest for row in all_rows],
            ],
            secret=True,
        )
        for row in all_rows:
            row.message = mask_secrets(row.message, known=known)
            if row.target is not None:
                row.target.message = mask_secrets(row.target.message, known=known)
    progress = propagation.run_progress(run) if run else None
    failed = sum(1 for row in all_rows if row.status in propagation.FAILED_STATUSES)
    show = request.GET.get("show", "")
    keep = STATUS_FILTERS[show][1] if show in STATUS_FILTERS else None
    rows = [row for row in all_rows if keep(row)] if keep else all_rows
    # clusters holding another revision than the one propagated last (a staged rollout aborted or
    # halted part way, a cluster where applying failed): the header does not claim they have it
    lagging = [
        row
        for row in all_rows
        if row.is_present and row.revision_id and row.revision_id != resource.propagated_revision_id
    ]
    return {
        "failed": failed,
        "lagging": len(lagging),
        "lagging_revisions": sorted({row.revision.number for row in lagging}),
        "resource": resource,
        "rows": rows,
        "all_rows": all_rows,
        "show": show if keep else "",
        "status_filters": [
            (key, label, sum(1 for row in all_rows if test(row))) for key, (label, test) in STATUS_FILTERS.items()
        ],
        "run": run,
        "progress": progress,
        "condition": propagation.aggregate_condition(rows, running=bool(progress and not progress.finished)),
        "can_edit": has_role(request.user, Role.OPERATOR),
    }


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def resource_detail(request, pk):
    resource = get_object_or_404(
        FederatedResource.objects.select_related("type", "current_revision", "propagated_revision"), pk=pk
    )
    context = _detail_context(request, resource)
    if resource.current_revision and not request.headers.get("HX-Request"):  # the polled status needs no plan
        context["plan"] = schedule.decision_as_dict(resource, resource.current_revision, schedule.decide_for(resource))
    return render_page(request, "federation/resource_detail.html", context, "status")


# --- create and edit ----------------------------------------------------------------------------------


def _formsets(data=None, *, revision=None, secret=False):
    overrides = OverrideFormSet(
        data, prefix=OVERRIDE_PREFIX, initial=None if data else override_initial(revision, secret=secret)
    )
    rsp = RspFormSet(data, prefix=RSP_PREFIX, initial=None if data else rsp_initial(revision))
    return overrides, rsp


def _apply_spec_errors(form, overrides, rsp, exc: services.SpecError):
    for key, errors in exc.errors.items():
        if key == "placement":
            target = "selector_yaml" if form.cleaned_data.get("placement_mode") == "selector" else "clusters"
            form.add_error(target, errors)
        elif key == "overrides":
            overrides.service_errors = errors
        elif key == "scheduling":
            rsp.service_errors = errors
        else:
            form.add_error(_FIELD_FOR.get(key) if _FIELD_FOR.get(key) in form.fields else None, errors)


def _save(request, form, overrides, rsp, resource=None):
    """Validate the whole page; on success call the service. Returns the resource or None."""
    valid = form.is_valid() & overrides.is_valid() & rsp.is_valid()
    if not valid:
        return None
    data = form.cleaned_data
    template, override_list = data["template_yaml"], collect_overrides(overrides)
    if resource is not None and is_secret_kind(resource.type.kind):
        try:
            template, override_list = restore_secret_values(template, override_list, resource.current_revision)
        except MaskedValueError as exc:
            form.add_error("template_yaml" if exc.path.startswith("/") else None, str(exc))
            return None
    kwargs = {
        "template": template,
        "placement": form.placement(),
        "overrides": override_list,
        "scheduling": collect_scheduling(form, rsp),
        "actor": request.user,
        "message": data.get("message") or "",
    }
    try:
        with transaction.atomic():
            if resource is None:
                resource = services.create_resource(
                    data["type"],
                    namespace=data.get("namespace") or "",
                    name=data.get("name") or "",
                    retention=data["retention"],
                    drift_policy=data["drift_policy"],
                    **kwargs,
                )
            else:
                services.update_resource(
                    resource, retention=data["retention"], drift_policy=data["drift_policy"], **kwargs
                )
            services.set_rollout_strategy(resource, data.get("rollout_strategy_yaml") or {}, actor=request.user)
        return resource
    except services.SpecError as exc:
        _apply_spec_errors(form, overrides, rsp, exc)
    except ValidationError as exc:
        form.add_error(None, exc)
    return None


def _form_page(request, context, status):
    return render_page(request, "federation/resource_form.html", context, "form", status=status)


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@role_required(Role.OPERATOR)
def resource_create(request):
    initial = {}
    type_pk = request.GET.get("type", "") if request.method == "GET" else ""
    if is_number(type_pk):
        initial["type"] = FederatedType.objects.filter(pk=type_pk).first()
    form = ResourceForm(request.POST if request.method == "POST" else None, initial=initial)
    overrides, rsp = _formsets(request.POST if request.method == "POST" else None)
    status = 200
    if request.method == "POST" and not _wants_more_rows(request, overrides, rsp):
        resource = _save(request, form, overrides, rsp)
        if resource is not None:
            messages.success(
                request, f"Created {resource} (revision 1). Preview it, then request a change to propagate it."
            )
            return redirect_page(request, resource.get_absolute_url())
        status = 400
    context = {"form": form, "overrides": overrides, "rsp": rsp, "mode": "create"}
    return _form_page(request, context, status)


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@role_required(Role.OPERATOR)
def resource_edit(request, pk):
    resource = get_object_or_404(FederatedResource.objects.select_related("type", "current_revision"), pk=pk)
    form = ResourceForm(
        request.POST if request.method == "POST" else None, initial=ResourceForm.initial_for(resource), edit=True
    )
    overrides, rsp = _formsets(
        request.POST or None, revision=resource.current_revision, secret=is_secret_kind(resource.type.kind)
    )
    status = 200
    if request.method == "POST" and not _wants_more_rows(request, overrides, rsp):
        before = resource.current_revision_id
        if _save(request, form, overrides, rsp, resource=resource) is not None:
            resource.refresh_from_db()
            if resource.current_revision_id == before:
                messages.info(request, "Nothing changed; no new revision.")
            else:
                messages.success(
                    request,
                    f"Saved revision {resource.current_revision.number}. Preview it, then request a change to propagate it.",
                )
            return redirect_page(request, resource.get_absolute_url())
        status = 400
    context = {"form": form, "overrides": overrides, "rsp": rsp, "mode": "edit", "resource": resource}
    return _form_page(request, context, status)


def _wants_more_rows(request, overrides, rsp) -> bool:
    """No-JS fallback for 'add row': a submit button that re-renders with one more blank row."""
    for name, formset, prefix in (("_add_override", overrides, OVERRIDE_PREFIX), ("_add_rsp", rsp, RSP_PREFIX)):
        if name in request.POST:
            data = request.POST.copy()
            try:
                data[f"{prefix}-TOTAL_FORMS"] = str(int(data.get(f"{prefix}-TOTAL_FORMS", "0")) + 1)
            except ValueError:
                return False
            formset.data = data
            formset.is_bound = True
            return True
    return False


@require_GET
@role_required(Role.OPERATOR)
def formset_row(request, kind):
    """htmx 'add row': one blank override/RSP row with the next index, and the bumped TOTAL_FORMS."""
    if kind not in ("overrides", "rsp"):
        raise Http404("No such row kind.")
    prefix = OVERRIDE_PREFIX if kind == "overrides" else RSP_PREFIX
    try:
        index = int(request.GET.get(f"{prefix}-TOTAL_FORMS", ""))
    except ValueError:
        return HttpResponseBadRequest("TOTAL_FORMS must be a number.")
    if not 0 <= index < 200:
        return HttpResponseBadRequest("Too many rows.")
    formset = (OverrideFormSet if kind == "overrides" else RspFormSet)(prefix=prefix)
    row = formset.empty_form
    row.prefix = f"{prefix}-{index}"
    template = "federation/partials/override_row.html" if kind == "overrides" else "federation/partials/rsp_row.html"
    return render(request, template, {"row": row, "prefix": prefix, "total": index + 1, "oob": True})


# --- re-sync, preview (propagation itself goes through federation.approvals) ----------------------------------------------------------------------


@require_POST
@role_required(Role.OPERATOR)
def resource_resync(request, pk, cluster_pk):
    resource = get_object_or_404(FederatedResource, pk=pk)
    cluster = get_object_or_404(Cluster, pk=cluster_pk)
    try:
        propagation.resync_cluster(resource, cluster, actor=request.user)
    except propagation.PropagationError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Re-syncing {resource} on {cluster.name}.")
    return redirect_page(request, resource.get_absolute_url())


@require_POST
@role_required(Role.OPERATOR)
def resource_resync_failed(request, pk):
    resource = get_object_or_404(FederatedResource, pk=pk)
    try:
        run = propagation.resync_failed(resource, actor=request.user)
    except propagation.PropagationError as exc:
        messages.error(request, str(exc))
    else:
        if run is None:
            messages.info(request, f"Nothing failed: {resource} has no cluster to re-sync.")
        else:
            messages.success(request, f"Re-syncing {resource} on {run.targets.count()} failed cluster(s).")
    return redirect_page(request, resource.get_absolute_url())


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def resource_preview(request, pk):
    resource = get_object_or_404(FederatedResource.objects.select_related("type", "current_revision"), pk=pk)
    form = PreviewForm(request.GET)
    if not form.is_valid():
        return HttpResponseBadRequest("revision must be a positive number.")
    number = form.cleaned_data.get("revision")
    revision = get_object_or_404(resource.revisions, number=number) if number else resource.current_revision
    previews = propagation.preview_revision(resource, revision)
    context = {
        "resource": resource,
        "revision": revision,
        "previews": previews,
        "groups": group_previews(previews),
        "can_edit": has_role(request.user, Role.OPERATOR),
    }
    return render_page(request, "federation/resource_preview.html", context, "previews")


# --- revisions -------------------------------------------------------------------------------------------


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def revision_list(request, pk):
    resource = get_object_or_404(FederatedResource.objects.select_related("type"), pk=pk)
    revisions = resource.revisions.select_related("author", "parent").order_by("-number")
    page = Paginator(revisions, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"resource": resource, "page": page, "can_edit": has_role(request.user, Role.OPERATOR)}
    return render_page(request, "federation/revision_list.html", context, "rows")


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def revision_detail(request, pk, number):
    resource = get_object_or_404(FederatedResource.objects.select_related("type"), pk=pk)
    revision = get_object_or_404(resource.revisions.select_related("author", "parent"), number=number)
    form = RevisionCompareForm(request.GET)
    if not form.is_valid():
        return HttpResponseBadRequest("against must be a positive revision number.")
    against_number = form.cleaned_data.get("against")
    if against_number:
        against = get_object_or_404(resource.revisions, number=against_number)
    else:
        against = resource.revisions.filter(number__lt=revision.number).order_by("-number").first()
    diff = services.diff_revisions(against, revision)
    context = {
        "resource": resource,
        "revision": revision,
        "against": against,
        "diff": diff,
        "numbers": list(resource.revisions.order_by("-number").values_list("number", flat=True)[:200]),
        "can_edit": has_role(request.user, Role.OPERATOR),
    }
    return render_page(request, "federation/revision_detail.html", context, "diff")


@require_POST
@role_required(Role.OPERATOR)
def revision_rollback(request, pk, number):
    resource = get_object_or_404(FederatedResource, pk=pk)
    revision = get_object_or_404(Revision, resource=resource, number=number)
    try:
        new = services.rollback_resource(resource, to_revision=revision, actor=request.user)
    except (services.SpecError, services.FederationError) as exc:
        messages.error(request, f"Cannot roll back to revision {number}: {exc}")
    else:
        messages.success(
            request, f"Revision {new.number} restores revision {number}. Request the change to propagate it."
        )
        return redirect_page(
            request, f"{reverse('approvals:change_create', args=[resource.pk])}?kind=rollback&revision={new.number}"
        )
    return redirect_page(request, resource.get_absolute_url())


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def summary(request):
    """The home-page panel (a fragment for htmx; a small page without it)."""
    return render_page(request, "federation/summary.html", {"summary": selectors.summary()}, "panel")


# --- drift ---------------------------------------------------------------------------------------------------


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def drift_list(request):
    page = Paginator(selectors.out_of_sync(), PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"page": page, "can_edit": has_role(request.user, Role.OPERATOR)}
    return render_page(request, "federation/drift_list.html", context, "rows")


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def watcher_list(request):
    """Each fleet watcher, its clusters and their watch health: why drift on a cluster may be late."""
    unhealthy = request.GET.get("unhealthy") == "1"
    page = Paginator(watching.cluster_watches(unhealthy_only=unhealthy), PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "watchers": watching.watcher_rows(),
        "lease_seconds": watching.lease_seconds(),
        "page": page,
        "unhealthy": unhealthy,
    }
    return render_page(request, "federation/watcher_list.html", context, "rows")


# --- federated types (admin) ----------------------------------------------------------------------------


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def type_list(request):
    page = Paginator(FederatedType.objects.order_by("kind", "group"), PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"page": page, "can_admin": has_role(request.user, Role.ADMIN)}
    return render_page(request, "federation/type_list.html", context, "rows")


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@role_required(Role.ADMIN)
def type_edit(request, pk=None):
    ftype = get_object_or_404(FederatedType, pk=pk) if pk else None
    form = FederatedTypeForm(
        request.POST or None,
        instance=ftype,
        initial=None if ftype else {"propagation": Toggle.ENABLED, "status_collection": Toggle.DISABLED},
    )
    status = 200
    if request.method == "POST":
        if form.is_valid():
            values = {name: form.cleaned_data[name] for name in form.Meta.fields}
            try:
                with transaction.atomic():
                    if ftype is None:
                        ftype = services.create_type(actor=request.user, **values)
                    else:
                        ftype = services.update_type(
                            FederatedType.objects.get(pk=ftype.pk), actor=request.user, **values
                        )
            except ValidationError as exc:
                # a dict error has no error_list: getattr's default would be evaluated, and fail, first
                for field, errors in (exc.error_dict if hasattr(exc, "error_dict") else {None: exc.error_list}).items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                messages.success(request, f"Saved federated type {ftype.name}.")
                return redirect_page(request, reverse("federation:type_list"))
        status = 400
    context = {"form": form, "ftype": ftype}
    return render_page(request, "federation/type_form.html", context, "form", status=status)
