"""Rollout strategies: validation with clear errors, and wave assignment (pure)."""

import pytest

from federation.propagation.gates import EXCLUDED, FAILED, HEALTHY, WAITING, deployment_rollout
from federation.rollout_strategy import (
    IMPLICIT_WAVE,
    StrategyError,
    assign_waves,
    normalize_strategy,
    parallel_count,
)

TARGETS = {
    "c1": {"canary": "true", "env": "staging"},
    "s1": {"env": "staging"},
    "s2": {"env": "staging"},
    "p1": {"env": "prod", "region": "eu-west-1"},
    "p2": {"env": "prod", "region": "us-east-1"},
    "x1": {},
}


def wave(name, **kw):
    return {"name": name, "clusterSelector": {"matchLabels": kw.pop("labels", {"env": "prod"})}, **kw}


def test_earlier_waves_win_and_the_rest_goes_last():
    strategy = normalize_strategy(
        {
            "waves": [
                wave("canary", labels={"canary": "true"}, maxParallel=1),
                wave("staging", labels={"env": "staging"}),
                wave("prod-eu", labels={"env": "prod", "region": "eu-west-1"}),
                wave("prod", labels={"env": "prod"}, maxParallel="50%"),
            ]
        }
    )
    plans = assign_waves(strategy, TARGETS)
    assert [(p.name, p.clusters) for p in plans] == [
        ("canary", ["c1"]),
        ("staging", ["s1", "s2"]),
        ("prod-eu", ["p1"]),
        ("prod", ["p2"]),
        (IMPLICIT_WAVE, ["x1"]),
    ]
    assert [p.max_parallel for p in plans] == [1, 2, 1, 1, 1]


def test_explicit_cluster_lists_and_empty_waves_dropped():
    strategy = normalize_strategy(
        {"waves": [{"name": "first", "clusters": ["p2", "gone"]}, wave("none", labels={"x": "y"})]}
    )
    plans = assign_waves(strategy, TARGETS)
    assert [(p.name, p.clusters) for p in plans] == [("first", ["p2"]), (IMPLICIT_WAVE, ["c1", "p1", "s1", "s2", "x1"])]


def test_no_strategy_is_one_wave_of_everything_at_once():
    assert normalize_strategy(None) == {} and normalize_strategy({}) == {}
    [plan] = assign_waves({}, TARGETS)
    assert plan.clusters == sorted(TARGETS) and plan.max_parallel == len(TARGETS)
    assert assign_waves({}, {}) == []


@pytest.mark.parametrize(
    ("value", "size", "expected"), [(1, 5, 1), (10, 5, 5), ("25%", 5, 2), ("100%", 5, 5), ("1%", 3, 1), (None, 4, 4)]
)
def test_max_parallel_count_or_percentage_rounded_up(value, size, expected):
    assert parallel_count(value, size) == expected


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("canary", "must be a mapping"),
        ({"waves": []}, "non-empty list"),
        ({"waves": [wave("a"), wave("a")]}, "'a' is used twice"),
        ({"waves": [wave("rest")]}, "reserved"),
        ({"waves": [wave("Bad Name")]}, "lower-case"),
        ({"waves": [{"name": "a"}]}, "give clusterSelector or clusters"),
        ({"waves": [wave("a", labels={"env": "bad value!"})]}, "not a valid label value"),
        ({"waves": [{"name": "a", "clusterSelector": {"matchLabel": {}}}]}, "unknown field 'matchLabel'"),
        ({"waves": [wave("a", maxParallel=0)]}, "maxParallel must be a count"),
        ({"waves": [wave("a", maxParallel="150%")]}, "percentage"),
        ({"waves": [wave("a", maxParallel="half")]}, "percentage"),
        ({"waves": [wave("a", bakeSeconds=-5)]}, "bakeSeconds must be 0 or more"),
        ({"waves": [wave("a", bakeSeconds="60")]}, "bakeSeconds must be a whole number"),
        ({"waves": [wave("a", maxFailures=-1)]}, "maxFailures must be 0 or more"),
        ({"waves": [wave("a", progressDeadlineSeconds=0)]}, "progressDeadlineSeconds must be 1 or more"),
        ({"waves": [wave("a", requireApproval="yes")]}, "requireApproval must be true or false"),
        ({"waves": [wave("a", surge=1)]}, "unknown field 'surge'"),
        ({"autoRollback": "on", "waves": [wave("a")]}, "autoRollback must be true or false"),
        ({"waves": [{"name": "a", "clusters": "p1"}]}, "list of cluster names"),
    ],
)
def test_bad_strategies_are_refused_with_the_reason(raw, message):
    with pytest.raises(StrategyError, match=message):
        normalize_strategy(raw)


