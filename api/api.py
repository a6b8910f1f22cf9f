"""The NinjaAPI instance: /api/v1/, its OpenAPI schema (/api/v1/openapi.json) and docs (/api/v1/docs,
Swagger UI served from django-ninja's own static files: no CDN)."""

from ninja import NinjaAPI

from api import errors
from api.auth import AUTH
from api.endpoints import audit, changes, clusters, drift, resources, tokens
from api.renderers import FastJSONRenderer

api = NinjaAPI(
    title="FedPortal API",
    version="1",
    description=(
        "Automation API of FedPortal. Authenticate with `Authorization: Bearer <token>` (create one on your "
        "profile page or with `manage.py create_token USER`). A token acts with its user's roles (read-only "
        'tokens only read). Errors are `{"error", "message", "fields"}`; lists use cursors '
        "(`next_cursor` -> `?cursor=`); writes accept an `Idempotency-Key` header."
    ),
    auth=AUTH,
    renderer=FastJSONRenderer(),
    urls_namespace="api",
    docs_url="/docs",
    openapi_url="/openapi.json",
)
errors.install(api)
api.add_router("/clusters", clusters.router)
api.add_router("/types", resources.types_router)
api.add_router("/resources", resources.router)
api.add_router("/change-requests", changes.router)
api.add_router("/drift", drift.router)
api.add_router("/audit", audit.router)
api.add_router("/tokens", tokens.router)
