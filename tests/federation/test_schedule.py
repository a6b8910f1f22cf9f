"""Placement and replica decisions (federation/schedule.py) against KubeFed's controllers; no network."""

from datetime import timedelta

import pytest
from django.utils import timezone

from clusters.choices import ClusterState
from federation import propagation, schedule
from federation.choices import PropagationReason, TargetAction
from federation.models import PropagatedVersion
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import federate_namespace, web_deployment

pytestmark = pytest.mark.django_db


@pytest.fixture
def clusters():
    made = {
        "eu-1": ClusterFactory(name="eu-1", labels={"region": "eu"}),
        "eu-2": ClusterFactory(name="eu-2", labels={"region": "eu"}),
        "us-1": ClusterFactory(name="us-1", labels={"region": "us"}),
    }
    federate_namespace("shop", list(made))
    return made


def planned(resource):
    return {
        p.cluster.name: (p.action, p.replicas) for p in propagation.plan_targets(resource, resource.current_revision)
    }


def test_rsp_without_clusters_defaults_to_star_weight_1(clusters):
    # KubeFed ReplicaScheduler.GetSchedulingResult: an RSP without clusters schedules as {"*": {weight: 1}}.
    resource = web_deployment(placement={"clusters": ["eu-1"]}, scheduling={"totalReplicas": 6})
    assert planned(resource) == {"eu-1": ("apply", 2), "eu-2": ("apply", 2), "us-1": ("apply", 2)}


def test_clusters_without_a_preference_are_placed_with_zero_replicas(clusters):
    # KubeFed Planner.Plan gives them 0 and the RSP plugin writes every planned cluster into the placement.
    resource = web_deployment(scheduling={"totalReplicas": 4, "clusters": {"eu-1": {"weight": 1}}})
    assert planned(resource) == {"eu-1": ("apply", 4), "eu-2": ("apply", 0), "us-1": ("apply", 0)}


def test_without_intersect_the_rsp_placement_wins_over_the_cluster_selector(clusters):
    # KubeFed: without intersectWithClusterSelector the RSP schedules over every joined (Ready) cluster.
    resource = web_deployment(
        placement={"clusterSelector": {"matchLabels": {"region": "eu"}}},
        scheduling={"totalReplicas": 3, "clusters": {"*": {"weight": 1}}},
    )
    assert set(planned(resource)) == {"eu-1", "eu-2", "us-1"}


def test_intersect_with_cluster_selector_schedules_only_over_the_selected_clusters(clusters):
    # KubeFed Plugin.GetResourceClusters (selectorOnly): the clusters list is ignored, the selector decides.
    resource = web_deployment(
        placement={"clusters": ["us-1"], "clusterSelector": {"matchLabels": {"region": "eu"}}},
        scheduling={"totalReplicas": 4, "intersectWithClusterSelector": True, "clusters": {"*": {"weight": 1}}},
    )
    assert planned(resource) == {"eu-1": ("apply", 2), "eu-2": ("apply", 2)}


def test_intersect_without_a_selector_leaves_the_rsp_idle_and_the_placement_stands(clusters):
    # KubeFed ReplicaScheduler.Reconcile: no preferred clusters -> nothing to do; the resource's own placement
    # (and the template's replicas) stay.
    resource = web_deployment(
        placement={"clusters": ["us-1"]}, scheduling={"totalReplicas": 4, "intersectWithClusterSelector": True}
    )
    assert planned(resource) == {"us-1": ("apply", None)}
    assert "does nothing" in schedule.decide_for(resource).note


def test_rsp_replicas_planned_where_the_namespace_is_not_are_not_placed(clusters):
    # KubeFed: the RSP writes every Ready cluster into the placement, the sync controller intersects it with the
    # FederatedNamespace's placement.
    federate_namespace("half", ["eu-1", "eu-2"])
    resource = web_deployment(namespace="half", scheduling={"totalReplicas": 6})
    assert planned(resource) == {"eu-1": ("apply", 2), "eu-2": ("apply", 2)}
    decision = schedule.decide_for(resource)
    row = next(r for r in decision.schedule if r.cluster == "us-1")
    assert row.planned == 2 and row.reason == (
        "not placed: Namespace half is not placed on us-1 (the plan's 2 replica(s) for it run nowhere, as in KubeFed)"
    )
    assert decision.note.startswith("2 of totalReplicas 6 are given to no cluster")