# kubectl rollout status (DeploymentStatusViewer) decisions, as data: kubernetes/kubectl
# pkg/polymorphichelpers/rollout_status.go (Apache-2.0), plus ready = desired as the issue asks
DEPLOYMENTS = [
    ({"generation": 2}, {"observedGeneration": 1}, 3, WAITING),
    ({"generation": 2}, {"observedGeneration": 2, "updatedReplicas": 1, "replicas": 3}, 3, WAITING),
    ({"generation": 2}, {"observedGeneration": 2, "updatedReplicas": 3, "replicas": 4}, 3, WAITING),
    (
        {"generation": 2},
        {"observedGeneration": 2, "updatedReplicas": 3, "replicas": 3, "availableReplicas": 2},
        3,
        WAITING,
    ),
    (
        {"generation": 2},
        {"observedGeneration": 2, "updatedReplicas": 3, "replicas": 3, "availableReplicas": 3, "readyReplicas": 3},
        3,
        HEALTHY,
    ),
    (
        {"generation": 2},
        {"observedGeneration": 2, "conditions": [{"type": "Progressing", "reason": "ProgressDeadlineExceeded"}]},
        3,
        FAILED,
    ),
]


@pytest.mark.parametrize(("metadata", "status", "replicas", "verdict"), DEPLOYMENTS)
def test_deployment_rollout_complete_as_kubectl_decides(metadata, status, replicas, verdict):
    obj = {"metadata": {"name": "web", **metadata}, "spec": {"replicas": replicas}, "status": status}
    assert deployment_rollout(obj)[0] == verdict


@pytest.mark.django_db
def test_gates_fail_for_a_cluster_not_ready_a_failed_target_or_drift():
    from clusters.choices import ClusterState
    from federation import services
    from federation.choices import PropagationReason, SyncState
    from federation.models import PropagatedVersion
    from federation.propagation.gates import check_gates
    from tests.clusters.factories import ClusterFactory
    from tests.federation.factories import ftype

    ready = [ClusterFactory(name=n, state=ClusterState.READY) for n in ("ok", "failed", "drifted")]
    down = ClusterFactory(name="down", state=ClusterState.NOT_READY)
    config = services.create_resource(
        ftype("ConfigMap"), namespace="default", name="cfg", template={"data": {"k": "v"}}
    )
    rows = {
        "ok": (PropagationReason.OK, SyncState.IN_SYNC),
        "failed": (PropagationReason.UPDATE_FAILED, SyncState.UNKNOWN),
        "drifted": (PropagationReason.OK, SyncState.OUT_OF_SYNC),
        "down": (PropagationReason.OK, SyncState.IN_SYNC),
    }
    for cluster in [*ready, down]:
        status, sync = rows[cluster.name]
        PropagatedVersion.objects.create(resource=config, cluster=cluster, status=status, sync_state=sync)
    results = check_gates(config, ["ok", "failed", "drifted", "down", "gone"])
    assert {n: (r.verdict, r.gate) for n, r in results.items()} == {
        "ok": (HEALTHY, ""),
        "failed": (FAILED, "applied"),
        "drifted": (FAILED, "drift"),
        "down": (FAILED, "cluster-ready"),
        "gone": (EXCLUDED, "cluster-ready"),  # unjoined: no longer the fleet's, not the change's failure
    }
    assert "down is NotReady" in results["down"].reason
    # another revision than the rollout's (a newer change reached the cluster); a cluster the
    # rollout removes the resource from passes once it is removed, and fails while it is not
    revision = config.current_revision
    PropagatedVersion.objects.filter(cluster__name="ok").update(revision=revision)
    removed = ClusterFactory(name="removed", state=ClusterState.READY)
    PropagatedVersion.objects.create(resource=config, cluster=removed, status=PropagationReason.REMOVED)
    results = check_gates(config, ["ok", "drifted", "removed"], revision_id=revision.pk, removed={"removed", "ok"})
    assert {n: (r.verdict, r.gate) for n, r in results.items()} == {
        "ok": (FAILED, "removed"),
        "drifted": (FAILED, "applied"),
        "removed": (HEALTHY, ""),
    }
    assert "another revision" in results["drifted"].reason


