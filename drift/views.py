"""Drift pages: the skew matrix (heatmap, host-vs-member table, pair details), version history,
the version policy form, and the CSV export. Thin: check the role, validate, call a selector."""

import json
from types import SimpleNamespace

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from clusters.models import Cluster
from drift import selectors
from drift.forms import (
    CompatFilterForm,
    ComplianceFilterForm,
    HistoryFilterForm,
    IsolateForm,
    RestoreForm,
    SkewFilterForm,
    VersionPolicyForm,
)
from drift.models import ComplianceSnapshot, VersionPolicy
from drift.services import (
    IsolationError,
    isolate_cluster,
    restore_cluster,
    take_compliance_snapshot,
    update_version_policy,
)
from drift.tables import CompatCellTable, ComplianceTable, SkewMemberTable
from drift.upgrade import UpgradePathError
from fedportal.audit import record_event
from fedportal.csv_export import stream_csv
from fedportal.fragments import render_with_cached_partial
from fedportal.htmx import render_page
from fedportal.roles import Role, has_role, role_required

MEMBER_PAGE_SIZE = 50
COMPAT_RESOURCES_PER_PAGE = 25
COMPAT_CLUSTERS_PER_PAGE = 30
HISTORY_PAGE_SIZE = 20


def _filter_query(request) -> str:
    query = request.GET.copy()
    query.pop("page", None)
    return query.urlencode()


def _bad_filter(form) -> HttpResponse:
    reasons = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())
    return HttpResponse(f"Bad filter: {reasons}\n", status=400, content_type="text/plain; charset=utf-8")


@role_required(Role.VIEWER)
@require_GET
@vary_on_headers("HX-Request")
def skew_matrix(request):
    form = SkewFilterForm(request.GET or None)
    can_edit_policy = has_role(request.user, Role.ADMIN)
    context = {"form": form, "filter_query": _filter_query(request), "can_edit_policy": can_edit_policy}

    def results():
        cleaned = form.cleaned_data if form.is_bound else {"labels": [], "severity": ""}
        overview = selectors.skew_overview(labels=cleaned["labels"])
        members = selectors.filter_member_rows(overview.member_rows, cleaned["severity"])
        page = Paginator(members, MEMBER_PAGE_SIZE).get_page(request.GET.get("page"))
        return dict(
            overview=overview,
            page=page,
            columns=SkewMemberTable.html_columns(),
            rows=SkewMemberTable.html_rows(page.object_list),
            clickable_heatmap=len(overview.rows) <= selectors.charts.MAX_HEATMAP_CLUSTERS,
        )

    return _page_with_results(request, "drift/skew_matrix.html", context, results, vary=[can_edit_policy])


def _page_with_results(request, template: str, context: dict, results, *, vary=()) -> HttpResponse:
    """The page, or (htmx) only its results. The results (the fleet-wide table: ``results()`` gives
    its context) are rendered through fedportal.fragments' short-lived cache; a filter with errors
    is rendered as it is, never cached."""
    form = context["form"]
    if form.is_bound and not form.is_valid():
        return render_page(request, template, context, "results")
    return render_with_cached_partial(request, template, "results", context, results, vary=vary)


@role_required(Role.VIEWER)
@require_GET
@vary_on_headers("HX-Request")
def skew_pair(request, a, b):
    detail = selectors.skew_pair(a, b)
    if detail is None:
        raise Http404("No such cluster.")
    template_name = "drift/skew_pair.html"
    if request.htmx:
        template_name += "#detail"
    return render(request, template_name, {"detail": detail})


@role_required(Role.VIEWER)
@require_GET
def skew_export(request):
    form = SkewFilterForm(request.GET)
    if not form.is_valid():
        return _bad_filter(form)
    overview = selectors.skew_overview(labels=form.cleaned_data["labels"])
    members = selectors.filter_member_rows(overview.member_rows, form.cleaned_data["severity"])
    record_event(
        "drift.skew.export",
        object_type="drift.skew",
        summary=f"exported the drift matrix as CSV ({len(members)} clusters)",
        after={"labels": form.data.get("labels", ""), "severity": form.cleaned_data["severity"], "format": "csv"},
    )
    filename = f"drift-matrix-{timezone.now():%Y%m%dT%H%M%SZ}.csv"
    return stream_csv(filename, SkewMemberTable.csv_columns(), SkewMemberTable.csv_rows(members))


