"""/api/v1/resources: federated resources, created and updated from the YAML ``fedctl apply``
accepts (federation.services.apply_kubefed_file), with per-cluster status and a preview."""

import json
import math
from datetime import datetime
from typing import Any

from django.db import transaction
from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Status

from api.auth import needs
from api.common import READ_ERRORS, WRITE_ERRORS, Out, PageParams, require_viewer
from api.errors import ApiError
from api.pagination import page
from federation import propagation, selectors, services
from federation.health import shown_sync_state
from federation.models import FederatedResource, FederatedType
from fedportal.masking import is_secret_kind, mask_secrets, secret_values
from fedportal.roles import Role, require_role

router = Router(tags=["resources"])
types_router = Router(tags=["resources"])
MAX_BODY = 1024 * 1024

MANIFEST_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/yaml": {"schema": {"type": "string", "description": "What `fedctl apply -f` reads"}},
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["manifest"],
                    "additionalProperties": False,
                    "properties": {
                        "manifest": {
                            "oneOf": [{"type": "object"}, {"type": "array", "items": {"type": "object"}}],
                            "description": "One object, or a list of objects",
                        }
                    },
                }
            },
        },
    }
}


class ResourceOut(Out):
    id: int
    kind: str
    api_version: str
    namespace: str
    name: str
    retention: str
    drift_policy: str
    current_revision: int | None
    propagated_revision: int | None
    condition: str


class ClusterStatusOut(Out):
    cluster_id: int
    cluster: str
    status: str
    sync_state: str = Field(description="InSync, OutOfSync or Unknown: InSync only while the cluster is Ready")
    last_sync_state: str = Field(description="What the last drift check on the cluster found")
    message: str
    version: str
    revision: int | None
    propagated_at: datetime | None
    drift: list[Any]


class ResourceDetailOut(ResourceOut):
    template: dict[str, Any]
    placement: dict[str, Any]
    overrides: list[Any]
    scheduling: dict[str, Any] | None
    clusters: list[ClusterStatusOut]


class ResourcePage(Out):
    items: list[ResourceOut]
    next_cursor: str | None


class ResourceFilters(PageParams):
    q: str = Field("", max_length=200, description="name, namespace or kind contains")


class ApplyResultOut(Out):
    id: int | None
    kind: str
    namespace: str
    name: str
    action: str
    revision: int | None


class ApplyOut(Out):
    dry_run: bool
    results: list[ApplyResultOut]


class PreviewOut(Out):
    cluster_id: int
    cluster: str
    action: str
    rendered_yaml: str
    diff: str
    replicas: int | None
    message: str
    warnings: list[str]


class PreviewPage(Out):
    id: int
    revision: int
    clusters: list[PreviewOut]


def _number(revision) -> int | None:
    return revision.number if revision is not None else None


def resource_out(r: FederatedResource, condition: str | None = None) -> dict:
    return {
        "id": r.pk,
        "kind": r.type.kind,
        "api_version": r.type.api_version,
        "namespace": r.namespace,
        "name": r.name,
        "retention": r.retention,
        "drift_policy": r.drift_policy,
        "current_revision": _number(r.current_revision),
        "propagated_revision": _number(r.propagated_revision),
        "condition": condition if condition is not None else selectors.condition_from_counts(r),
    }


def _annotated(pk: int) -> FederatedResource:
    return get_object_or_404(selectors.resources(), pk=pk)


def resource_detail_out(r: FederatedResource) -> dict:
    """The resource with its current revision and per-cluster status; a Secret's values masked as
    the pages, the admin and ``fedctl status`` mask them (fedportal.masking)."""
    revision = r.current_revision
    rows = selectors.cluster_rows(r)
    secret = is_secret_kind(r.type.kind)
    known = ()  # an API server's message may quote a value: scrub the revision's and what was applied
    if secret:
        known = secret_values(
            [revision.snapshot if revision else None, *[pv.applied_manifest for pv in rows]], secret=True
        )
    return {
        **resource_out(r),
        "template": mask_secrets(revision.template, secret=secret) if revision else {},
        "placement": revision.placement if revision else {},
        "overrides": mask_secrets(revision.overrides, secret=secret) if revision else [],
        "scheduling": revision.scheduling if revision else None,
        "clusters": [
            {
                "cluster_id": pv.cluster_id,
                "cluster": pv.cluster.name,
                "status": pv.status,
                "sync_state": shown_sync_state(pv.sync_state, pv.cluster.state),
                "last_sync_state": pv.sync_state,
                "message": mask_secrets(pv.message, known=known),
                "version": pv.version,
                "revision": _number(pv.revision),
                "propagated_at": pv.propagated_at,
                "drift": mask_secrets(pv.drift or [], secret=secret, known=known),
            }
            for pv in rows
        ],
    }


