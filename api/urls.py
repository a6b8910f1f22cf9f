"""URLs of the API app: /api/v1/ (every view wrapped for Idempotency-Key, HEAD and oversized bodies
(api.request_guards), and opted out of the login redirect: the API answers 401 JSON itself), the
profile page with its tokens, and /metrics."""

import json

from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse
from django.urls import include, path, register_converter
from django.views.decorators.csrf import csrf_exempt

from api import metrics, views
from api.access_log import logged
from api.api import api
from api.errors import error_body
from api.idempotency import idempotent
from api.request_guards import guarded


def _api_patterns():
    patterns, app_name, _namespace = api.urls
    for pattern in patterns:
        pattern.callback = login_not_required(logged(guarded(idempotent(pattern.callback))))
    return patterns, app_name


class AnyPath:
    """The rest of a path, whatever it holds: <path:> stops at a newline, and a path under /api/
    with one (schemathesis sent one as a change id) got the site's HTML 404, not the API's JSON."""

    regex = r"[\s\S]+"

    def to_python(self, value):
        return value

    def to_url(self, value):
        return value


register_converter(AnyPath, "anypath")


@csrf_exempt
@login_not_required
def api_not_found(request, rest=""):
    body = error_body("not_found", f"No API endpoint {request.path}; see /api/v1/docs.")
    return HttpResponse(json.dumps(body), status=404, content_type="application/json")


urlpatterns = [
    path("api/v1/", include(_api_patterns(), namespace="api")),
    path("api/<anypath:rest>", api_not_found, name="api_not_found"),
    path("profile/", views.profile, name="profile"),
    path("profile/tokens/<int:pk>/revoke", views.token_revoke, name="token_revoke"),
    path("metrics", metrics.metrics_view, name="metrics"),
]