@role_required(Role.VIEWER)
@require_GET
@vary_on_headers("HX-Request")
def version_history(request):
    form = HistoryFilterForm(request.GET or None)
    context = {"form": form, "filter_query": _filter_query(request)}
    if not form.is_bound or form.is_valid():
        cleaned = form.cleaned_data if form.is_bound else {"labels": [], "days": 30}
        days = cleaned.get("days") or 30
        since, now = selectors.history_window(days)
        clusters = selectors.history_clusters(labels=cleaned["labels"], since=since)
        page = Paginator(clusters, HISTORY_PAGE_SIZE).get_page(request.GET.get("page"))
        context.update(
            page=page,
            days=days,
            timeline=selectors.timeline_figure(list(page.object_list), since=since, now=now),
            distribution=selectors.distribution_figure(labels=cleaned["labels"], since=since, now=now),
        )
    template_name = "drift/version_history.html"
    if request.htmx:
        template_name += "#results"
    return render(request, template_name, context)


@role_required(Role.ADMIN)
@require_http_methods(["GET", "POST"])
def policy_edit(request):
    policy = VersionPolicy.load()
    form = VersionPolicyForm(request.POST if request.method == "POST" else None, instance=policy)
    if request.method == "POST" and form.is_valid():
        try:
            update_version_policy(actor=request.user, **{name: form.cleaned_data[name] for name in form.Meta.fields})
        except (ValidationError, ValueError) as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, "Version policy saved; the drift matrix uses it now.")
            return redirect("drift:skew_matrix")
    return render(
        request, "drift/policy_form.html", {"form": form, "policy": policy}, status=400 if form.errors else 200
    )


def _query_without(request, *names) -> str:
    query = request.GET.copy()
    for name in names:
        query.pop(name, None)
    return query.urlencode()


@role_required(Role.VIEWER)
@require_GET
@vary_on_headers("HX-Request")
def compat_matrix(request):
    """Federated resources × clusters: compatible (green), incompatible (red), unverifiable (grey)."""
    form = CompatFilterForm(request.GET or None)
    context = {"form": form, "filter_query": _filter_query(request)}

    def results():
        cleaned = form.cleaned_data if form.is_bound else {"labels": [], "kind": "", "namespace": ""}
        rows = selectors.fleet_rows(labels=cleaned["labels"])
        resource_page = Paginator(
            selectors.compat_resources(kind=cleaned["kind"], namespace=cleaned["namespace"]), COMPAT_RESOURCES_PER_PAGE
        ).get_page(request.GET.get("page"))
        cluster_page = Paginator(rows, COMPAT_CLUSTERS_PER_PAGE).get_page(request.GET.get("cpage"))
        clusters = list(cluster_page.object_list)
        grid = selectors.compat_grid(list(resource_page.object_list), clusters)
        if cleaned.get("findings"):
            grid, clusters = only_findings(grid, clusters)
        counts = {}
        for _, cells in grid:
            for cell in cells:
                counts[cell.status] = counts.get(cell.status, 0) + 1
        return dict(
            page=resource_page,
            cluster_page=cluster_page,
            clusters=clusters,
            grid=grid,
            counts=counts,
            rows_query=_query_without(request, "page"),
            cols_query=_query_without(request, "cpage"),
        )

    return _page_with_results(request, "drift/compat_matrix.html", context, results)


def only_findings(grid, clusters):
    """The grid without the columns (clusters) and rows (resources) that have no cell other than
    compatible or not targeted: what is left is what needs attention."""

    def finding(cell):
        return cell.targeted and cell.status != "compatible"

    keep = [i for i in range(len(clusters)) if any(finding(cells[i]) for _, cells in grid)]
    rows = [(resource, [cells[i] for i in keep]) for resource, cells in grid if any(finding(c) for c in cells)]
    return rows, [clusters[i] for i in keep]


@role_required(Role.VIEWER)
@require_GET
@vary_on_headers("HX-Request")
def compat_cell(request, pk, cluster):
    """One resource on one cluster: the exact fields, suggested fixes, and the upgrade path."""
    found = selectors.compat_cell(pk, cluster)
    if found is None:
        raise Http404("No such resource or cluster.")
    resource, row, cell = found
    plan, plan_error = None, ""
    if cell.result is not None and cell.manifest is not None and cell.result.status == "incompatible":
        try:
            plan = selectors.repair_plan(row, resource.qualified_name, cell.manifest, cell.result)
        except UpgradePathError as exc:
            plan_error = str(exc)
    # what the page shows: no Secret value, in the manifest or a message
    cell = selectors.mask_compat_cell(resource, cell)
    overrides_entry = None
    if cell.result is not None and cell.result.suggested_overrides:
        overrides_entry = json.dumps(
            [{"clusterName": row.name, "clusterOverrides": cell.result.suggested_overrides}], indent=2
        )
    context = {
        "resource": resource,
        "cluster": row,
        "cell": cell,
        "plan": plan,
        "plan_error": plan_error,
        "overrides_entry": overrides_entry,
        "manifest_json": json.dumps(cell.manifest, indent=2, sort_keys=True) if cell.manifest else "",
    }
    template_name = "drift/compat_cell.html"
    if request.htmx:
        template_name += "#detail"
    return render(request, template_name, context)


