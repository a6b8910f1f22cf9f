"""Propagation, drift and preview services against the fleet simulator, run in-process (the
worker path is covered by test_integration.py)."""

import copy
import threading
import time

import pytest
from celery.signals import before_task_publish
from django.db import OperationalError, connection

from clusters import kube
from clusters.choices import ClusterState
from clusters.services import connection_for
from federation import propagation, services
from federation.choices import (
    Condition,
    DriftPolicy,
    PropagationReason,
    Retention,
    RunState,
    RunTrigger,
    SyncState,
    TargetState,
)
from federation.models import PropagatedVersion, PropagationRun, PropagationTarget
from federation.propagation import network, record, worker
from federation.propagation.common import chunked
from federation.rendering import MANAGED_LABEL
from fedportal.models import AuditEvent
from tests.federation.factories import (
    SIDECAR_TEMPLATE,
    WEB_TEMPLATE,
    drain,
    federate_namespace,
    register_fleet,
    web_deployment,
)
from tests.utils import wait_for

pytestmark = pytest.mark.django_db

MEMBERS = ["m127", "m128", "m130", "m131"]
IMAGE = "/spec/template/spec/containers/0/image"


@pytest.fixture
def fleet_clusters(fleet):
    clusters = register_fleet(fleet, MEMBERS)
    ns = federate_namespace("shop", MEMBERS)
    drain(propagation.propagate_revision(ns))
    return clusters


def live(fleet, cluster, name="web", kind="Deployment", api_version="apps/v1", namespace="shop"):
    return fleet.get_object(cluster, api_version, kind, namespace, name)


def pv(resource, cluster):
    return PropagatedVersion.objects.get(resource=resource, cluster__name=cluster)


def test_weighted_rsp_and_image_override_land_on_every_cluster(fleet, fleet_clusters, operator):
    resource = web_deployment(
        placement={"clusters": MEMBERS},
        overrides=[{"clusterName": "m130", "clusterOverrides": [{"path": IMAGE, "value": "nginx:1.27-alpine"}]}],
        scheduling={"totalReplicas": 10, "rebalance": True, "clusters": {"m127": {"weight": 2}, "*": {"weight": 1}}},
    )
    run = propagation.propagate_revision(resource, actor=operator)
    drain(run)
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED
    replicas = {name: live(fleet, name)["spec"]["replicas"] for name in MEMBERS}
    assert replicas == {"m127": 4, "m128": 2, "m130": 2, "m131": 2}
    images = {name: live(fleet, name)["spec"]["template"]["spec"]["containers"][0]["image"] for name in MEMBERS}
    assert images == {"m127": "nginx:1.25", "m128": "nginx:1.25", "m130": "nginx:1.27-alpine", "m131": "nginx:1.25"}
    obj = live(fleet, "m128")
    assert obj["metadata"]["labels"][MANAGED_LABEL] == "true"
    assert obj["metadata"]["annotations"]["fedportal.io/revision"] == "1"
    version = pv(resource, "m128")
    assert version.status == PropagationReason.OK and version.version.startswith("gen:")
    assert version.template_hash and version.override_hash and version.sync_state == SyncState.IN_SYNC
    assert propagation.run_progress(run).percent_done == 100
    assert AuditEvent.objects.filter(action="federation.propagation.apply", cluster="m130").exists()


