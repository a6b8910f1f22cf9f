"""/api/v1/clusters: the registry, over clusters.selectors and clusters.services (as the pages)."""

from datetime import datetime
from typing import Literal

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Status

from api.auth import needs
from api.common import READ_ERRORS, WRITE_ERRORS, In, Out, PageParams, require_viewer
from api.pagination import page
from clusters import selectors, services
from clusters.choices import ClusterRole, ClusterState
from clusters.filtersets import ClusterFilterSet
from clusters.models import Cluster
from drift.forms import parse_label_selector
from fedportal.roles import Role, require_role

router = Router(tags=["clusters"])


class ClusterOut(Out):
    id: int
    name: str
    api_server: str
    role: str
    labels: dict[str, str]
    region: str
    zones: list[str]
    state: str
    state_changed_at: datetime | None
    last_probe_at: datetime | None
    last_error: str
    server_version: str
    platform: str
    node_count: int
    isolated: bool


class VersionSampleOut(Out):
    sampled_at: datetime
    git_version: str
    platform: str
    kubelet_versions: dict[str, str]


class InventoryOut(Out):
    node_count: int
    kubelet_versions: dict[str, str]
    region: str
    zones: list[str]
    platform: str
    inventory_at: datetime | None


class ClusterDetailOut(ClusterOut):
    auth_method: str
    credentials_rotated_at: datetime | None
    inventory: InventoryOut
    versions: list[VersionSampleOut]


class ClusterPage(Out):
    items: list[ClusterOut]
    next_cursor: str | None


class ClusterFilters(PageParams):
    label_selector: str = Field("", max_length=500, description="env=prod,tier: every term must match")
    state: Literal[("", *ClusterState.values)] = ""
    version: str = Field("", max_length=64, description="1.27, v1.27.3 or unknown")
    role: Literal[("", *ClusterRole.values)] = ""
    q: str = Field("", max_length=200, description="name or API server contains")


def cluster_out(c: Cluster) -> dict:
    return {name: getattr(c, name) for name in ClusterOut.model_fields}


def cluster_detail_out(c: Cluster) -> dict:
    return {
        **cluster_out(c),
        "auth_method": c.auth_method,
        "credentials_rotated_at": c.credentials_rotated_at,
        "inventory": {
            "node_count": c.node_count,
            "kubelet_versions": c.kubelet_versions or {},
            "region": c.region,
            "zones": c.zones or [],
            "platform": c.platform,
            "inventory_at": c.inventory_at,
        },
        "versions": [
            {
                "sampled_at": s.sampled_at,
                "git_version": s.git_version,
                "platform": s.platform,
                "kubelet_versions": s.kubelet_versions or {},
            }
            for s in selectors.version_history(c)
        ],
    }


@router.get("", response={200: ClusterPage, **READ_ERRORS}, summary="List clusters")
def list_clusters(request, filters: Query[ClusterFilters]):
    require_viewer(request)
    query = {"q": filters.q, "role": filters.role, "state": filters.state, "version": filters.version}
    if any(query.values()):
        form = ClusterFilterSet(query).form
        if not form.is_valid():
            raise ValidationError({key: list(errs) for key, errs in form.errors.items()})
    try:
        terms = parse_label_selector(filters.label_selector)
    except ValidationError as exc:
        raise ValidationError({"label_selector": exc.messages}) from None
    qs = selectors.filter_clusters(**query)
    qs = qs.with_labels(terms)
    # values(): the items are these fields as they are; 50 model instances were a tenth of the request's CPU
    qs = qs.values(*ClusterOut.model_fields)
    rows, next_cursor = page(qs, scope="clusters", key="name", cursor=filters.cursor, limit=filters.limit, kind=str)
    return {"items": rows, "next_cursor": next_cursor}


@router.get(
    "/{int:cluster_id}",
    response={200: ClusterDetailOut, **READ_ERRORS},
    summary="One cluster, with its version history and inventory",
)
def get_cluster(request, cluster_id: int):
    require_viewer(request)
    return cluster_detail_out(get_object_or_404(Cluster, pk=cluster_id))


class Credentials(In):
    """Write-only: stored encrypted, never returned."""

    token: str | None = Field(None, max_length=10000)
    client_certificate: str | None = Field(None, max_length=100000)
    client_key: str | None = Field(None, max_length=100000)


class ClusterIn(Credentials):
    name: str = Field(..., max_length=63)
    api_server: str = Field(..., max_length=2048)
    role: Literal[tuple(ClusterRole.values)] = ClusterRole.MEMBER
    labels: dict[str, str] = {}
    ca_bundle: str = Field("", max_length=100000)
    insecure_skip_tls_verify: bool = False
    verify: bool = Field(True, description="Test the connection before saving (as the page does)")


class ClusterPatch(Credentials):
    """A new api_server needs its credentials too (the stored ones are never sent to another host)."""

    labels: dict[str, str] | None = None
    role: Literal[tuple(ClusterRole.values)] | None = None
    api_server: str | None = Field(None, max_length=2048)
    ca_bundle: str | None = Field(None, max_length=100000)
    insecure_skip_tls_verify: bool | None = None
    verify: bool = True


class RotateIn(Credentials):
    verify: bool = True


@router.post(
    "",
    response={201: ClusterDetailOut, **WRITE_ERRORS},
    auth=needs(Role.ADMIN),
    summary="Register a cluster (admin)",
)
def register_cluster(request, body: ClusterIn):
    data = body.model_dump()
    verify = data.pop("verify")
    cluster = services.register_cluster(actor=request.user, verify=verify, **data)
    return Status(201, cluster_detail_out(Cluster.objects.get(pk=cluster.pk)))


@router.patch(
    "/{int:cluster_id}",
    response={200: ClusterDetailOut, **WRITE_ERRORS},
    auth=needs(Role.ADMIN),
    summary="Update labels and connection settings (admin)",
)
def update_cluster(request, cluster_id: int, body: ClusterPatch):
    require_role(request.user, Role.ADMIN)
    cluster = get_object_or_404(Cluster, pk=cluster_id)
    changes = {k: v for k, v in body.model_dump(exclude={"verify"}).items() if v is not None}
    cluster = services.update_cluster(cluster, actor=request.user, verify=body.verify, **changes)
    return cluster_detail_out(cluster)


@router.post(
    "/{int:cluster_id}/rotate-credentials",
    response={200: ClusterDetailOut, **WRITE_ERRORS},
    auth=needs(Role.ADMIN),
    summary="Replace the credentials (admin; write-only)",
)
def rotate_credentials(request, cluster_id: int, body: RotateIn):
    require_role(request.user, Role.ADMIN)
    cluster = get_object_or_404(Cluster, pk=cluster_id)
    data = body.model_dump()
    verify = data.pop("verify")
    cluster = services.rotate_credentials(cluster, actor=request.user, verify=verify, **data)
    return cluster_detail_out(cluster)
