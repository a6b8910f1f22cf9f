"""The compliance trend is not empty on day one: the first compliance snapshot is taken as soon as
the first probe of a cluster completes (Celery's task_success for the probe tasks, in the worker),
rather than at the daily job's next run. Later snapshots stay with the daily job (and admins'
"Snapshot now")."""

from clusters.models import Cluster
from drift.models import ComplianceSnapshot
from drift.services import take_compliance_snapshot

PROBE_TASKS = frozenset({"clusters.tasks.probe_clusters_task", "clusters.tasks.probe_cluster_task"})


def take_first_compliance_snapshot():
    """A snapshot if there is none yet and some cluster has been probed; else None."""
    if ComplianceSnapshot.objects.exists() or not Cluster.objects.filter(last_probe_at__isnull=False).exists():
        return None
    return take_compliance_snapshot()


def after_task_success(sender=None, **kwargs):
    if getattr(sender, "name", "") in PROBE_TASKS:
        take_first_compliance_snapshot()
