"""Cluster registry views: check the role, validate, call a service or selector, render.

Every view serves a full page, and its named partial when the request comes from htmx.
"""

from __future__ import annotations

import dataclasses
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import trigger_client_event

from clusters import crypto, kube, selectors, services
from clusters import lifecycle as lifecycle_service
from clusters.filtersets import FILTER_KEYS, ClusterFilterSet
from clusters.forms import (
    BulkLabelForm,
    ClusterEditForm,
    ClusterRegisterForm,
    KubeconfigChooseForm,
    KubeconfigUploadForm,
    RotateCredentialsForm,
    UnjoinForm,
)
from clusters.kubeconfig import KubeconfigContext, KubeconfigError, parse_kubeconfig
from clusters.models import Cluster, ManagedCluster, PollRequest
from clusters.services.bulk_labels import bulk_label_clusters
from clusters.services.kubeconfig import import_kubeconfig
from clusters.tables import ClusterTable
from fedportal.fragments import render_with_cached_partial
from fedportal.htmx import redirect_page, render_page
from fedportal.roles import Role, has_role, role_required
from fedportal.tables import configure, export_csv, wants_csv
from fedportal.text import is_number

PAGE_SIZE = 50
IMPORT_SESSION_KEY = "clusters.kubeconfig_import"
NAMES_SHOWN = 20  # cluster names a message lists (an import of 200 names the first 20)


# what Django's error reports (the DEBUG page, admin mails) show as stars in a failed request's POST
CREDENTIAL_FIELDS = ("token", "client_certificate", "client_key", "kubeconfig_text")


def _add_errors(form, exc: ValidationError) -> None:
    """Put a service's ValidationError on the form: on the field when the form has it."""
    if hasattr(exc, "error_dict"):
        for field, errors in exc.error_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, exc)


# ---------------------------------------------------------------------------------------------
# Read


FILTER_PARAMS = (*FILTER_KEYS, "sort")


@require_POST
@role_required(Role.ADMIN)
def cluster_bulk_label(request):
    """The list's bulk label form: add/remove labels on the ticked clusters or on every cluster the
    list's filter matches (posted along as the same query parameters). Back to the same list."""
    query = {key: request.POST[key] for key in FILTER_PARAMS if request.POST.get(key)}
    back = reverse("clusters:cluster_list") + ("?" + urlencode(query) if query else "")
    form = BulkLabelForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        if data["all_matching"]:
            filter_form = ClusterFilterSet(query).form
            if not filter_form.is_valid():
                messages.error(request, "The list's filter is not valid; nothing was changed.")
                return redirect(back)
            clusters = selectors.filter_clusters(**{key: filter_form.cleaned_data[key] for key in FILTER_KEYS})
        else:
            clusters = data["ids"]
        try:
            changed = bulk_label_clusters(clusters, add=data["add"], remove=data["remove"], actor=request.user)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            if changed:
                messages.success(
                    request,
                    f"Labels changed on {len(changed)} cluster{'s' if len(changed) != 1 else ''}: "
                    f"{', '.join(changed[:20])}{' …' if len(changed) > 20 else ''}.",
                )
            else:
                messages.info(request, "Every chosen cluster already had those labels; nothing changed.")
            return redirect(back)
    messages.error(
        request, "Labels not changed: " + " ".join(message for errors in form.errors.values() for message in errors)
    )
    return redirect(back)


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def cluster_list(request):
    filterset = ClusterFilterSet(request.GET, queryset=Cluster.objects.only(*selectors.LIST_FIELDS))
    if wants_csv(request):
        return export_csv(request, filterset, ClusterTable, "clusters")
    can_poll, can_admin = has_role(request.user, Role.OPERATOR), has_role(request.user, Role.ADMIN)
    context = {
        "filter": filterset,
        "form": filterset.form,
        "bulk_filters": {key: request.GET[key] for key in FILTER_PARAMS if request.GET.get(key)},
        "version_choices": selectors.version_choices(),
        "can_poll": can_poll,
        "can_admin": can_admin,
    }
    template = "clusters/cluster_list.html"

    def rows() -> dict:
        table = ClusterTable(filterset.qs, exclude=() if can_admin else ("select",))
        return {"table": configure(request, table, per_page=PAGE_SIZE)}

    if not filterset.is_valid():  # the valid filters apply; the errors show as they are, never cached
        context.update(rows())
        return render_page(request, template, context, "rows")
    # the rows through the short-lived page cache (fedportal.fragments): refreshed by any audited
    # action and by every probe that writes a cluster row
    return render_with_cached_partial(
        request, template, "rows", context, rows, vary=[can_poll, can_admin, selectors.newest_probe_stamp()]
    )


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def cluster_detail(request, pk):
    cluster = get_object_or_404(Cluster, pk=pk)
    context = {
        "cluster": cluster,
        "history": selectors.state_history(cluster),
        "samples": selectors.version_history(cluster),
        "kubelets": sorted((cluster.kubelet_versions or {}).items()),
        **lifecycle_service.cluster_page_rows(cluster),
        "can_poll": has_role(request.user, Role.OPERATOR),
        "can_admin": has_role(request.user, Role.ADMIN),
    }
    template = "clusters/cluster_detail.html"
    return render_page(request, template, context, "status")


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def summary(request):
    """The home-page panel (a fragment for htmx; a small page without it)."""
    template = "clusters/cluster_summary.html"
    context = {"summary": selectors.fleet_summary()}
    return render_page(request, template, context, "panel")