def _refuse_non_finite(constant: str):
    """json.loads reads NaN and Infinity, which JSON (and so Kubernetes) has not."""
    raise ValueError(f"{constant} is not a JSON number")


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent; one beyond a float's range (1e400) is refused,
    where json.loads made it infinity, which no later step could write back as JSON."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:20]} is out of range")
    return value


def manifest_text(request) -> str:
    """The request body as the YAML text fedctl would read: application/yaml as it is, or
    JSON ``{"manifest": {...} | [...]}`` turned into YAML documents (JSON is YAML)."""
    if len(request.body) > MAX_BODY:
        raise ApiError(413, "too_large", f"The manifest is larger than {MAX_BODY // 1024} KiB.")
    content_type = request.content_type or ""
    try:
        text = request.body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "invalid", "The body is not UTF-8 text.") from None
    if content_type in ("application/yaml", "application/x-yaml", "text/yaml", "text/plain"):
        return text
    if content_type == "application/json":
        try:
            data = json.loads(text, parse_constant=_refuse_non_finite, parse_float=_finite_float)
        except ValueError as exc:
            raise ApiError(400, "invalid", f"The body is not JSON: {exc}") from None
        except RecursionError:
            raise ApiError(400, "invalid", "The body is nested too deeply.") from None
        # a bare object without the wrapper gets the 400 below saying to wrap it
        if isinstance(data, dict) and "manifest" in data and (unknown := sorted(set(data) - {"manifest"})):
            raise ApiError(
                422,
                "invalid_request",
                f'Unknown field {unknown[0]!r}: the body holds only "manifest".',
                {name: ["Unknown field."] for name in unknown},
            )
        manifest = data.get("manifest") if isinstance(data, dict) else None
        if isinstance(manifest, dict):
            manifest = [manifest]
        if not isinstance(manifest, list) or not manifest or not all(isinstance(m, dict) for m in manifest):
            raise ApiError(
                400,
                "invalid",
                'Send {"manifest": {...}} (an object or a list of objects).',
                {"manifest": ["An object or a non-empty list of objects."]},
            )
        return "\n---\n".join(json.dumps(m) for m in manifest)
    raise ApiError(415, "unsupported_media_type", "Send application/yaml, or application/json with a manifest.")


def _cluster_map(text: str) -> dict[str, str]:
    mapping = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        source, sep, target = pair.partition("=")
        if not sep or not source.strip() or not target.strip():
            raise ApiError(
                400, "invalid", f"cluster_map: {pair!r} is not NAME=CLUSTER.", {"cluster_map": ["Use a=b,c=d."]}
            )
        mapping[source.strip()] = target.strip()
    return mapping


def apply(request, *, dry_run: bool, cluster_map: str, only: FederatedResource | None = None) -> dict:
    require_role(request.user, Role.OPERATOR)
    text = manifest_text(request)
    with transaction.atomic():
        outcomes = services.apply_kubefed_file(
            text, actor=request.user, cluster_map=_cluster_map(cluster_map), dry_run=dry_run
        )
        results = []
        # the type (its API group, not only its kind: two types may share a kind) names the resource
        others = (
            [o for o in outcomes if (o.type_id, o.namespace, o.name) != (only.type_id, only.namespace, only.name)]
            if only is not None
            else []
        )
        for outcome in outcomes:
            found = (
                None
                if dry_run
                else FederatedResource.objects.filter(
                    type_id=outcome.type_id, namespace=outcome.namespace, name=outcome.name
                )
                .values_list("pk", flat=True)
                .first()
            )
            results.append(
                {
                    "id": found,
                    "kind": outcome.kind,
                    "namespace": outcome.namespace,
                    "name": outcome.name,
                    "action": outcome.action,
                    "revision": outcome.revision,
                }
            )
        if others:
            raise ApiError(400, "invalid", f"This manifest is not (only) {only}; send it to POST /api/v1/resources.")
    return {"dry_run": dry_run, "results": results}