def test_replicas_no_cluster_can_take_are_said_to_be_placed_nowhere(clusters):
    # KubeFed Planner.Plan: replicas left once every cluster is at its maxReplicas stay unplaced
    resource = web_deployment(
        scheduling={"totalReplicas": 10, "clusters": {"eu-1": {"weight": 1, "maxReplicas": 4}}},
    )
    decision = schedule.decide_for(resource)
    assert {r.cluster: r.planned for r in decision.schedule} == {"eu-1": 4, "eu-2": 0, "us-1": 0}
    assert decision.note.startswith("6 of totalReplicas 10 are given to no cluster")


def test_a_plan_that_places_every_replica_has_no_note(clusters):
    assert schedule.decide_for(web_deployment(scheduling={"totalReplicas": 6})).note == ""


def test_not_ready_clusters_are_skipped_and_left_out_of_scheduling(clusters):
    clusters["us-1"].state = ClusterState.NOT_READY
    clusters["us-1"].save()
    resource = web_deployment(scheduling={"totalReplicas": 4})
    plans = planned(resource)
    assert plans["eu-1"] == ("apply", 2) and plans["eu-2"] == ("apply", 2) and plans["us-1"][0] == TargetAction.SKIP


def present(resource, cluster, *, replicas, status):
    return PropagatedVersion.objects.create(
        resource=resource,
        cluster=cluster,
        status=PropagationReason.OK,
        applied_manifest={"spec": {"replicas": replicas}},
        remote_status=status,
    )


def progressing(ready, replicas, *, ago):
    stamp = (timezone.now() - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "replicas": replicas,
        "readyReplicas": ready,
        "conditions": [{"type": "Progressing", "status": "True", "lastUpdateTime": stamp, "lastTransitionTime": stamp}],
    }


def test_current_replicas_are_the_members_ready_replicas(clusters):
    # KubeFed clustersReplicaState: current = ready replicas on the member, not the spec.replicas written there.
    resource = web_deployment(scheduling={"totalReplicas": 30, "rebalance": False})
    present(resource, clusters["us-1"], replicas=30, status=progressing(20, 30, ago=5))
    # 20 running on us-1 are kept; the other 10 go to the eu clusters
    assert planned(resource) == {"eu-1": ("apply", 5), "eu-2": ("apply", 5), "us-1": ("apply", 20)}


def test_capacity_is_estimated_from_replicas_unready_beyond_the_threshold(clusters, settings):
    # KubeFed podanalyzer: pods unschedulable for longer than 60 s lower the cluster's estimated capacity
    # (replicas - unschedulable); the overflow goes to the other clusters and is asked for on top.
    settings.FEDERATION_UNSCHEDULABLE_SECONDS = 60
    resource = web_deployment(scheduling={"totalReplicas": 9, "rebalance": True})
    present(resource, clusters["us-1"], replicas=3, status=progressing(1, 3, ago=30))
    assert planned(resource)["us-1"] == ("apply", 3), "younger than the threshold: no estimate yet"
    PropagatedVersion.objects.filter(resource=resource).update(remote_status=progressing(1, 3, ago=90))
    assert planned(resource) == {"eu-1": ("apply", 4), "eu-2": ("apply", 4), "us-1": ("apply", 3)}
    row = next(r for r in schedule.decide_for(resource).schedule if r.cluster == "us-1")
    assert (row.capacity, row.planned, row.overflow, row.replicas) == (1, 1, 2, 3)
    assert row.reason.startswith("capacity 1: 2 moved to eu-1, eu-2")


def test_overflow_asked_for_on_a_cluster_counts_as_given_to_it(clusters, settings):
    # KubeFed writes planned + overflow into spec.replicas: the overflow asked for on a cluster of
    # capacity 1 counts as given to it; only what neither plans is counted as given to no cluster
    settings.FEDERATION_UNSCHEDULABLE_SECONDS = 60
    resource = web_deployment(
        placement={"clusters": ["us-1"]},
        scheduling={"totalReplicas": 3, "intersectWithClusterSelector": False, "clusters": {"us-1": {"weight": 1}}},
    )
    present(resource, clusters["us-1"], replicas=3, status=progressing(1, 3, ago=90))
    decision = schedule.decide_for(resource)
    row = next(r for r in decision.schedule if r.cluster == "us-1")
    assert (row.capacity, row.planned, row.overflow, row.replicas) == (1, 1, 1, 2)
    assert decision.note.startswith("1 of totalReplicas 3 are given to no cluster")
