from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from fedportal.roles import Role, role_required


@role_required(Role.VIEWER)
@require_GET
def home(request):
    """The dashboard: each app's summary panel loads as an htmx fragment (links work without JS)."""
    return render(request, "fedportal/home.html")


@login_not_required
@require_GET
def healthz(request):
    """Liveness for load balancers: the process answers and the database is reachable."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
