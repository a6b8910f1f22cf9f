"""Helpers shared by the fault tests: generated fleets registered as Ready clusters, federated
objects, and checks that nothing was lost or duplicated."""

from django.db.models import Count

from clusters.models import VersionSample
from federation import services
from federation.choices import PropagationReason, RunState, TargetState
from federation.models import PropagatedVersion, PropagationRun, PropagationTarget
from tests.bench.harness import register_clusters
from tests.federation.factories import ftype
from tests.utils import wait_for

__all__ = [
    "register_clusters",
    "federate",
    "assert_converged",
    "assert_one_sample_per_cluster",
    "finished_run",
    "wait_for_run",
]


def fleet_versions(fleet) -> dict[str, str]:
    return {c["name"]: c["version"] for c in fleet.admin("GET", "/clusters")["clusters"]}


def federate(kind: str, name: str, clusters, *, namespace: str = "", template=None):
    return services.create_resource(
        ftype(kind), namespace=namespace, name=name, template=template or {}, placement={"clusters": list(clusters)}
    )


def finished_run(run):
    return PropagationRun.objects.filter(pk=run.pk, finished_at__isnull=False).first()


def wait_for_run(run, *, timeout: float, worker=None):
    """Wait for ``run`` to finish; on timeout, fail naming what its unfinished targets say and how
    the worker's log ends (a bare "timed out" left a CI failure unexplained)."""
    try:
        return wait_for(lambda: finished_run(run), timeout=timeout, interval=0.5, message="the run to finish")
    except AssertionError as timed_out:
        unfinished = list(
            PropagationTarget.objects.filter(run=run)
            .exclude(state__in=[TargetState.DONE, TargetState.FAILED])
            .values_list("cluster__name", "state", "attempts", "lease_until", "message")
        )
        log = worker.log()[-6000:] if worker is not None else ""
        raise AssertionError(f"{timed_out}; unfinished targets: {unfinished}\nworker log ends:\n{log}") from None


def assert_converged(resource, run, cluster_names, fleet, *, api_version: str, kind: str, namespace=None):
    """Every target done once, every PropagatedVersion OK at the run's revision, every object live."""
    run = PropagationRun.objects.get(pk=run.pk)
    assert run.state == RunState.SUCCEEDED, run.state
    targets = PropagationTarget.objects.filter(run=run)
    assert targets.count() == len(cluster_names)
    assert not targets.values("cluster").annotate(n=Count("id")).filter(n__gt=1).exists()
    pvs = PropagatedVersion.objects.filter(resource=resource)
    assert pvs.count() == len(cluster_names), "one PropagatedVersion per (resource, cluster)"
    wrong = list(
        pvs.exclude(status=PropagationReason.OK, revision=run.revision).values_list(
            "cluster__name", "status", "message"
        )
    )
    assert not wrong, wrong[:5]
    missing = [n for n in cluster_names if fleet.get_object(n, api_version, kind, namespace, resource.name) is None]
    assert not missing, missing[:5]


def assert_one_sample_per_cluster(cluster_ids):
    """Versions did not change, so each cluster has exactly one VersionSample (nothing duplicated)."""
    counts = dict(
        VersionSample.objects.filter(cluster_id__in=cluster_ids).values_list("cluster_id").annotate(n=Count("id"))
    )
    assert counts == {pk: 1 for pk in cluster_ids}, {k: v for k, v in counts.items() if v != 1} or "missing samples"