# ---------------------------------------------------------------------------------------------
# Register, test, import


@sensitive_post_parameters(*CREDENTIAL_FIELDS)
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@role_required(Role.ADMIN)
def cluster_create(request):
    form = ClusterRegisterForm(request.POST if request.method == "POST" else None)
    return _cluster_form_page(
        request,
        form,
        mode="create",
        save=lambda: services.register_cluster(actor=request.user, **form.service_kwargs()),
        done=lambda cluster: f"Registered {cluster.name} ({cluster.server_version or 'version pending'}).",
    )


def _cluster_form_page(request, form, *, mode: str, save, done, cluster=None):
    """The register / edit / rotate page (clusters/cluster_form.html). A valid POST calls ``save()``;
    its ValidationError lands on the form, success says ``done(saved cluster)`` on the cluster's page."""
    if request.method == "POST" and form.is_valid():
        try:
            saved = save()
        except ValidationError as exc:
            _add_errors(form, exc)
        else:
            messages.success(request, done(saved))
            return redirect_page(request, reverse("clusters:cluster_detail", args=[saved.pk]))
    context = {"form": form, "mode": mode} if cluster is None else {"form": form, "cluster": cluster, "mode": mode}
    status = 400 if request.method == "POST" else 200
    return render_page(request, "clusters/cluster_form.html", context, "form", status=status)


@sensitive_post_parameters(*CREDENTIAL_FIELDS)
@require_POST
@vary_on_headers("HX-Request")
@role_required(Role.ADMIN)
def cluster_test_connection(request):
    """Try the connection in the register form without saving anything: version or exact reason."""
    form = ClusterRegisterForm(request.POST)
    form.is_valid()
    result = None
    needed = ("api_server", "token", "client_certificate", "client_key", "ca_bundle", "insecure_skip_tls_verify")
    if not any(field in form.errors for field in needed):
        data = form.cleaned_data
        conn = kube.ClusterConnection(
            name=data.get("name") or "new",
            api_server=data["api_server"],
            ca_data=(data.get("ca_bundle") or "").strip() or None,
            insecure_skip_tls_verify=data.get("insecure_skip_tls_verify", False),
            **form.credentials(),
        )
        result = services.test_connection(conn)
    context = {"form": form, "result": result, "mode": "create"}
    if request.htmx:
        return render(request, "clusters/cluster_form.html#test_result", context)
    return render(request, "clusters/cluster_form.html", context)


