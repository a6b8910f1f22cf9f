"""The most severe kind of change: deleting a Namespace from a member deletes everything in it.

    namespace_deletions(cr) -> list[str]     clusters the request deletes a Namespace from
    flag_namespace_deletions(rows, clusters) -> rows     their Namespace deletions marked critical

A request with any such deletion needs the production approval count whatever the environment
(federation/approvals/services.required_approvals_for(..., severe=True)).
"""

from federation import propagation
from federation.approvals.choices import ChangeKind
from federation.choices import Retention, TargetAction
from federation.models import PropagatedVersion

CRITICAL = "critical"


def is_namespace(resource) -> bool:
    return resource is not None and resource.type.group == "" and resource.type.kind == "Namespace"


def namespace_deletions(cr) -> list[str]:
    if cr.kind == ChangeKind.UNJOIN:
        if not cr.cluster_id:
            return []
        held = PropagatedVersion.objects.filter(
            cluster=cr.cluster,
            resource__type__group="",
            resource__type__kind="Namespace",
            resource__retention=Retention.DELETE,
        ).select_related("cluster")
        return sorted({pv.cluster.name for pv in held if pv.is_present})
    resource = cr.resource
    if not is_namespace(resource) or resource.retention == Retention.ORPHAN:
        return []
    if cr.kind == ChangeKind.DELETE:
        return sorted(
            {pv.cluster.name for pv in resource.propagated_versions.select_related("cluster") if pv.is_present}
        )
    if cr.proposed_revision_id is None:
        return []
    return sorted(
        p.cluster.name
        for p in propagation.plan_targets(resource, cr.proposed_revision)
        if p.action == TargetAction.DELETE
    )


def flag_namespace_deletions(rows: list[dict], clusters: list[str]) -> list[dict]:
    """Mark the diff rows that delete a Namespace (rows name their resource as "Namespace <name>")."""
    for row in rows:
        resource = row.get("resource") or ""
        if row.get("action") == "delete" and row.get("cluster") in clusters and resource.startswith("Namespace "):
            row["severity"] = CRITICAL
            row["message"] = (
                f"Deletes {resource} from {row['cluster']} and everything in it: the most severe kind "
                f"of change. {row.get('message', '')}"
            ).strip()
    return rows