def test_propagating_the_same_revision_twice_changes_nothing(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": ["m128", "m130"]})
    drain(propagation.propagate_revision(resource))
    # the simulator writes the finished roll-out's status (a new resourceVersion) rolloutSeconds after
    # the apply: wait for it, so only what the second propagation writes can change the versions
    wait_for(lambda: all((live(fleet, n).get("status") or {}).get("updatedReplicas") for n in ("m128", "m130")))
    before = {n: live(fleet, n)["metadata"]["resourceVersion"] for n in ("m128", "m130")}
    second = propagation.propagate_revision(resource)
    drain(second)
    assert {n: live(fleet, n)["metadata"]["resourceVersion"] for n in ("m128", "m130")} == before
    assert not second.targets.filter(changed=True).exists()


def test_task_body_is_idempotent(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": ["m128"]})
    run = propagation.propagate_revision(resource)
    cluster_id = fleet_clusters["m128"].pk
    first = propagation.propagate_to_cluster(run.pk, cluster_id)
    again = propagation.propagate_to_cluster(run.pk, cluster_id)
    assert first.state == TargetState.DONE and again.skipped


def test_v128_only_field_is_field_not_supported_on_v127_only(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": MEMBERS}, template=SIDECAR_TEMPLATE)
    previews = {p.cluster.name: p for p in propagation.preview_revision(resource)}
    assert previews["m127"].warnings and "restartPolicy" in previews["m127"].warnings[0]
    # drift's compatibility check answers for the preview (as on the matrix and the change request):
    # the fix and the first version that accepts the field, not only the schema's complaint
    assert "override remove /spec/template/spec/initContainers/0/restartPolicy" in previews["m127"].warnings[0]
    assert "upgrade the cluster to v1.28" in previews["m127"].warnings[0]
    assert [previews[n].warnings for n in ("m128", "m130", "m131")] == [[], [], []]
    run = propagation.propagate_revision(resource)
    drain(run)
    failed = pv(resource, "m127")
    assert failed.status == PropagationReason.FIELD_NOT_SUPPORTED
    assert "spec.template.spec.initContainers[0].restartPolicy" in failed.message and "v1.27.3" in failed.message
    assert all(pv(resource, n).status == PropagationReason.OK for n in ("m128", "m130", "m131"))
    run.refresh_from_db()
    assert run.state == RunState.PARTIALLY_FAILED
    assert propagation.aggregate_condition(resource.propagated_versions.all()) == Condition.DEGRADED


def test_a_selector_change_kube_apiserver_refuses_fails_for_good_and_says_how_to_get_out(fleet, fleet_clusters):
    """apps/v1 refuses a Deployment whose selector changes (422, field is immutable): UpdateFailed, no
    retry, the object left as it was, and the message names the way out (restore it, or delete it)."""
    resource = web_deployment(placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    moved = copy.deepcopy(WEB_TEMPLATE)
    moved["spec"]["selector"]["matchLabels"]["track"] = "stable"
    moved["spec"]["template"]["metadata"]["labels"]["track"] = "stable"
    services.update_resource(resource, template=moved, placement={"clusters": ["m128"]})
    run = propagation.propagate_revision(resource)
    drain(run)
    failed = pv(resource, "m128")
    assert failed.status == PropagationReason.UPDATE_FAILED
    assert "spec.selector" in failed.message and "field is immutable" in failed.message
    assert "delete the object on m128 so that the next propagation makes it again" in failed.message
    target = run.targets.get()
    assert target.state == TargetState.FAILED and target.attempts == 1  # permanent: not retried
    assert live(fleet, "m128")["spec"]["selector"] == {"matchLabels": {"app": "web"}}


def test_without_a_federated_namespace_nothing_is_placed_and_the_resource_says_why(fleet):
    # KubeFed ComputeNamespacedPlacement (cluster-scoped control plane): no FederatedNamespace -> no clusters,
    # and the sync controller reports NamespaceNotFederated.
    from federation import schedule

    register_fleet(fleet, ["m128"])
    resource = web_deployment(namespace="nowhere", placement={"clusters": ["m128"]})
    assert propagation.plan_targets(resource, resource.current_revision) == []
    drain(propagation.propagate_revision(resource))
    assert not PropagatedVersion.objects.filter(resource=resource).exists()
    assert fleet.get_object("m128", "apps/v1", "Deployment", "nowhere", "web") is None
    decision = schedule.decide_for(resource)
    assert decision.targets == [] and "NamespaceNotFederated" in decision.not_placed
    assert decision.excluded == {"m128": "NamespaceNotFederated: no FederatedNamespace nowhere"}


def test_a_namespaced_resource_is_placed_only_where_its_namespace_is(fleet):
    # KubeFed ComputeNamespacedPlacement: the resource's placement intersected with its FederatedNamespace's.
    from federation import schedule

    register_fleet(fleet, ["m128", "m130"])
    federate_namespace("half", ["m128"])
    resource = web_deployment(namespace="half", placement={"clusters": ["m128", "m130"]})
    assert [p.cluster.name for p in propagation.plan_targets(resource, resource.current_revision)] == ["m128"]
    assert schedule.decide_for(resource).excluded == {"m130": "Namespace half is not placed on m130"}
    drain(propagation.propagate_revision(resource))
    assert fleet.get_object("m128", "apps/v1", "Deployment", "half", "web") is not None
    assert fleet.get_object("m130", "apps/v1", "Deployment", "half", "web") is None


def test_federated_namespace_is_created_first(fleet):
    register_fleet(fleet, ["m128"])
    federate_namespace("fresh", ["m128"])  # defined, never propagated on its own
    resource = web_deployment(namespace="fresh", placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    assert pv(resource, "m128").status == PropagationReason.OK
    assert fleet.get_object("m128", "v1", "Namespace", None, "fresh") is not None


def someone_elses_configmap(cluster, name: str) -> None:
    """A ConfigMap in shop written with kubectl: no FedPortal label, so never FedPortal's to change."""
    kube.apply_object(
        connection_for(cluster),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "shop"},
            "data": {"owner": "someone-else"},
        },
        plural="configmaps",
        namespaced=True,
        field_manager="kubectl",
    )


def fedportal_configmap(name: str):
    return services.create_resource(
        services.find_type("ConfigMap"),
        namespace="shop",
        name=name,
        template={"data": {"owner": "fedportal"}},
        placement={"clusters": ["m128"]},
    )


def test_unmanaged_object_is_already_exists_and_left_alone(fleet, fleet_clusters):
    someone_elses_configmap(fleet_clusters["m128"], "cfg")
    resource = fedportal_configmap("cfg")
    drain(propagation.propagate_revision(resource))
    assert pv(resource, "m128").status == PropagationReason.ALREADY_EXISTS
    assert fleet.get_object("m128", "v1", "ConfigMap", "shop", "cfg")["data"] == {"owner": "someone-else"}


def served(fleet, cluster) -> dict[str, int]:
    return fleet.admin("GET", f"/clusters/{cluster}/")["requests"]


def calls_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The requests by method a cluster served between two ``served`` readings."""
    return {m: after[m] - before.get(m, 0) for m in after if after[m] != before.get(m, 0)}


def new_image(resource, image: str):
    template = {
        **WEB_TEMPLATE,
        "spec": {
            **WEB_TEMPLATE["spec"],
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image}]},
            },
        },
    }
    return services.update_resource(resource, template=template, placement={"clusters": ["m128"]})


def replace_outside(fleet, cluster):
    """Someone else deletes shop/web on ``cluster`` and makes their own Deployment of that name."""
    fleet.external_delete(cluster.name, "apps/v1", "Deployment", "shop", "web")
    theirs = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "selector": {"matchLabels": {"app": "theirs"}},
            "template": {
                "metadata": {"labels": {"app": "theirs"}},
                "spec": {"containers": [{"name": "theirs", "image": "busybox"}]},
            },
        },
    }
    kube.apply_object(connection_for(cluster), theirs, plural="deployments", namespaced=True, field_manager="kubectl")


def test_removing_a_cluster_deletes_our_object_only_never_one_made_after_it(fleet, fleet_clusters):
    """The delete names the uid FedPortal wrote (a precondition): an object someone made under the name
    after ours was removed stays, even one carrying FedPortal's label (a copy of our manifest applied
    by someone else), and the record says why (KubeFed deletes only what it manages). A stale uid
    (FedPortal made the object again, a restore from a backup) does not leave FedPortal's own behind."""
    resource = web_deployment(placement={"clusters": MEMBERS})
    drain(propagation.propagate_revision(resource))
    replace_outside(fleet, fleet_clusters["m128"])
    copy_of_ours = live(fleet, "m131")
    fleet.external_delete("m131", "apps/v1", "Deployment", "shop", "web")
    copied = {k: copy_of_ours[k] for k in ("apiVersion", "kind", "spec")}
    copied["metadata"] = {"name": "web", "namespace": "shop", "labels": copy_of_ours["metadata"]["labels"]}
    kube.apply_object(
        connection_for(fleet_clusters["m131"]), copied, plural="deployments", namespaced=True, field_manager="kubectl"
    )
    PropagatedVersion.objects.filter(resource=resource, cluster__name="m130").update(
        live_uid="0b7d5a4e-0000-4000-8000-000000000000"
    )
    theirs = {name: live(fleet, name)["metadata"]["uid"] for name in ("m128", "m131")}
    services.update_resource(resource, template=WEB_TEMPLATE, placement={"clusters": []})
    drain(propagation.propagate_revision(resource))
    for name in ("m128", "m131"):
        assert live(fleet, name)["metadata"]["uid"] == theirs[name]  # left untouched
        kept = pv(resource, name)
        assert kept.status == PropagationReason.REMOVED and "is not the object FedPortal made" in kept.message
    for name in ("m127", "m130"):
        assert live(fleet, name) is None and pv(resource, name).message == f"Deleted from {name}."


TERMINATING_FLEET = {"defaults": {"namespaceDeletionSeconds": 5}, "clusters": [{"name": "m1", "version": "v1.30.1"}]}


def test_a_write_into_a_namespace_being_deleted_waits_for_it_and_lands_once_it_is_made_again(fleet_factory):
    """A deleted namespace is Terminating while its content goes (NamespaceLifecycle refuses new content,
    403): the write is retried, not failed for good, and lands once the namespace is made again."""
    fleet = fleet_factory(TERMINATING_FLEET)
    register_fleet(fleet, ["m1"])
    ns = federate_namespace("shop", ["m1"])
    drain(propagation.propagate_revision(ns))
    fleet.external_delete("m1", "v1", "Namespace", None, "shop")
    assert fleet.get_object("m1", "v1", "Namespace", None, "shop")["status"]["phase"] == "Terminating"
    cfg = services.create_resource(
        services.find_type("ConfigMap"),
        namespace="shop",
        name="cfg",
        template={"data": {"a": "1"}},
        placement={"clusters": ["m1"]},
    )
    run = propagation.propagate_revision(cfg)
    drain(run, rounds=1)
    target = run.targets.get()
    assert target.state == TargetState.RETRYING and target.reason == PropagationReason.CREATION_FAILED
    assert (
        "because it is being terminated" in target.message and "retrying once the namespace is gone" in target.message
    )
    wait_for(lambda: fleet.get_object("m1", "v1", "Namespace", None, "shop") is None, timeout=20)
    drain(propagation.propagate_revision(ns, reapply=True))  # an operator's re-sync makes it again
    drain(run)
    assert pv(cfg, "m1").status == PropagationReason.OK
    assert fleet.get_object("m1", "v1", "ConfigMap", "shop", "cfg")["data"] == {"a": "1"}


def test_enforce_does_not_call_an_apply_to_a_namespace_being_deleted_a_repair(fleet_factory):
    """The apply lands on the Terminating namespace (an update is allowed) and changes nothing about
    its going: no repair is recorded until it is gone and made again (a reviewer's finding)."""
    fleet = fleet_factory(TERMINATING_FLEET)
    register_fleet(fleet, ["m1"])
    ns = federate_namespace("shop", ["m1"])
    type(ns).objects.filter(pk=ns.pk).update(
        drift_policy=DriftPolicy.ENFORCE, approved_drift_policy=DriftPolicy.ENFORCE
    )
    ns.refresh_from_db()
    drain(propagation.propagate_revision(ns))
    fleet.external_delete("m1", "v1", "Namespace", None, "shop")
    assert propagation.detect_drift(resource=ns).repaired == 0
    waiting = pv(ns, "m1")
    assert waiting.sync_state == SyncState.OUT_OF_SYNC and waiting.message.startswith("Drift repair waits")
    wait_for(lambda: fleet.get_object("m1", "v1", "Namespace", None, "shop") is None, timeout=20)
    assert propagation.detect_drift(resource=ns).repaired == 1
    made = fleet.get_object("m1", "v1", "Namespace", None, "shop")
    assert made["status"]["phase"] == "Active" and pv(ns, "m1").sync_state == SyncState.IN_SYNC


def test_a_new_object_is_read_then_created_and_one_already_there_is_left_alone(fleet, fleet_clusters):
    """kube-apiserver creates nothing for an apply naming a uid (409), so a new object is read first
    and created by an apply naming none; someone else's object of that name is never written."""
    before = served(fleet, "m128")
    resource = web_deployment(placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    after = served(fleet, "m128")
    assert calls_between(before, after) == {"GET": 1, "PATCH": 1}
    assert pv(resource, "m128").live_uid == live(fleet, "m128")["metadata"]["uid"]
    someone_elses_configmap(fleet_clusters["m128"], "theirs")
    before = served(fleet, "m128")
    cfg = fedportal_configmap("theirs")
    drain(propagation.propagate_revision(cfg))
    after = served(fleet, "m128")
    assert calls_between(before, after) == {"GET": 1}
    assert pv(cfg, "m128").status == PropagationReason.ALREADY_EXISTS
    assert fleet.get_object("m128", "v1", "ConfigMap", "shop", "theirs")["data"] == {"owner": "someone-else"}


def test_a_new_revision_of_an_object_we_wrote_is_one_apply_naming_its_uid(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    uid = live(fleet, "m128")["metadata"]["uid"]
    assert pv(resource, "m128").live_uid == uid
    before = served(fleet, "m128")
    new_image(resource, "nginx:1.27")
    drain(propagation.propagate_revision(resource))
    after = served(fleet, "m128")
    assert calls_between(before, after) == {"PATCH": 1}
    obj = live(fleet, "m128")
    assert obj["metadata"]["uid"] == uid and obj["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    version = pv(resource, "m128")
    assert version.status == PropagationReason.OK and version.sync_state == SyncState.IN_SYNC
    assert "uid" not in version.applied_manifest["metadata"]  # the drift baseline is the manifest itself
    assert AuditEvent.objects.filter(action="federation.propagation.apply", summary__startswith="Updated").exists()
    # nothing changed on our side: the live object is read (drift, unchanged), not written
    before = served(fleet, "m128")
    second = propagation.propagate_revision(resource)
    drain(second)
    assert served(fleet, "m128").get("PATCH", 0) == before.get("PATCH", 0)
    assert not second.targets.filter(changed=True).exists()


def test_an_object_made_again_by_someone_else_is_not_written_over(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    replace_outside(fleet, fleet_clusters["m128"])
    new_image(resource, "nginx:1.27")
    drain(propagation.propagate_revision(resource))
    assert pv(resource, "m128").status == PropagationReason.ALREADY_EXISTS
    obj = live(fleet, "m128")
    assert [(c["name"], c["image"]) for c in obj["spec"]["template"]["spec"]["containers"]] == [("theirs", "busybox")]
    assert MANAGED_LABEL not in (obj["metadata"].get("labels") or {})


def test_an_object_deleted_outside_is_created_again_by_the_next_revision(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    old_uid = pv(resource, "m128").live_uid
    fleet.external_delete("m128", "apps/v1", "Deployment", "shop", "web")
    new_image(resource, "nginx:1.27")
    drain(propagation.propagate_revision(resource))
    obj = live(fleet, "m128")
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert (
        pv(resource, "m128").status == PropagationReason.OK and pv(resource, "m128").live_uid == obj["metadata"]["uid"]
    )
    assert obj["metadata"]["uid"] != old_uid
    assert AuditEvent.objects.filter(
        action="federation.propagation.apply", summary__startswith="Created", summary__contains="revision 2"
    ).exists()


def test_down_cluster_retries_and_converges_when_back(fleet, fleet_clusters, settings):
    settings.FEDERATION_RETRY_BASE_SECONDS = 0.1
    fleet.set_down("m131")
    resource = web_deployment(placement={"clusters": ["m128", "m131"]})
    run = propagation.propagate_revision(resource)
    drain(run, rounds=1)
    waiting = pv(resource, "m131")
    assert waiting.status == PropagationReason.CLUSTER_NOT_READY and "Retrying" in waiting.message
    assert run.targets.get(cluster__name="m131").state == TargetState.RETRYING
    assert propagation.run_progress(run).pending == 1
    fleet.set_up("m131")
    drain(run)
    assert pv(resource, "m131").status == PropagationReason.OK
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED


def test_retries_stop_after_max_attempts(fleet, fleet_clusters, settings):
    settings.FEDERATION_MAX_ATTEMPTS = 2
    fleet.set_down("m131")
    resource = web_deployment(placement={"clusters": ["m131"]})
    run = propagation.propagate_revision(resource)
    drain(run, rounds=3)
    target = run.targets.get()
    assert target.state == TargetState.FAILED and target.attempts == 2
    run.refresh_from_db()
    assert run.state == RunState.FAILED


def test_not_ready_cluster_is_skipped_then_reconciled_when_ready(fleet, fleet_clusters):
    cluster = fleet_clusters["m131"]
    cluster.state = ClusterState.OFFLINE
    cluster.save()
    resource = web_deployment(placement={"clusters": ["m128", "m131"]})
    drain(propagation.propagate_revision(resource))
    assert pv(resource, "m131").status == PropagationReason.CLUSTER_NOT_READY
    assert live(fleet, "m131") is None
    cluster.state = ClusterState.READY
    cluster.save()
    assert propagation.reconcile_waiting_clusters() == 1
    drain(resource.runs.first())
    assert pv(resource, "m131").status == PropagationReason.OK and live(fleet, "m131") is not None


def test_a_run_names_the_clusters_it_queued_and_not_the_ones_it_skipped(fleet, fleet_clusters):
    # a staged rollout applies the first of these chunks itself: it must cut the same chunks as the tasks
    cluster = fleet_clusters["m131"]
    cluster.state = ClusterState.OFFLINE
    cluster.save()
    resource = web_deployment(placement={"clusters": ["m128", "m130", "m131"]})
    run = propagation.propagate_revision(resource)
    assert sorted(run.queued_cluster_ids) == sorted(fleet_clusters[n].pk for n in ("m128", "m130"))
    drain(run)


def test_a_run_makes_a_pending_row_for_each_target_and_keeps_the_rows_there(fleet, fleet_clusters):
    # the rows a run lacks are made from its targets in one statement, before any worker runs
    resource = web_deployment(placement={"clusters": ["m128", "m130"]})
    drain(propagation.propagate_revision(resource))
    kept = pv(resource, "m128")
    services.update_resource(resource, template=WEB_TEMPLATE, placement={"clusters": ["m128", "m130", "m131"]})
    run = propagation.propagate_revision(resource)
    rows = {v.cluster.name: v for v in PropagatedVersion.objects.filter(resource=resource).select_related("cluster")}
    assert sorted(rows) == ["m128", "m130", "m131"]  # one row each: the two there are not made twice
    assert rows["m131"].status == PropagationReason.PENDING and rows["m131"].applied_manifest is None
    assert rows["m128"].pk == kept.pk and rows["m128"].applied_manifest == kept.applied_manifest
    drain(run)
    assert pv(resource, "m131").status == PropagationReason.OK


def targets_of(run) -> dict[str, tuple]:
    return {t.cluster.name: (t.action, t.replicas) for t in run.targets.select_related("cluster")}


def test_a_run_restricted_to_some_clusters_plans_them_as_a_whole_fleet_run_would(fleet, fleet_clusters):
    # without replica scheduling only the named clusters are read and planned (a rollout's batch, a
    # re-sync); one that left the placement is still a removal
    resource = web_deployment(placement={"clusters": ["m127", "m128"]})
    drain(propagation.propagate_revision(resource))
    services.update_resource(resource, template=WEB_TEMPLATE, placement={"clusters": ["m128", "m130"]})
    resource.refresh_from_db()
    ids = [fleet_clusters[n].pk for n in ("m127", "m130", "m131")]
    run = propagation.propagate_revision(resource, only_clusters=ids)
    assert targets_of(run) == {"m127": ("delete", None), "m130": ("apply", None)}
    drain(run)
    assert live(fleet, "m127") is None and live(fleet, "m130") is not None
    assert pv(resource, "m128").revision.number == 1  # not in the run: left as it was


def test_a_restricted_run_of_a_scheduled_resource_splits_the_replicas_over_the_whole_fleet(fleet, fleet_clusters):
    resource = web_deployment(
        scheduling={"totalReplicas": 10, "rebalance": True, "clusters": {"m127": {"weight": 2}, "*": {"weight": 1}}},
    )
    run = propagation.propagate_revision(resource, only_clusters=[fleet_clusters["m127"].pk])
    assert targets_of(run) == {"m127": ("apply", 4)}  # 2 of the 5 weights, not all 10 replicas
    drain(run)
    assert live(fleet, "m127")["spec"]["replicas"] == 4


def test_a_caller_that_applies_the_first_chunk_itself_gets_no_task_for_it(
    fleet, fleet_clusters, settings, django_capture_on_commit_callbacks
):
    # a staged rollout's batch: the advancing task applies the first chunk, the tasks the rest
    settings.FEDERATION_BATCH_SIZE = 1
    resource = web_deployment(placement={"clusters": MEMBERS})
    queued = []

    def capture(headers=None, body=None, **_):
        if headers and headers.get("task") == "federation.tasks.propagate_targets_task":
            queued.append(body[0][1])

    before_task_publish.connect(capture, weak=False)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            run = propagation.propagate_revision(resource, first_chunk_here=True)
    finally:
        before_task_publish.disconnect(capture)
    chunks = chunked(run.queued_cluster_ids)
    assert len(chunks) == 4 and queued == chunks[1:]
    propagation.propagate_targets(run.pk, chunks[0])
    drain(run)
    assert all(live(fleet, name) is not None for name in MEMBERS)


@pytest.mark.django_db(transaction=True)
def test_chunks_finishing_together_close_their_run_once(fleet, fleet_clusters, settings):
    # each chunk's last flush closes the run when no target is left: with the run's row locked,
    # the later of two finishing at once sees the earlier one's targets done
    settings.FEDERATION_BATCH_SIZE = 1
    resource = web_deployment(placement={"clusters": MEMBERS})
    run = propagation.propagate_revision(resource)
    chunks = chunked(run.queued_cluster_ids)
    assert len(chunks) == len(MEMBERS)
    start = threading.Barrier(len(chunks))

    def apply(chunk):
        try:
            start.wait()
            propagation.propagate_targets(run.pk, chunk)
        finally:
            connection.close()

    threads = [threading.Thread(target=apply, args=(chunk,)) for chunk in chunks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # a worker of another test may have taken some chunks' tasks too: the run is closed all the same
    wait_for(lambda: PropagationRun.objects.filter(pk=run.pk, finished_at__isnull=False).exists(), timeout=30)
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED
    finishes = AuditEvent.objects.filter(action="federation.run.finish", after__run=run.pk)
    assert finishes.count() == 1


def test_isolated_cluster_is_skipped(fleet, fleet_clusters):
    cluster = fleet_clusters["m131"]
    cluster.isolated = True
    cluster.save()
    resource = web_deployment(placement={"clusters": ["m131"]})
    drain(propagation.propagate_revision(resource))
    assert pv(resource, "m131").status == PropagationReason.CLUSTER_ISOLATED and live(fleet, "m131") is None


def test_rsp_moves_replicas_away_from_unready_clusters(fleet, fleet_clusters):
    fleet_clusters["m131"].state = ClusterState.NOT_READY
    fleet_clusters["m131"].save()
    resource = web_deployment(scheduling={"totalReplicas": 9, "rebalance": True, "clusters": {"*": {"weight": 1}}})
    drain(propagation.propagate_revision(resource))
    assert sum(live(fleet, n)["spec"]["replicas"] for n in ("m127", "m128", "m130")) == 9


@pytest.mark.parametrize(
    "retention, expect_present, status",
    [
        (Retention.DELETE, False, PropagationReason.REMOVED),
        (Retention.ORPHAN, True, PropagationReason.ORPHANED),
    ],
)
def test_clusters_leaving_the_placement_delete_or_orphan(fleet, fleet_clusters, retention, expect_present, status):
    resource = web_deployment(placement={"clusters": ["m128", "m130"]}, retention=retention)
    drain(propagation.propagate_revision(resource))
    services.update_resource(resource, template=WEB_TEMPLATE, placement={"clusters": ["m128"]})
    resource.refresh_from_db()
    drain(propagation.propagate_revision(resource))
    assert (live(fleet, "m130") is not None) is expect_present
    assert pv(resource, "m130").status == status
    assert live(fleet, "m128") is not None


@pytest.mark.parametrize("policy", [DriftPolicy.REPORT, DriftPolicy.ENFORCE])
def test_external_edit_is_drift_with_a_field_diff(fleet, fleet_clusters, policy):
    resource = web_deployment(placement={"clusters": ["m128", "m130"]}, drift_policy=policy)
    drain(propagation.propagate_revision(resource))
    fleet.external_edit(
        "m130",
        "apps/v1",
        "Deployment",
        "shop",
        "web",
        {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "evil:latest"}]}}}},
    )
    summary = propagation.detect_drift()
    assert summary.checked == 6  # 4 namespaces + 2 deployments
    assert summary.out_of_sync + summary.repaired == 1
    version = pv(resource, "m130")
    if policy == DriftPolicy.REPORT:
        assert version.sync_state == SyncState.OUT_OF_SYNC
        assert version.drift == [{"path": IMAGE, "before": "nginx:1.25", "after": "evil:latest", "change": "changed"}]
        assert live(fleet, "m130")["spec"]["template"]["spec"]["containers"][0]["image"] == "evil:latest"
        assert propagation.aggregate_condition(resource.propagated_versions.all()) == Condition.OUT_OF_SYNC
        # a per-cluster re-sync repairs it
        drain(propagation.resync_cluster(resource, fleet_clusters["m130"]))
        propagation.detect_drift()
        assert pv(resource, "m130").sync_state == SyncState.IN_SYNC
    else:
        assert summary.repaired == 1
        assert version.sync_state == SyncState.IN_SYNC and "Drift repaired" in version.message
        assert live(fleet, "m130")["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
        assert AuditEvent.objects.filter(action="federation.drift.enforce", cluster="m130").exists()
    assert AuditEvent.objects.filter(action="federation.drift.detect", cluster="m130").exists()
    assert pv(resource, "m128").sync_state == SyncState.IN_SYNC


def test_a_resync_puts_back_a_label_changed_outside(fleet, fleet_clusters):
    """A label edit leaves the generation as it was: the re-sync read the same version, said "Up to
    date." and wrote nothing while the drift page still showed the label (a reviewer's finding)."""
    resource = web_deployment(placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    fleet.external_edit("m128", "apps/v1", "Deployment", "shop", "web", {"metadata": {"labels": {"app": "hacked"}}})
    propagation.detect_drift(resource=resource)
    assert pv(resource, "m128").sync_state == SyncState.OUT_OF_SYNC
    run = propagation.resync_cluster(resource, fleet_clusters["m128"])
    drain(run)
    assert live(fleet, "m128")["metadata"]["labels"]["app"] == "web"
    target = run.targets.get()
    assert (target.message, target.changed) == ("Updated.", True)
    assert pv(resource, "m128").sync_state == SyncState.IN_SYNC
    propagation.detect_drift(resource=resource)
    assert pv(resource, "m128").sync_state == SyncState.IN_SYNC


def test_a_background_run_of_the_same_revision_leaves_drift_to_the_drift_policy(fleet, fleet_clusters):
    """Only an operator's re-sync applies regardless: a run FedPortal starts itself (a cluster joining a
    replica-scheduled resource re-plans every cluster) must not repair drift a Report policy records."""
    resource = web_deployment(placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    fleet.external_edit("m128", "apps/v1", "Deployment", "shop", "web", {"metadata": {"labels": {"app": "hacked"}}})
    propagation.detect_drift(resource=resource)
    run = propagation.propagate_revision(resource, revision=resource.current_revision, trigger=RunTrigger.RESYNC)
    drain(run)
    assert not run.reapply and run.targets.get().message == "Up to date."
    assert live(fleet, "m128")["metadata"]["labels"]["app"] == "hacked"
    assert pv(resource, "m128").sync_state == SyncState.OUT_OF_SYNC


def test_a_resync_of_an_object_as_approved_writes_nothing_and_says_so(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    version = live(fleet, "m128")["metadata"]["resourceVersion"]
    run = propagation.resync_cluster(resource, fleet_clusters["m128"])
    drain(run)
    assert live(fleet, "m128")["metadata"]["resourceVersion"] == version
    target = run.targets.get()
    assert (target.message, target.changed) == ("Up to date.", False)


@pytest.mark.parametrize("status", [PropagationReason.CLUSTER_NOT_READY, PropagationReason.UPDATE_FAILED])
def test_a_resync_of_a_cluster_that_failed_records_it_ok_when_the_object_already_matches(fleet, fleet_clusters, status):
    """A re-sync resets a failed cluster's status to Pending; an apply that stored nothing there was
    recorded as unchanged and left it Pending for good (a reviewer's finding). The background sweep
    re-syncs such clusters the same way."""
    resource = web_deployment(placement={"clusters": ["m128", "m130"]})
    drain(propagation.propagate_revision(resource))
    PropagatedVersion.objects.filter(resource=resource).update(status=status)
    drain(propagation.resync_cluster(resource, fleet_clusters["m128"]))
    assert pv(resource, "m128").status == PropagationReason.OK
    if status == PropagationReason.CLUSTER_NOT_READY:  # what the sweep re-syncs once the cluster is Ready
        assert propagation.reconcile_waiting_clusters() == 1
        drain(PropagationRun.objects.filter(resource=resource).latest("pk"))
        assert pv(resource, "m130").status == PropagationReason.OK


def test_a_resync_takes_back_a_replaced_object_only_when_it_carries_fedportals_label(fleet, fleet_clusters):
    """Enforce never takes a replaced object over; an operator's re-sync applies the approved manifest
    to one that declares itself FedPortal's (made again from FedPortal's own YAML: the re-sync said
    "Up to date." over it), and refuses, with the reason, one that does not."""
    resource = web_deployment(placement={"clusters": ["m128", "m130"]})
    drain(propagation.propagate_revision(resource))
    ours = live(fleet, "m128")
    fleet.external_delete("m128", "apps/v1", "Deployment", "shop", "web")
    again = {key: ours[key] for key in ("apiVersion", "kind", "spec")}
    again["metadata"] = {key: ours["metadata"][key] for key in ("name", "namespace", "labels", "annotations")}
    kube.apply_object(
        connection_for(fleet_clusters["m128"]), again, plural="deployments", namespaced=True, field_manager="kubectl"
    )
    replace_outside(fleet, fleet_clusters["m130"])
    propagation.detect_drift(resource=resource)
    assert [pv(resource, name).drift[0]["change"] for name in ("m128", "m130")] == ["replaced", "replaced"]

    drain(propagation.resync_cluster(resource, fleet_clusters["m128"]))
    version, obj = pv(resource, "m128"), live(fleet, "m128")
    assert (
        version.status == PropagationReason.OK and version.live_uid == obj["metadata"]["uid"] != ours["metadata"]["uid"]
    )
    assert version.sync_state == SyncState.IN_SYNC and version.drift == []

    drain(propagation.resync_cluster(resource, fleet_clusters["m130"]))
    version = pv(resource, "m130")
    assert version.status == PropagationReason.ALREADY_EXISTS and "left untouched" in version.message
    assert [c["image"] for c in live(fleet, "m130")["spec"]["template"]["spec"]["containers"]] == ["busybox"]


def test_a_field_removed_outside_fedportal_is_drift(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    fleet.external_edit("m128", "apps/v1", "Deployment", "shop", "web", {"metadata": {"labels": {"app": None}}})
    assert "app" not in live(fleet, "m128")["metadata"]["labels"]
    summary = propagation.detect_drift(resource=resource)
    assert (summary.checked, summary.out_of_sync, summary.errors) == (1, 1, 0), summary
    version = pv(resource, "m128")
    assert version.sync_state == SyncState.OUT_OF_SYNC
    assert version.drift == [{"path": "/metadata/labels/app", "before": "web", "after": None, "change": "removed"}]


def test_deleted_object_is_drift(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    kube.delete_object(
        connection_for(fleet_clusters["m128"]),
        api_version="apps/v1",
        plural="deployments",
        namespace="shop",
        name="web",
    )
    summary = propagation.detect_drift(resource=resource)
    assert summary.checked == 1 and summary.errors == 0, summary
    assert pv(resource, "m128").drift[0]["change"] == "removed"


@pytest.mark.parametrize("policy", [DriftPolicy.REPORT, DriftPolicy.ENFORCE])
def test_an_object_made_again_outside_is_drift_and_never_taken_over(fleet, fleet_clusters, policy):
    resource = web_deployment(placement={"clusters": ["m128"]}, drift_policy=policy)
    drain(propagation.propagate_revision(resource))
    ours = pv(resource, "m128").live_uid
    replace_outside(fleet, fleet_clusters["m128"])
    summary = propagation.detect_drift(resource=resource)
    assert summary.out_of_sync == 1 and summary.repaired == 0, summary
    version = pv(resource, "m128")
    assert version.sync_state == SyncState.OUT_OF_SYNC
    assert version.drift == [
        {"path": "/metadata/uid", "before": ours, "after": live(fleet, "m128")["metadata"]["uid"], "change": "replaced"}
    ]
    obj = live(fleet, "m128")
    assert [c["image"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["busybox"]
    assert MANAGED_LABEL not in (obj["metadata"].get("labels") or {})
    if policy == DriftPolicy.ENFORCE:
        assert "made again outside FedPortal" in version.message
        assert AuditEvent.objects.filter(action="federation.drift.enforce_failed", cluster="m128").exists()


def test_a_repair_refused_again_and_again_is_audited_once(fleet, fleet_clusters):
    """Every sweep or watch event retries the repair; the same refusal is not a new audit event
    (a review found one per sweep: 20 sweeps, 20 events)."""
    resource = web_deployment(placement={"clusters": ["m128"]}, drift_policy=DriftPolicy.ENFORCE)
    drain(propagation.propagate_revision(resource))
    replace_outside(fleet, fleet_clusters["m128"])
    for _ in range(5):
        propagation.detect_drift(resource=resource)
    assert AuditEvent.objects.filter(action="federation.drift.enforce_failed", cluster="m128").count() == 1
    assert "made again outside FedPortal" in pv(resource, "m128").message


def test_enforce_makes_a_removed_object_again(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": ["m128"]}, drift_policy=DriftPolicy.ENFORCE)
    drain(propagation.propagate_revision(resource))
    fleet.external_delete("m128", "apps/v1", "Deployment", "shop", "web")
    assert propagation.detect_drift(resource=resource).repaired == 1
    obj = live(fleet, "m128")
    assert obj is not None and pv(resource, "m128").live_uid == obj["metadata"]["uid"]
    assert pv(resource, "m128").sync_state == SyncState.IN_SYNC


def test_enforce_acts_only_once_a_request_holding_it_was_applied(fleet, fleet_clusters, operator):
    """Switching Report to Enforce makes FedPortal write to the clusters: it is part of the approved
    content (a review's finding: an operator's switch took effect at the next drift check)."""
    resource = web_deployment(placement={"clusters": ["m128"]}, drift_policy=DriftPolicy.REPORT)
    drain(propagation.propagate_revision(resource))
    fleet.external_delete("m128", "apps/v1", "Deployment", "shop", "web")
    current = resource.current_revision
    services.update_resource(
        resource, template=current.template, placement=current.placement, actor=operator, drift_policy="Enforce"
    )
    resource.refresh_from_db()
    assert (resource.drift_policy, resource.approved_drift_policy) == (DriftPolicy.ENFORCE, DriftPolicy.REPORT)
    assert propagation.detect_drift(resource=resource).repaired == 0
    assert live(fleet, "m128") is None

    # applying a request holding it is what turns it on (tests/approvals/test_four_eyes.py)
    type(resource).objects.filter(pk=resource.pk).update(approved_drift_policy=DriftPolicy.ENFORCE)
    assert propagation.detect_drift(resource=resource).repaired == 1
    assert live(fleet, "m128") is not None
    # switching back to Report stops the repairs at once
    resource.refresh_from_db()
    services.update_resource(
        resource, template=current.template, placement=current.placement, actor=operator, drift_policy="Report"
    )
    fleet.external_delete("m128", "apps/v1", "Deployment", "shop", "web")
    assert propagation.detect_drift(resource=resource).repaired == 0
    assert live(fleet, "m128") is None


def test_status_collection_records_remote_status(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        propagation.detect_drift()
        status = pv(resource, "m128").remote_status or {}
        if status.get("readyReplicas") == 1:
            break
        time.sleep(0.3)
    assert status.get("readyReplicas") == 1


def test_preview_shows_create_update_unchanged_and_delete(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": ["m128", "m130"]})
    previews = {p.cluster.name: p for p in propagation.preview_revision(resource)}
    assert {n: p.action for n, p in previews.items()} == {"m128": "create", "m130": "create"}
    assert "image: nginx:1.25" in previews["m128"].rendered_yaml
    drain(propagation.propagate_revision(resource))
    services.update_resource(
        resource,
        template=WEB_TEMPLATE,
        placement={"clusters": ["m128", "m131"]},
        overrides=[{"clusterName": "m128", "clusterOverrides": [{"path": IMAGE, "value": "nginx:1.26"}]}],
    )
    resource.refresh_from_db()
    previews = {p.cluster.name: p for p in propagation.preview_revision(resource)}
    assert {n: p.action for n, p in previews.items()} == {"m128": "update", "m130": "delete", "m131": "create"}
    assert (
        "-      - image: nginx:1.25" in previews["m128"].diff and "+      - image: nginx:1.26" in previews["m128"].diff
    )


def test_a_placement_only_edit_says_only_fedportals_own_annotations_change(fleet, fleet_clusters):
    """The diff leaves FedPortal's revision annotation out: "1 field(s) change." stood beside an
    empty diff (a reviewer's finding)."""
    resource = web_deployment(placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    services.update_resource(resource, template=WEB_TEMPLATE, placement={"clusters": ["m128", "m130"]})
    resource.refresh_from_db()
    previews = {p.cluster.name: p for p in propagation.preview_revision(resource)}
    assert previews["m128"].action == "update" and previews["m128"].diff.strip() == ""
    assert previews["m128"].message == (
        "No change to the object: only FedPortal's own labels and annotations (the revision it records)."
    )


def test_preview_of_unreachable_cluster_is_an_error_row(fleet, fleet_clusters):
    fleet.set_down("m128")
    resource = web_deployment(placement={"clusters": ["m128"]})
    (preview,) = propagation.preview_revision(resource)
    assert preview.action == "error" and "Cannot read" in preview.message


def test_disabled_type_cannot_propagate(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": ["m128"]})
    services.update_type(resource.type, propagation="Disabled")
    resource.refresh_from_db()
    with pytest.raises(propagation.PropagationError, match="Disabled"):
        propagation.propagate_revision(resource)


def test_drift_is_not_judged_while_a_propagation_is_in_flight(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": ["m128"]}, drift_policy=DriftPolicy.ENFORCE)
    drain(propagation.propagate_revision(resource))
    fleet.external_edit("m128", "apps/v1", "Deployment", "shop", "web", {"spec": {"replicas": 5}})
    propagation.propagate_revision(resource)  # queued, not yet run
    assert propagation.detect_drift(resource=resource).checked == 0


@pytest.mark.parametrize(
    "message",
    [
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.template.spec.initContainers[0].restartPolicy"',
        "failed to create typed patch object (shop/web; apps/v1, Kind=Deployment): .spec.template.spec.initContainers[0].restartPolicy: field not declared in schema",
    ],
)
def test_field_rejections_are_field_not_supported_in_both_spellings(message):
    from clusters.models import Cluster

    cluster = Cluster(name="old", server_version="v1.27.3")
    failure = network.classify_failure(
        kube.KubePermanentError(message, kind=kube.KIND_BAD_REQUEST, status=400), existed=True, cluster=cluster
    )
    assert failure.reason == PropagationReason.FIELD_NOT_SUPPORTED and not failure.transient
    assert "spec.template.spec.initContainers[0].restartPolicy" in failure.message and "v1.27.3" in failure.message


@pytest.mark.parametrize(
    "detail, reason, quoted",
    [
        (
            ".spec.template.spec.initContainers[0].restartPolicy: field not declared in schema",
            PropagationReason.FIELD_NOT_SUPPORTED,
            "spec.template.spec.initContainers[0].restartPolicy",
        ),
        # kube-apiserver's 500 for an apply it cannot type (kubernetes#122480): retried as an
        # unreachable cluster, it was retried for ever (a reviewer's finding)
        (
            ".spec.replicas: expected numeric (int or float), got string",
            PropagationReason.CREATION_FAILED,
            "expected numeric",
        ),
    ],
)
def test_an_apply_kube_apiserver_cannot_type_fails_for_good_not_a_retry(detail, reason, quoted):
    from clusters.models import Cluster

    message = f"failed to create typed patch object (shop/web; apps/v1, Kind=Deployment): {detail}"
    failure = network.classify_failure(
        kube.KubeTransientError(message, kind=kube.KIND_SERVER_ERROR, status=500),
        existed=False,
        cluster=Cluster(name="old", server_version="v1.27.3"),
    )
    assert failure.reason == reason and not failure.transient
    assert quoted in failure.message


def test_a_write_into_a_namespace_being_deleted_is_retried():
    """A Terminating namespace forbids new content until it is gone (NamespaceLifecycle, 403): a
    permanent failure left the object missing once the namespace was made again."""
    from clusters.models import Cluster

    message = (
        'configmaps "cfg" is forbidden: unable to create new content in namespace shop because it is being terminated'
    )
    failure = network.classify_failure(
        kube.KubePermanentError(message, kind=kube.KIND_FORBIDDEN, status=403),
        existed=False,
        cluster=Cluster(name="c"),
    )
    assert failure.transient and failure.reason == PropagationReason.CREATION_FAILED
    assert "retrying once the namespace is gone" in failure.message


def test_other_errors_are_creation_or_update_failed_and_transient_ones_retry():
    from clusters.models import Cluster

    cluster = Cluster(name="c")
    invalid = kube.KubePermanentError("422 Invalid: spec.replicas must be >= 0", kind=kube.KIND_INVALID, status=422)
    assert network.classify_failure(invalid, existed=False, cluster=cluster).reason == PropagationReason.CREATION_FAILED
    assert network.classify_failure(invalid, existed=True, cluster=cluster).reason == PropagationReason.UPDATE_FAILED
    down = network.classify_failure(
        kube.KubeTransientError("refused", kind=kube.KIND_REFUSED), existed=True, cluster=cluster
    )
    assert down.transient and down.reason == PropagationReason.CLUSTER_NOT_READY


def test_secret_values_are_masked_in_preview_and_drift(fleet, fleet_clusters):
    resource = services.create_resource(
        services.find_type("Secret"),
        namespace="shop",
        name="db",
        template={"data": {"password": "czNjcjN0"}},
        placement={"clusters": ["m128"]},
    )
    (preview,) = propagation.preview_revision(resource)
    assert "czNjcjN0" not in preview.rendered_yaml + preview.diff and "<secret hmac:" in preview.rendered_yaml
    drain(propagation.propagate_revision(resource))
    assert fleet.get_object("m128", "v1", "Secret", "shop", "db")["data"] == {"password": "czNjcjN0"}
    fleet.external_edit("m128", "v1", "Secret", "shop", "db", {"data": {"password": "aGFja2Vk"}})
    propagation.detect_drift(resource=resource)
    (change,) = pv(resource, "m128").drift
    assert change["path"] == "/data/password" and "aGFja2Vk" not in str(change) and "czNjcjN0" not in str(change)
    assert "aGFja2Vk" not in str(list(AuditEvent.objects.values_list("before", "after")))


def test_a_chunk_is_done_in_one_call_and_skips_a_target_another_worker_holds(fleet, fleet_clusters):
    from datetime import timedelta

    from django.utils import timezone

    from fedportal.audit import verify_chain

    resource = web_deployment(placement={"clusters": MEMBERS})
    run = propagation.propagate_revision(resource)
    held = fleet_clusters["m130"]
    PropagationTarget.objects.filter(run=run, cluster=held).update(
        state=TargetState.RUNNING, lease_until=timezone.now() + timedelta(minutes=5)
    )  # another worker's
    outcomes = propagation.propagate_targets(run.pk, [c.pk for c in fleet_clusters.values()])
    assert outcomes[held.pk].skipped
    assert {name for name, c in fleet_clusters.items() if outcomes[c.pk].state == TargetState.DONE} == {
        "m127",
        "m128",
        "m131",
    }
    assert all(outcomes[c.pk].changed for name, c in fleet_clusters.items() if name != "m130")
    assert live(fleet, "m130") is None, "the held target was left to its holder"
    run.refresh_from_db()
    assert run.finished_at is None
    applies = AuditEvent.objects.filter(action="federation.propagation.apply", object_id=str(resource.pk))
    assert sorted(applies.values_list("cluster", flat=True)) == ["m127", "m128", "m131"]
    assert verify_chain().ok, "events written in bulk still chain"
    # the holder's lease runs out: the next call takes the target over and finishes the run
    PropagationTarget.objects.filter(run=run, cluster=held).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert propagation.propagate_targets(run.pk, [held.pk])[held.pk].state == TargetState.DONE
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED


def failing_flush(monkeypatch, *, at_call: int):
    """``record_steps`` fails on its ``at_call``-th call of the chunk, as a locked database does."""
    real_record, calls = worker.record_steps, []

    def record(*args, **kwargs):
        calls.append(1)
        if len(calls) == at_call:
            raise OperationalError("database is locked")
        return real_record(*args, **kwargs)

    monkeypatch.setattr(worker, "record_steps", record)
    return lambda: monkeypatch.setattr(worker, "record_steps", real_record)


def target_rows(run) -> dict[str, tuple]:
    return {
        name: (state, attempts)
        for name, state, attempts in PropagationTarget.objects.filter(run=run).values_list(
            "cluster__name", "state", "attempts"
        )
    }


def test_a_chunk_that_fails_on_the_database_gives_its_targets_back_to_its_retry(fleet, fleet_clusters, monkeypatch):
    # the task retries a chunk on a database error: that retry found the targets still held by the
    # failed call (its lease: minutes), skipped them, and the run waited for the stale sweep
    resource = web_deployment(placement={"clusters": MEMBERS})
    run = propagation.propagate_revision(resource)
    ids = [c.pk for c in fleet_clusters.values()]
    restore = failing_flush(monkeypatch, at_call=1)
    with pytest.raises(OperationalError):
        propagation.propagate_targets(run.pk, ids)
    # given back, and the attempt with them: the database failed, not the cluster
    assert set(target_rows(run).values()) == {(TargetState.RETRYING, 0)}
    restore()
    outcomes = propagation.propagate_targets(run.pk, ids)  # what the task's retry does
    assert {outcome.state for outcome in outcomes.values()} == {TargetState.DONE}
    assert set(target_rows(run).values()) == {(TargetState.DONE, 1)}
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED


def test_a_chunk_failing_at_a_later_flush_keeps_what_it_recorded_and_holds_what_is_still_running(
    fleet, fleet_clusters, monkeypatch
):
    for slow in ("m130", "m131"):
        fleet.set_latency(slow, 2500)  # still applying when the first flush (after 1 s) fails
    resource = web_deployment(placement={"clusters": MEMBERS})
    run = propagation.propagate_revision(resource)
    ids = [c.pk for c in fleet_clusters.values()]
    failing_flush(monkeypatch, at_call=1)
    with pytest.raises(OperationalError):
        propagation.propagate_targets(run.pk, ids)
    rows = target_rows(run)
    assert rows["m127"] == rows["m128"] == (TargetState.RETRYING, 0), "finished, not recorded: given back"
    assert rows["m130"] == rows["m131"] == (TargetState.RUNNING, 1), "still applying: held, nobody applies it twice"
    wait_for(lambda: live(fleet, "m131") is not None, timeout=10, message="the slow applies finish")

    run = propagation.propagate_revision(resource)
    failing_flush(monkeypatch, at_call=2)  # a second run: the fast clusters' flush works, the slow ones' fails
    with pytest.raises(OperationalError):
        propagation.propagate_targets(run.pk, ids)
    rows = target_rows(run)
    assert rows["m127"][0] == rows["m128"][0] == TargetState.DONE, "what was recorded stays recorded"
    assert rows["m130"] == rows["m131"] == (TargetState.RETRYING, 0)


def test_retries_are_grouped_by_delay():
    outcomes = {
        3: propagation.TargetOutcome(retry_in=4.0),
        1: propagation.TargetOutcome(retry_in=2.0),
        2: propagation.TargetOutcome(retry_in=2.0),
        4: propagation.TargetOutcome(state=TargetState.DONE),
    }
    assert propagation.retries_by_delay(outcomes) == {2.0: [1, 2], 4.0: [3]}


def test_planning_reads_a_fixed_number_of_rows_whatever_was_propagated(
    fleet, fleet_clusters, django_assert_max_num_queries
):
    resource = web_deployment(placement={"clusters": MEMBERS})
    drain(propagation.propagate_revision(resource))
    resource.refresh_from_db()
    revision = resource.current_revision
    # names and labels, the PropagatedVersions, the clusters, the resource's type, its FederatedNamespace: none per row
    with django_assert_max_num_queries(5):
        plans = propagation.plan_targets(resource, revision)
    assert sorted(p.cluster.name for p in plans) == MEMBERS


def test_the_stale_sweep_closes_a_run_whose_worker_died_after_writing_its_last_targets(fleet, fleet_clusters):
    from datetime import timedelta

    from django.utils import timezone

    from federation.models import PropagationRun, PropagationTarget

    resource = web_deployment(placement={"clusters": ["m128"]})
    run = propagation.propagate_revision(resource)
    # the targets were written (DONE), then the worker died before it closed the run
    PropagationTarget.objects.filter(run=run).update(state=TargetState.DONE, finished_at=timezone.now())
    PropagationRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(minutes=5))
    assert propagation.resume_stale_targets(stale_seconds=60) == 0
    run.refresh_from_db()
    assert run.finished_at is not None and run.state == RunState.SUCCEEDED


def test_a_chunk_writes_its_propagated_versions_with_one_statement_not_one_per_cluster(fleet, fleet_clusters):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    # the simulator's finished roll-out writes a new resourceVersion rolloutSeconds after the apply;
    # hold it back, so the live object still carries the version the apply answered with
    for name in MEMBERS:
        fleet.set_rollout_seconds(name, 600)
    try:
        resource = web_deployment(placement={"clusters": MEMBERS})
        run = propagation.propagate_revision(resource)
        with CaptureQueriesContext(connection) as queries:
            outcomes = propagation.propagate_targets(run.pk, [c.pk for c in fleet_clusters.values()])
    finally:
        for name in MEMBERS:
            fleet.set_rollout_seconds(name, 1)
    assert {o.state for o in outcomes.values()} == {TargetState.DONE}
    writes = [
        q["sql"]
        for q in queries.captured_queries
        if 'UPDATE "federation_propagatedversion"' in q["sql"] and "applied_manifest" in q["sql"]
    ]
    assert 1 <= len(writes) < len(MEMBERS), writes  # one statement per flush of the chunk (fedportal.bulk.update_rows)
    resource.refresh_from_db()
    for name in MEMBERS:
        row, obj = pv(resource, name), live(fleet, name)
        assert (row.status, row.revision_id, row.sync_state) == (
            PropagationReason.OK,
            resource.current_revision_id,
            SyncState.IN_SYNC,
        )
        assert (row.live_uid, row.live_resource_version) == (obj["metadata"]["uid"], obj["metadata"]["resourceVersion"])
        assert row.version == f"gen:{obj['metadata']['generation']}" and row.propagated_at is not None
        assert (
            row.applied_manifest["spec"]["template"]["spec"]["containers"][0]["image"]
            == obj["spec"]["template"]["spec"]["containers"][0]["image"]
        )


def test_the_network_half_of_a_chunk_reads_nothing_its_claim_did_not_load(
    fleet, fleet_clusters, django_assert_num_queries
):
    # the claim loads a few of each cluster's fields; a field read but not loaded would cost a query
    # per cluster, from a pool thread that must not touch the database
    resource = web_deployment(placement={"clusters": MEMBERS})
    run = propagation.propagate_revision(resource)
    targets = worker.claim_targets(run.pk, [c.pk for c in fleet_clusters.values()])
    run = PropagationRun.objects.select_related("resource__type", "revision").get(pk=run.pk)
    pvs = record.pvs_for(run.resource, [t.cluster for t in targets])
    fleet.set_down(MEMBERS[0])  # a failure's message names the cluster
    try:
        with django_assert_num_queries(0):
            steps = [worker.network_step(run, t, pvs[t.cluster_id]) for t in targets]
    finally:
        fleet.set_up(MEMBERS[0])
    assert sorted(step.outcome for step in steps) == ["applied"] * 3 + ["failed"]
    assert MEMBERS[0] in next(step.failure.message for step in steps if step.failure)


def test_a_chunk_of_a_run_leaves_the_clusters_a_newer_run_of_its_resource_targets_to_that_run(fleet, fleet_clusters):
    resource = web_deployment(placement={"clusters": MEMBERS})
    older = propagation.propagate_revision(resource)
    newer = propagation.propagate_revision(resource)
    ids = [c.pk for c in fleet_clusters.values()]
    outcomes = propagation.propagate_targets(older.pk, ids)
    assert {o.message for o in outcomes.values()} == {"Superseded by a newer propagation run."}
    assert all(live(fleet, name) is None for name in MEMBERS), "the older run wrote nothing"
    outcomes = propagation.propagate_targets(newer.pk, ids)
    assert {(o.state, o.reason) for o in outcomes.values()} == {(TargetState.DONE, PropagationReason.OK)}
    assert all(live(fleet, name) for name in MEMBERS)


def test_starting_a_run_is_the_same_number_of_queries_for_two_clusters_or_four(fleet):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counts = []
    for name, members in (("two", MEMBERS[:2]), ("four", MEMBERS[2:])):
        register_fleet(fleet, members)  # two registered clusters, then four
        resource = web_deployment(name=name, placement={"clusters": MEMBERS[: len(counts) * 2 + 2]})
        with CaptureQueriesContext(connection) as queries:
            propagation.propagate_revision(resource)
        counts.append(len(queries.captured_queries))
    assert counts[0] == counts[1], counts  # nothing per cluster: no row read or written one at a time


def test_chunks_share_one_apply_pool_per_worker_process_sized_by_the_setting(settings):
    settings.FEDERATION_THREADS = 3
    pool = worker.network_pool()
    assert worker.network_pool() is pool and pool._max_workers == 3  # every chunk of the process
    settings.FEDERATION_THREADS = 5
    assert worker.network_pool()._max_workers == 5


@pytest.mark.parametrize(
    "clusters, sizes",
    [
        (0, []),
        (1, [1]),
        (120, [50, 50, 20]),  # up to 8 x FEDERATION_BATCH_SIZE: chunks of the setting
        (400, [50] * 8),
        (1000, [125] * 8),  # a large run: about 8 tasks
        (10_000, [150] * 66 + [100]),  # at most 3 x the setting per task
    ],
)
def test_a_run_is_cut_into_chunks_of_the_setting_or_into_about_eight_for_a_large_run(settings, clusters, sizes):
    settings.FEDERATION_BATCH_SIZE = 50
    ids = list(range(clusters, 0, -1))
    chunks = chunked(ids)
    assert [len(chunk) for chunk in chunks] == sizes
    assert [i for chunk in chunks for i in chunk] == sorted(ids)  # every cluster once, in id order


def test_the_chunks_follow_the_batch_size_setting(settings):
    settings.FEDERATION_BATCH_SIZE = 3
    assert [len(chunk) for chunk in chunked(range(10))] == [3, 3, 3, 1]
    assert [len(chunk) for chunk in chunked(range(100))] == [9] * 11 + [1]  # at most 3 x 3
