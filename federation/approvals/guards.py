"""Guards other apps consult without importing this one (registered in ApprovalsConfig.ready)."""

from django.urls import reverse

from clusters.services import UnjoinBlock
from federation.approvals.services import cluster_has_propagated_objects


def unjoin_needs_change_request(cluster) -> UnjoinBlock | None:
    """A cluster that still holds propagated objects leaves the fleet only through an approved
    change request, which removes or orphans those objects first (per each resource's retention)."""
    if not cluster_has_propagated_objects(cluster):
        return None
    return UnjoinBlock(
        reason=f"{cluster.name} still holds objects propagated by FedPortal; unjoining it needs an approved change request.",
        url=reverse("approvals:change_create_unjoin", args=[cluster.pk]),
        link_text="Request the unjoin",
    )