def test_auto_rollback_defaults_on_for_prod_targets_only():
    from federation.rollout_strategy import auto_rollback_for

    unsaid = normalize_strategy({"waves": [wave("canary", labels={"canary": "true"})]})
    assert unsaid["autoRollback"] is None
    assert auto_rollback_for(unsaid, TARGETS) is True  # p1, p2 are env=prod
    assert auto_rollback_for(unsaid, {"s1": {"env": "staging"}}) is False
    off = normalize_strategy({"autoRollback": False, "waves": [wave("canary")]})
    assert auto_rollback_for(off, TARGETS) is False


# kubectl's own tables (kubernetes/kubectl pkg/polymorphichelpers/rollout_status_test.go, Apache-2.0):
# TestDaemonSetStatusViewerStatus and TestStatefulSetStatusViewerStatus, as (generation, status,
# done); a StatefulSet there has 3 replicas
DAEMONSET_CASES = [
    (
        0,
        {"observedGeneration": 1, "updatedNumberScheduled": 0, "desiredNumberScheduled": 1, "numberAvailable": 0},
        False,
    ),
    (
        1,
        {"observedGeneration": 1, "updatedNumberScheduled": 2, "desiredNumberScheduled": 2, "numberAvailable": 1},
        False,
    ),
    (
        1,
        {"observedGeneration": 1, "updatedNumberScheduled": 2, "desiredNumberScheduled": 2, "numberAvailable": 2},
        True,
    ),
    (
        2,
        {"observedGeneration": 1, "updatedNumberScheduled": 2, "desiredNumberScheduled": 2, "numberAvailable": 2},
        False,
    ),
]
STATEFULSET_CASES = [
    (2, None, {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "currentReplicas": 3}, False),
    (1, None, {"observedGeneration": 2, "replicas": 3, "readyReplicas": 2, "currentReplicas": 3}, False),
    (
        1,
        2,
        {"observedGeneration": 2, "replicas": 3, "readyReplicas": 3, "currentReplicas": 2, "updatedReplicas": 1},
        True,
    ),
    (
        1,
        2,
        {"observedGeneration": 2, "replicas": 3, "readyReplicas": 3, "currentReplicas": 3, "updatedReplicas": 0},
        False,
    ),
    (
        1,
        None,
        {
            "observedGeneration": 2,
            "replicas": 3,
            "readyReplicas": 3,
            "currentReplicas": 3,
            "updatedReplicas": 3,
            "currentRevision": "foo",
            "updateRevision": "foo",
        },
        True,
    ),
    # not in kubectl's table: the update revision not yet current
    (
        1,
        None,
        {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "currentRevision": "a", "updateRevision": "b"},
        False,
    ),
]


@pytest.mark.parametrize("generation,status,done", DAEMONSET_CASES)
def test_daemonset_rollout_complete_as_kubectl_decides(generation, status, done):
    from federation.propagation.gates import daemonset_rollout

    obj = {"metadata": {"name": "foo", "generation": generation}, "spec": {"updateStrategy": {"type": "RollingUpdate"}}}
    assert (daemonset_rollout({**obj, "status": status})[0] == HEALTHY) is done


@pytest.mark.parametrize("generation,partition,status,done", STATEFULSET_CASES)
def test_statefulset_rollout_complete_as_kubectl_decides(generation, partition, status, done):
    from federation.propagation.gates import statefulset_rollout

    strategy = {"type": "RollingUpdate", **({"rollingUpdate": {"partition": partition}} if partition else {})}
    obj = {"metadata": {"name": "foo", "generation": generation}, "spec": {"replicas": 3, "updateStrategy": strategy}}
    assert (statefulset_rollout({**obj, "status": status})[0] == HEALTHY) is done


def test_on_delete_workloads_have_no_rollout_to_wait_for_and_a_failed_job_fails_its_gate():
    from federation.propagation.gates import daemonset_rollout, job_rollout, statefulset_rollout

    on_delete = {"metadata": {"generation": 2}, "spec": {"updateStrategy": {"type": "OnDelete"}}, "status": {}}
    assert daemonset_rollout(on_delete)[0] == HEALTHY and statefulset_rollout(on_delete)[0] == HEALTHY
    job = {"metadata": {"name": "migrate"}}
    assert job_rollout({**job, "status": {}})[0] == WAITING
    done = {"conditions": [{"type": "Complete", "status": "True"}]}
    assert job_rollout({**job, "status": done})[0] == HEALTHY
    failed = {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}
    assert job_rollout({**job, "status": failed}) == (FAILED, "Job migrate failed: BackoffLimitExceeded")
    suspended = {"conditions": [{"type": "Suspended", "status": "True", "reason": "JobSuspended"}]}
    assert job_rollout({**job, "status": suspended}) == (
        WAITING,
        "Job migrate is suspended: the wave cannot pass until it is resumed and completes",
    )
