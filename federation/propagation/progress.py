"""A run's progress and a resource's one-word condition, as the pages show them."""

from dataclasses import dataclass

from django.db.models import Count

from federation.choices import (
    Condition,
    PropagationReason,
    SyncState,
    TargetState,
)
from federation.models import PropagationRun

# --- progress and conditions ---------------------------------------------------------------------


@dataclass
class RunProgress:
    total: int = 0
    done: int = 0
    failed: int = 0
    pending: int = 0

    @property
    def finished(self) -> bool:
        return self.pending == 0

    @property
    def percent_done(self) -> int:
        return round(100 * self.done / self.total) if self.total else 100

    @property
    def percent_failed(self) -> int:
        return round(100 * self.failed / self.total) if self.total else 0


def run_progress(run: PropagationRun) -> RunProgress:
    counts = dict(run.targets.values_list("state").annotate(n=Count("id")))
    done, failed = counts.get(TargetState.DONE, 0), counts.get(TargetState.FAILED, 0)
    total = sum(counts.values())
    return RunProgress(total, done, failed, total - done - failed)


def aggregate_condition(pvs, *, running: bool = False, propagated: bool = True) -> str:
    """One word for a resource from its PropagatedVersions (as the list and detail pages show)."""
    if running:
        return Condition.PROPAGATING
    active = [pv for pv in pvs if pv.status not in (PropagationReason.REMOVED, PropagationReason.ORPHANED)]
    if not active:
        return Condition.NOT_PROPAGATED
    if any(pv.status not in PropagationReason.healthy() for pv in active):
        return Condition.DEGRADED
    if any(pv.sync_state == SyncState.OUT_OF_SYNC for pv in active):
        return Condition.OUT_OF_SYNC
    return Condition.PROPAGATED
