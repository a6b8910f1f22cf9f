"""Add and remove labels on many clusters in one audited action (the cluster list's bulk form):
label placement is unusable at 200 clusters one edit form at a time."""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet

from clusters.models import Cluster
from clusters.services.registry import memberships_changed
from clusters.validators import label_key_error, validate_labels
from fedportal.audit import record_events
from fedportal.roles import Role, require_actor_role


def bulk_label_clusters(clusters, *, add: dict | None = None, remove=(), actor=None) -> list[str]:
    """Set ``add`` (key -> value) and delete the keys in ``remove`` on every cluster given (a queryset
    or a list of ids). One audit event per changed cluster, written together; clusters already as
    asked are left alone. Returns the names of the clusters changed."""
    require_actor_role(actor, Role.ADMIN)
    add, remove = dict(add or {}), [key.strip() for key in remove if key.strip()]
    if not add and not remove:
        raise ValidationError("Give labels to add or label keys to remove.")
    validate_labels(add)
    bad = [error for error in map(label_key_error, remove) if error]
    if bad:
        raise ValidationError(bad)
    both = sorted(set(add) & set(remove))
    if both:
        raise ValidationError(f"Both added and removed: {', '.join(both)}.")
    if not isinstance(clusters, QuerySet):
        clusters = Cluster.objects.filter(pk__in=list(clusters))
    changed, events, relabelled = [], [], []
    with transaction.atomic():
        for cluster in clusters.select_for_update().order_by("name"):
            before = dict(cluster.labels or {})
            after = {key: value for key, value in before.items() if key not in remove} | add
            if after == before:
                continue
            cluster.labels = after
            cluster.save(update_fields=["labels", "updated_at"])
            changed.append(cluster.name)
            relabelled.append(cluster)
            events.append(
                {
                    "action": "cluster.labels",
                    "actor": actor,
                    "obj": cluster,
                    "cluster": cluster.name,
                    "summary": f"Bulk label change on {cluster.name}",
                    "before": {"labels": before},
                    "after": {"labels": after},
                }
            )
        if events:
            record_events(events)
        memberships_changed(relabelled, "labels changed")  # placements by label may now select them, or not
    return changed
