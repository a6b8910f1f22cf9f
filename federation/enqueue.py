"""The federation app's tasks, queued by name (fedportal.queueing): what services call instead of
importing federation.tasks or federation.approvals.tasks. Queues match the tasks' own."""

from fedportal.queueing import send


def propagate_targets(
    run_id: int, cluster_ids: list[int], *, countdown: float | None = None, on_commit: bool = False
) -> None:
    """A chunk of one run's targets (queue "propagation")."""
    send(
        "federation.tasks.propagate_targets_task",
        (run_id, list(cluster_ids)),
        on_commit=on_commit,
        queue="propagation",
        countdown=countdown,
    )


def sync_change_request(cr_id: int, *, countdown: float = 0, on_commit: bool = True) -> None:
    """Record an Applying change request's outcome once its runs end (queue "default")."""
    send(
        "federation.approvals.tasks.sync_change_request_task",
        (cr_id,),
        on_commit=on_commit,
        queue="default",
        countdown=countdown,
    )


def reconcile_membership(cluster_id: int, reason: str, *, countdown: float | None = None, waits: int = 0) -> None:
    """A cluster joined or was relabelled: reconcile the approved placements (queue "default")."""
    send(
        "federation.tasks.reconcile_membership_task", (cluster_id, reason, waits), queue="default", countdown=countdown
    )


def advance_rollout(rollout_id: int, *, countdown: float | None = None, on_commit: bool = True) -> None:
    """Move a staged rollout on as far as it can go now (queue "default")."""
    send(
        "federation.approvals.tasks.advance_rollout_task",
        (rollout_id,),
        on_commit=on_commit,
        queue="default",
        countdown=countdown,
    )


def reconcile_resource_membership(resource_id: int) -> None:
    """A staged rollout ended: the clusters its placement selects that hold nothing get the resource
    (queue "default", once the transaction commits)."""
    send("federation.tasks.reconcile_resource_membership_task", (resource_id,), queue="default", on_commit=True)


def reconcile_namespace_members(namespace: str, cluster_ids: list[int]) -> None:
    """The Namespace ``namespace`` is now on these clusters: the resources in it that hold nothing
    there are planned again (federation.membership.reconcile_namespace_members; queue "default",
    once the transaction commits)."""
    send(
        "federation.tasks.reconcile_namespace_members_task",
        (namespace, sorted(set(cluster_ids))),
        queue="default",
        on_commit=True,
    )


def reconcile_memberships(cluster_ids: list[int], reason: str) -> None:
    """Many clusters joined or were relabelled at once: one message; the worker queues one
    ``reconcile_membership`` per cluster (queue "default")."""
    send("federation.tasks.reconcile_memberships_task", (list(cluster_ids), reason), queue="default")
