from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.views.decorators.http import require_GET

from fedportal.roles import Role, role_required


@role_required(Role.VIEWER)
@require_GET
def home(request):
    """The dashboard: each app's summary panel loads as an htmx fragment (links work without JS)."""
    return render(request, "fedportal/home.html")


@login_not_required
@require_GET
def favicon(request):
    """Browsers ask for /favicon.ico on pages that do not name an icon (admin, CSV, errors)."""
    return HttpResponsePermanentRedirect(static("img/favicon.svg"))


@login_not_required
@require_GET
def healthz(request):
    """Liveness for load balancers: the process answers and the database is reachable."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