def _compat_csv_rows(resources, rows):
    targets_memo = {}
    for resource in resources:
        cells = selectors.compat_row(resource, rows, targets_memo=targets_memo)
        for row in rows:
            cell = selectors.mask_compat_cell(resource, cells[row.name])
            if not cell.targeted:
                continue
            result = cell.result
            yield CompatCellTable.csv_rows_one(
                SimpleNamespace(
                    resource=resource.qualified_name,
                    kind=resource.type.kind,
                    cluster=row.name,
                    version=row.server_version,
                    status=cell.status,
                    fields="; ".join(p.field_path for p in result.problems if p.code == "unknown_field"),
                    problems=" | ".join(p.message for p in result.problems),
                    min_version=result.min_version,
                    fix=result.suggested_overrides or None,
                )
            )


@role_required(Role.VIEWER)
@require_GET
def compat_export(request):
    form = CompatFilterForm(request.GET)
    if not form.is_valid():
        return _bad_filter(form)
    cleaned = form.cleaned_data
    rows = selectors.fleet_rows(labels=cleaned["labels"])
    resources = selectors.compat_resources(kind=cleaned["kind"], namespace=cleaned["namespace"])
    record_event(
        "drift.compat.export",
        object_type="drift.compat",
        summary="exported the compatibility matrix as CSV",
        after={"labels": form.data.get("labels", ""), "kind": cleaned["kind"], "namespace": cleaned["namespace"]},
    )
    filename = f"compat-matrix-{timezone.now():%Y%m%dT%H%M%SZ}.csv"
    return stream_csv(
        filename, CompatCellTable.csv_columns(), _compat_csv_rows(resources.iterator(chunk_size=200), rows)
    )


COMPLIANCE_PAGE_SIZE = 50
TREND_DAYS = 90


@role_required(Role.VIEWER)
@require_GET
@vary_on_headers("HX-Request")
def compliance_report(request):
    """Per cluster: version policy, API compatibility, propagation, drift, isolation; a score. Printable."""
    form = ComplianceFilterForm(request.GET or None)
    can_isolate = has_role(request.user, Role.ADMIN)
    from drift.upgrades import lifecycle_compliance

    context = {
        "form": form,
        "filter_query": _filter_query(request),
        "can_isolate": can_isolate,
        "lifecycle": lifecycle_compliance(),  # small and live: outside the cached results
    }

    def results():
        cleaned = form.cleaned_data if form.is_bound else {"labels": [], "only": ""}
        report, skew_counts = selectors.fleet_compliance(labels=cleaned["labels"])
        clusters = report.clusters
        if cleaned["only"] == "noncompliant":
            clusters = [c for c in clusters if not c.compliant]
        page = Paginator(clusters, COMPLIANCE_PAGE_SIZE).get_page(request.GET.get("page"))
        return dict(
            report=report,
            skew_counts=skew_counts,
            page=page,
            columns=ComplianceTable.html_columns(),
            rows=ComplianceTable.html_rows(page.object_list),
            trend=selectors.compliance_trend_figure(days=TREND_DAYS),
            generated_at=timezone.now(),
        )

    return _page_with_results(request, "drift/compliance_report.html", context, results, vary=[can_isolate])


@role_required(Role.ADMIN)
@require_http_methods(["POST"])
def compliance_snapshot(request):
    """Admins: record the fleet's compliance now (the trend is otherwise empty until the daily job)."""
    snapshot = take_compliance_snapshot(actor=request.user)
    messages.success(
        request,
        f"Compliance snapshot taken: {snapshot.clusters_compliant}/{snapshot.clusters_total} clusters compliant.",
    )
    return redirect("drift:compliance_report")


