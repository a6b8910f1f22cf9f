"""Drift pages: the skew matrix (heatmap, host-vs-member table, pair details), version history,
the version policy form, and the CSV export. Thin: check the role, validate, call a selector."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from drift import selectors
from drift.forms import HistoryFilterForm, SkewFilterForm, VersionPolicyForm
from drift.models import VersionPolicy
from drift.services import update_version_policy
from drift.tables import SkewMemberTable
from fedportal.audit import record_event
from fedportal.csv_export import stream_csv
from fedportal.roles import Role, has_role, role_required

MEMBER_PAGE_SIZE = 50
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
    context = {"form": form, "filter_query": _filter_query(request), "can_edit_policy": has_role(request.user, Role.ADMIN)}
    if not form.is_bound or form.is_valid():
        cleaned = form.cleaned_data if form.is_bound else {"labels": [], "severity": ""}
        overview = selectors.skew_overview(labels=cleaned["labels"])
        members = selectors.filter_member_rows(overview.member_rows, cleaned["severity"])
        page = Paginator(members, MEMBER_PAGE_SIZE).get_page(request.GET.get("page"))
        context.update(
            overview=overview,
            page=page,
            columns=SkewMemberTable.html_columns(),
            rows=SkewMemberTable.html_rows(page.object_list),
            clickable_heatmap=len(overview.rows) <= selectors.charts.MAX_HEATMAP_CLUSTERS,
        )
    template_name = "drift/skew_matrix.html"
    if request.htmx:
        template_name += "#results"
    return render(request, template_name, context)


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
    form = VersionPolicyForm(request.POST or None, instance=policy)
    if request.method == "POST" and form.is_valid():
        try:
            update_version_policy(actor=request.user, **{name: form.cleaned_data[name] for name in form.Meta.fields})
        except (ValidationError, ValueError) as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, "Version policy saved; the drift matrix uses it now.")
            return redirect("drift:skew_matrix")
    return render(request, "drift/policy_form.html", {"form": form, "policy": policy}, status=400 if form.errors else 200)