@sensitive_post_parameters(*CREDENTIAL_FIELDS)
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@role_required(Role.ADMIN)
def cluster_import(request):
    """Step 1: upload or paste a kubeconfig. Step 2: choose contexts (the kubeconfig waits,
    encrypted, in the session; it is never rendered back into the page)."""
    template = "clusters/cluster_import.html"
    step = request.POST.get("step", "upload") if request.method == "POST" else "upload"
    upload_form = KubeconfigUploadForm()
    choose_form = None
    contexts = []
    expired = ""
    status = 200
    if request.method == "GET":
        request.session.pop(IMPORT_SESSION_KEY, None)
    elif step == "upload":
        upload_form = KubeconfigUploadForm(request.POST, request.FILES)
        if upload_form.is_valid():
            text = upload_form.cleaned_data["text"]
            try:
                contexts = parse_kubeconfig(text, allow_link_local=settings.FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS)
            except KubeconfigError as exc:
                upload_form = _empty_upload_form(exc.message)
                status = 400
            else:
                # the contexts as read (encrypted): the next step does not parse the YAML again
                request.session[IMPORT_SESSION_KEY] = crypto.encrypt_json(
                    {"contexts": [dataclasses.asdict(context) for context in contexts]}
                )
                choose_form = KubeconfigChooseForm(
                    contexts=contexts, initial={"contexts": services.default_contexts(contexts)}
                )
        else:
            upload_form = _empty_upload_form(
                *upload_form.non_field_errors(), *upload_form.errors.get("kubeconfig_file", [])
            )
            status = 400
    elif step == "choose":
        contexts = _session_contexts(request)
        if contexts is None:
            expired = "The uploaded kubeconfig expired; upload it again."
            status = 400
        else:
            choose_form = KubeconfigChooseForm(request.POST, contexts=contexts)
            if choose_form.is_valid():
                data = choose_form.cleaned_data
                try:
                    report = import_kubeconfig(
                        "",
                        contexts=data["contexts"],
                        labels=data["labels"],
                        label_pattern=data.get("label_pattern") or "",
                        host_context=data.get("host_context") or None,
                        actor=request.user,
                        skip_existing=data.get("existing") == "skip",
                        update_existing=data.get("existing") == "update",
                        parsed=contexts,
                    )
                except ValidationError as exc:
                    _add_errors(choose_form, exc)
                    status = 400
                else:
                    request.session.pop(IMPORT_SESSION_KEY, None)
                    created = report.clusters
                    messages.success(
                        request,
                        f"Imported {len(created)} cluster(s): {', '.join(c.name for c in created[:NAMES_SHOWN])}"
                        f"{' …' if len(created) > NAMES_SHOWN else ''}.",
                    )
                    if report.skipped:
                        messages.warning(
                            request,
                            f"Skipped {len(report.skipped)} already registered: "
                            + "; ".join(f"{name} ({why})" for name, why in report.skipped)
                            + ".",
                        )
                    return redirect_page(request, reverse("clusters:cluster_list"))
            else:
                status = 400
    else:  # a step this form never sends: start again at the upload
        upload_form = _empty_upload_form(f"Unknown import step {step[:40]!r}: upload the kubeconfig again.")
        status = 400
    context = {"upload_form": upload_form, "choose_form": choose_form, "contexts": contexts, "expired": expired}
    return render_page(request, template, context, "body", status=status)


def _empty_upload_form(*errors: str) -> KubeconfigUploadForm:
    """A blank upload form carrying ``errors``: a kubeconfig that was refused is never rendered back
    into the page (it holds tokens and keys)."""
    form = KubeconfigUploadForm()  # unbound: its fields render empty
    form.full_clean()
    form.cleaned_data = {}
    for message in errors:
        form.add_error(None, message)
    return form


def _session_contexts(request) -> list[KubeconfigContext] | None:
    """The contexts read at the upload step, or None when they expired (or the session holds none)."""
    token = request.session.get(IMPORT_SESSION_KEY)
    if not token:
        return None
    try:
        stored = crypto.decrypt_json(token).get("contexts")
        return [KubeconfigContext(**context) for context in stored] if isinstance(stored, list) else None
    except (crypto.CredentialDecryptError, TypeError):
        return None


# ---------------------------------------------------------------------------------------------
# Edit, rotate, unjoin


@sensitive_post_parameters(*CREDENTIAL_FIELDS)
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@role_required(Role.ADMIN)
def cluster_edit(request, pk):
    cluster = get_object_or_404(Cluster, pk=pk)
    form = ClusterEditForm.for_cluster(cluster, request.POST or None)
    return _cluster_form_page(
        request,
        form,
        mode="edit",
        cluster=cluster,
        save=lambda: services.update_cluster(cluster, actor=request.user, **form.changes()),
        done=lambda saved: f"Saved {cluster.name}.",
    )