@role_required(Role.VIEWER)
@require_GET
def compliance_export(request):
    form = ComplianceFilterForm(request.GET)
    if not form.is_valid():
        return _bad_filter(form)
    report, _ = selectors.fleet_compliance(labels=form.cleaned_data["labels"])
    clusters = report.clusters
    if form.cleaned_data["only"] == "noncompliant":
        clusters = [c for c in clusters if not c.compliant]
    record_event(
        "drift.compliance.export",
        object_type="drift.compliance",
        summary=f"exported the compliance report as CSV ({len(clusters)} clusters, score {report.score})",
        after={"labels": form.data.get("labels", ""), "only": form.cleaned_data["only"]},
    )
    filename = f"compliance-report-{timezone.now():%Y%m%dT%H%M%SZ}.csv"
    return stream_csv(filename, ComplianceTable.csv_columns(), ComplianceTable.csv_rows(clusters))


@role_required(Role.VIEWER)
@require_GET
def isolation_banner(request):
    """The fleet-wide banner naming isolated clusters (loaded by htmx from the shared banner slot)."""
    return render(request, "drift/partials/isolation_banner.html", selectors.isolated_clusters())


def _cluster_or_404(name):
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise Http404("No such cluster.")
    return cluster


def _isolation_page(request, name, *, action, form_class, perform, done):
    """Isolate and restore share one page: a reason (or note) form, the service call, the result."""
    cluster = _cluster_or_404(name)
    form = form_class(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            perform(cluster, form.cleaned_data)
        except IsolationError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, done.format(name=cluster.name))
            return redirect("drift:skew_matrix")
    status = 400 if form.errors else 200
    return render(
        request, "drift/cluster_isolate.html", {"cluster": cluster, "form": form, "action": action}, status=status
    )


@role_required(Role.ADMIN)
@require_http_methods(["GET", "POST"])
def cluster_isolate(request, name):
    return _isolation_page(
        request,
        name,
        action="isolate",
        form_class=IsolateForm,
        perform=lambda cluster, data: isolate_cluster(cluster, actor=request.user, reason=data["reason"]),
        done="{name} is isolated: propagation skips it until you restore it.",
    )


@role_required(Role.ADMIN)
@require_http_methods(["GET", "POST"])
def cluster_restore(request, name):
    return _isolation_page(
        request,
        name,
        action="restore",
        form_class=RestoreForm,
        perform=lambda cluster, data: restore_cluster(cluster, actor=request.user, note=data["note"]),
        done="{name} is back in placement and propagation.",
    )


@role_required(Role.VIEWER)
@require_GET
def drift_summary(request):
    """The dashboard panel: skew findings by severity, isolated clusters, last compliance snapshot."""
    overview = selectors.skew_overview()
    context = {
        "counts": overview.report.counts,
        "clusters": len(overview.rows),
        "isolated": sum(1 for r in overview.rows if r.isolated),
        "snapshot": ComplianceSnapshot.objects.order_by("-taken_at", "-id").first(),
    }
    return render(request, "drift/partials/summary.html", context)


@role_required(Role.OPERATOR)
@require_http_methods(["POST"])
def upgrade_request(request, name):
    """The cluster page's "Upgrade to" form: a change request of kind upgrade, or 400 with the reason."""
    from django.core.exceptions import PermissionDenied
    from django.urls import reverse

    from drift import upgrades
    from federation.approvals.services import TransitionError

    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise Http404("No such cluster.")
    try:
        cr = upgrades.request_upgrade(
            cluster, request.POST.get("to", ""), actor=request.user, scope=request.POST.get("scope") or "all"
        )
    except (upgrades.UpgradeRefused, TransitionError, PermissionDenied) as exc:
        context = {"cluster": cluster, "error": upgrades.refuse_reason(exc), "to": request.POST.get("to", "")}
        return render(request, "drift/upgrade_refused.html", context, status=400)
    messages.success(request, f"CR-{cr.pk} drafted and submitted: {cr.title}.")
    return redirect(reverse("approvals:change_detail", args=[cr.pk]))


@role_required(Role.VIEWER)
@require_GET
def lifecycle_export(request):
    """The compliance report's lifecycle sections as CSV: clusters behind the target, upgrades in progress."""
    from drift.upgrades import lifecycle_compliance, lifecycle_csv_rows

    rows = list(lifecycle_csv_rows(lifecycle_compliance()))
    record_event(
        "drift.compliance.export",
        object_type="drift.lifecycle",
        summary=f"exported the lifecycle compliance sections as CSV ({len(rows) - 1} rows)",
    )
    return stream_csv(f"lifecycle-{timezone.now():%Y%m%dT%H%M%SZ}.csv", rows[0], rows[1:])