@router.get("", response={200: ResourcePage, **READ_ERRORS}, summary="List federated resources")
def list_resources(request, filters: Query[ResourceFilters]):
    require_viewer(request)
    rows, next_cursor = page(
        selectors.resources(q=filters.q), scope="resources", key="id", cursor=filters.cursor, limit=filters.limit
    )
    return {"items": [resource_out(r) for r in rows], "next_cursor": next_cursor}


@router.get(
    "/{int:resource_id}",
    response={200: ResourceDetailOut, **READ_ERRORS},
    summary="One resource, with per-cluster status",
)
def get_resource(request, resource_id: int):
    require_viewer(request)
    return resource_detail_out(_annotated(resource_id))


@router.post(
    "",
    response={200: ApplyOut, 201: ApplyOut, **WRITE_ERRORS, **{c: WRITE_ERRORS[400] for c in (413, 415)}},
    openapi_extra=MANIFEST_BODY,
    auth=needs(Role.OPERATOR),
    summary="Create or update from YAML (as fedctl apply)",
)
def create_resources(request, dry_run: bool = False, cluster_map: str = Query("", max_length=2000)):
    result = apply(request, dry_run=dry_run, cluster_map=cluster_map)
    created = any(r["action"] == "created" for r in result["results"])
    return Status((201 if created and not dry_run else 200), result)


@router.put(
    "/{int:resource_id}",
    response={200: ApplyOut, **WRITE_ERRORS, **{c: WRITE_ERRORS[400] for c in (413, 415)}},
    openapi_extra=MANIFEST_BODY,
    auth=needs(Role.OPERATOR),
    summary="Update one resource from YAML (a new revision when it changed)",
)
def update_resource(request, resource_id: int, dry_run: bool = False, cluster_map: str = Query("", max_length=2000)):
    require_role(request.user, Role.OPERATOR)
    resource = get_object_or_404(FederatedResource.objects.select_related("type"), pk=resource_id)
    return apply(request, dry_run=dry_run, cluster_map=cluster_map, only=resource)


@router.get(
    "/{int:resource_id}/preview",
    response={200: PreviewPage, **READ_ERRORS},
    summary="Rendered per-cluster manifests and their diff against the live objects",
)
def preview_resource(request, resource_id: int, revision: int | None = Query(None, ge=1)):
    require_viewer(request)
    resource = get_object_or_404(FederatedResource.objects.select_related("type", "current_revision"), pk=resource_id)
    chosen = resource.current_revision
    if revision is not None:
        chosen = get_object_or_404(resource.revisions, number=revision)
    if chosen is None:
        raise ApiError(404, "not_found", f"{resource} has no revision.")
    previews = propagation.preview_revision(resource, chosen)
    return {
        "id": resource.pk,
        "revision": chosen.number,
        "clusters": [
            {
                "cluster_id": p.cluster.pk,
                "cluster": p.cluster.name,
                "action": p.action,
                "rendered_yaml": p.rendered_yaml,
                "diff": p.diff,
                "replicas": p.replicas,
                "message": p.message,
                "warnings": list(p.warnings),
            }
            for p in previews
        ],
    }


class TypeOut(Out):
    id: int
    group: str
    version: str
    kind: str
    plural: str
    api_version: str
    scope: str
    propagation: str
    status_collection: str


@types_router.get("", response={200: list[TypeOut], **READ_ERRORS}, summary="Federated types (what may be federated)")
def list_types(request):
    require_viewer(request)
    return [
        {
            "id": t.pk,
            "group": t.group,
            "version": t.version,
            "kind": t.kind,
            "plural": t.plural,
            "api_version": t.api_version,
            "scope": t.scope,
            "propagation": t.propagation,
            "status_collection": t.status_collection,
        }
        for t in FederatedType.objects.order_by("group", "kind")
    ]