@sensitive_post_parameters(*CREDENTIAL_FIELDS)
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@role_required(Role.ADMIN)
def cluster_rotate_credentials(request, pk):
    cluster = get_object_or_404(Cluster, pk=pk)
    form = RotateCredentialsForm(request.POST if request.method == "POST" else None)
    return _cluster_form_page(
        request,
        form,
        mode="rotate",
        cluster=cluster,
        save=lambda: services.rotate_credentials(cluster, actor=request.user, **form.credentials()),
        done=lambda saved: f"Rotated the credentials of {cluster.name}.",
    )


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@role_required(Role.ADMIN)
def cluster_unjoin(request, pk):
    cluster = get_object_or_404(Cluster, pk=pk)
    form = UnjoinForm(request.POST if request.method == "POST" else None, cluster=cluster)
    blocks = services.unjoin_blockers(cluster)
    status = 200
    if request.method == "POST":
        status = 409 if blocks else 400
        if not blocks and form.is_valid():
            try:
                services.unjoin_cluster(cluster, actor=request.user, respect_guards=True)
            except ValidationError as exc:  # a guard changed its mind since the page was rendered
                _add_errors(form, exc)
                status = 409
            else:
                messages.success(request, f"Unjoined {cluster.name}; it is no longer polled.")
                return redirect_page(request, reverse("clusters:cluster_list"))
    template = "clusters/cluster_unjoin.html"
    context = {"form": form, "cluster": cluster, "blocks": blocks}
    return render_page(request, template, context, "form", status=status)


# ---------------------------------------------------------------------------------------------
# Poll now


@require_POST
@vary_on_headers("HX-Request")
@role_required(Role.OPERATOR)
def cluster_poll(request, pk):
    cluster = get_object_or_404(Cluster, pk=pk)
    poll = services.request_poll(cluster=cluster, actor=request.user)
    return _poll_response(request, poll)


@require_POST
@vary_on_headers("HX-Request")
@role_required(Role.OPERATOR)
def fleet_poll(request):
    poll = services.request_poll(actor=request.user)
    return _poll_response(request, poll)


def _poll_response(request, poll: PollRequest):
    if request.htmx:
        return _render_poll(request, poll, fragment=True)
    return redirect("clusters:poll_status", pk=poll.pk)


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def poll_status(request, pk):
    poll = get_object_or_404(PollRequest.objects.select_related("cluster"), pk=pk)
    return _render_poll(request, poll, fragment=bool(request.htmx))


def _render_poll(request, poll, *, fragment: bool):
    progress = services.poll_progress(poll)
    template = "clusters/poll_status.html"
    response = render(request, template + "#progress" if fragment else template, {"poll": poll, "progress": progress})
    if fragment and progress.finished:
        trigger_client_event(response, "clustersPolled")  # the list and detail pages refresh their rows
    return response


# ---------------------------------------------------------------------------------------------
# Lifecycle (Cluster API)


@require_GET
@vary_on_headers("HX-Request")
@role_required(Role.VIEWER)
def lifecycle(request):
    """Every Cluster API cluster on the registered management clusters: control plane, MachineDeployments,
    Machines (refreshed every few seconds while the page is open)."""
    rows = list(ManagedCluster.objects.filter(gone=False).select_related("management", "member"))
    context = {
        "rows": rows,
        "members": Cluster.objects.only("pk", "name") if has_role(request.user, Role.ADMIN) else None,
    }
    return render_page(request, "clusters/lifecycle.html", context, "rows")


@require_POST
@role_required(Role.ADMIN)
def lifecycle_link(request, pk):
    managed = get_object_or_404(ManagedCluster.objects.select_related("management"), pk=pk)
    raw = request.POST.get("member", "")
    member = None
    if raw:
        member = Cluster.objects.filter(pk=raw).first() if is_number(raw) else None
        if member is None:
            messages.error(request, "Choose a registered cluster (or none).")
            return redirect("clusters:lifecycle")
    try:
        lifecycle_service.link_member(managed, member, actor=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"{managed.name} linked to {member.name if member else 'no cluster'}.")
    return redirect("clusters:lifecycle")
