"""Finished propagation targets as /metrics counts them: per (state, reason), and their durations
(run start to result) in PROPAGATION_BUCKETS. The rows go with their resource (an approved delete)
or their cluster (an unjoin); ``retire_targets`` adds what they counted to RetiredTargetTotal in the
deleting transaction, so the counter and the histogram Prometheus reads never go down (a drop reads
as a counter reset, and ``rate()`` then spikes)."""

from datetime import timedelta

from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum

from federation.choices import TargetState
from federation.models import PropagationTarget, RetiredTargetTotal

PROPAGATION_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


def finished_targets(queryset=None):
    """Targets that ended (applied, removed or failed for good), with their ``duration``."""
    queryset = PropagationTarget.objects.all() if queryset is None else queryset
    return queryset.filter(state__in=[TargetState.DONE, TargetState.FAILED], finished_at__isnull=False).annotate(
        duration=ExpressionWrapper(F("finished_at") - F("run__started_at"), output_field=DurationField())
    )


def bucket_counts() -> dict:
    """Aggregates of ``finished_targets``: ``le<i>`` (cumulative per bound), ``total``, ``seconds``."""
    return {
        f"le{i}": Count("pk", filter=Q(duration__lte=timedelta(seconds=bound)))
        for i, bound in enumerate(PROPAGATION_BUCKETS)
    } | {"total": Count("pk"), "seconds": Sum("duration")}


def retire_targets(queryset) -> None:
    """Inside the caller's transaction, before it deletes the targets of ``queryset``: add what they
    count to RetiredTargetTotal (one aggregate query, one row per (state, reason) updated). The targets
    are locked first: one a worker finishes meanwhile is counted, or its write waits for the delete."""
    list(queryset.select_for_update(of=("self",)).values_list("pk", flat=True))
    groups = finished_targets(queryset).values("state", "reason").annotate(**bucket_counts()).order_by()
    for group in groups:
        if not group["total"]:
            continue
        total, _ = RetiredTargetTotal.objects.select_for_update().get_or_create(
            state=group["state"], reason=group["reason"]
        )
        total.count += group["total"]
        total.seconds += group["seconds"].total_seconds() if group["seconds"] is not None else 0.0
        old = total.buckets if len(total.buckets) == len(PROPAGATION_BUCKETS) else [0] * len(PROPAGATION_BUCKETS)
        total.buckets = [n + (group[f"le{i}"] or 0) for i, n in enumerate(old)]
        total.save(update_fields=["count", "seconds", "buckets"])


def retire_cluster_targets(sender, instance, **kwargs) -> None:
    """pre_delete of a Cluster: its targets go with it."""
    retire_targets(PropagationTarget.objects.filter(cluster_id=instance.pk))
