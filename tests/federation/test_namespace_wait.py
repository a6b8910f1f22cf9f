"""A namespace missing on a target (issue 23, item 3): flagged by the preview and the preflight
before anyone approves; the targets that waited for it are retried once it is propagated; and the
resource page re-syncs every failed cluster at once (operator, audited)."""

import pytest
from django.urls import reverse

from clusters.models import Cluster
from federation import propagation, schedule, services
from federation.approvals import services as approvals
from federation.approvals.choices import RolloutState
from federation.approvals.models import Rollout
from federation.choices import PropagationReason, RunState, RunTrigger, TargetAction, TargetState
from federation.models import FederatedResource, PropagatedVersion, PropagationRun, PropagationTarget
from federation.propagation.namespaces import missing_message
from fedportal.models import AuditEvent
from tests.approvals.factories import staged
from tests.federation.factories import (
    drain,
    federate_namespace,
    ftype,
    register_fleet,
    web_deployment,
)

pytestmark = pytest.mark.django_db


def status(resource, cluster):
    return PropagatedVersion.objects.get(resource=resource, cluster__name=cluster).status


def test_a_cluster_without_the_namespace_is_not_placed_and_the_plan_says_why(fleet):
    """KubeFed's rule (issue 17) decides first: a namespaced resource is placed only where its
    FederatedNamespace is, so before anyone approves, the preview has no target on m128 and the plan
    names the missing namespace for it, instead of a NamespaceNotFederated failure after approval."""
    register_fleet(fleet, ["m128", "m130"])
    federate_namespace("half", ["m130"])  # federated to m130 only
    resource = web_deployment(namespace="half", placement={"clusters": ["m128", "m130"]})
    previews = {p.cluster.name: p for p in propagation.preview_revision(resource)}
    assert sorted(previews) == ["m130"]
    assert previews["m130"].action == "create" and previews["m130"].message == "Will be created."
    assert missing_message("half", "m130") not in previews["m130"].warnings
    decision = schedule.decide_for(resource)
    assert decision.targets == ["m130"]
    assert decision.excluded == {"m128": "Namespace half is not placed on m128"}


def test_preview_does_not_flag_a_namespace_that_exists_on_the_cluster(fleet):
    register_fleet(fleet, ["m128"])
    federate_namespace("default", ["m128"])  # placed where its namespace is (KubeFed); default exists there
    resource = web_deployment(namespace="default", placement={"clusters": ["m128"]})
    (preview,) = propagation.preview_revision(resource)
    assert preview.message == "Will be created."
    assert not any("NamespaceNotFederated" in w for w in preview.warnings)


def test_a_change_request_targets_only_clusters_with_the_namespace(fleet, operator):
    register_fleet(fleet, ["m128", "m130", "m131"])
    federate_namespace("half", ["m130"])
    resource = web_deployment(namespace="half", placement={"clusters": ["m128", "m130", "m131"]}, actor=operator)
    cr = approvals.create_change_request(resource, actor=operator)
    assert cr.target_clusters == ["m130"]
    assert [p for p in cr.preflight if "NamespaceNotFederated" in p["message"]] == []


def test_preflight_is_quiet_when_the_namespace_exists(fleet, operator):
    register_fleet(fleet, ["m128"])
    federate_namespace("default", ["m128"])
    resource = web_deployment(namespace="default", placement={"clusters": ["m128"]}, actor=operator)
    cr = approvals.create_change_request(resource, actor=operator)
    assert [p for p in cr.preflight if "NamespaceNotFederated" in p["message"]] == []


def waiting_for_namespace(resource, clusters):
    """Targets left waiting for their namespace (NamespaceNotFederated): what a resource keeps on a
    cluster from before the KubeFed placement rule (or a namespace unfederated under it)."""
    run = PropagationRun.objects.create(resource=resource, revision=resource.current_revision)
    for name in clusters:
        cluster = Cluster.objects.get(name=name)
        PropagatedVersion.objects.update_or_create(
            resource=resource, cluster=cluster, defaults={"status": PropagationReason.NAMESPACE_NOT_FEDERATED}
        )
        PropagationTarget.objects.create(
            run=run,
            cluster=cluster,
            action=TargetAction.APPLY,
            state=TargetState.FAILED,
            reason=PropagationReason.NAMESPACE_NOT_FEDERATED,
        )
    FederatedResource.objects.filter(pk=resource.pk).update(propagated_revision=resource.current_revision)
    resource.refresh_from_db()
    return run


def test_targets_waiting_for_the_namespace_are_retried_once_it_is_propagated(fleet):
    register_fleet(fleet, ["m128", "m130"])
    resource = web_deployment(namespace="late", placement={"clusters": ["m128", "m130"]})
    first = waiting_for_namespace(resource, ["m128", "m130"])
    assert {status(resource, c) for c in ("m128", "m130")} == {PropagationReason.NAMESPACE_NOT_FEDERATED}
    ns = federate_namespace("late", ["m128"])
    drain(propagation.propagate_revision(ns))  # the worker's Namespace run queues the retry itself
    retry = PropagationRun.objects.filter(resource=resource).exclude(pk=first.pk).get()
    assert retry.trigger == RunTrigger.RESYNC and retry.actor is None  # the system
    assert list(retry.targets.values_list("cluster__name", "action")) == [("m128", TargetAction.APPLY)]
    drain(retry)
    retry.refresh_from_db()
    assert retry.state == RunState.SUCCEEDED
    assert status(resource, "m128") == PropagationReason.OK
    assert fleet.get_object("m128", "apps/v1", "Deployment", "late", "web") is not None
    assert status(resource, "m130") == PropagationReason.NAMESPACE_NOT_FEDERATED  # still not federated there


def test_the_periodic_sweep_retries_targets_whose_namespace_is_ok_now(fleet):
    register_fleet(fleet, ["m128"])
    web = web_deployment(namespace="late", placement={"clusters": ["m128"]})
    api = web_deployment(namespace="late", name="api", placement={"clusters": ["m128"]})
    for resource in (web, api):
        waiting_for_namespace(resource, ["m128"])
        assert status(resource, "m128") == PropagationReason.NAMESPACE_NOT_FEDERATED
    federate_namespace("late", ["m128"])  # defined, not propagated on its own: web's re-sync creates it
    drain(propagation.resync_cluster(web, web.propagated_versions.get().cluster))
    assert status(web, "m128") == PropagationReason.OK
    assert status(api, "m128") == PropagationReason.NAMESPACE_NOT_FEDERATED
    assert propagation.reconcile_waiting_clusters() == 1
    (retry,) = api.runs.filter(trigger=RunTrigger.RESYNC)
    drain(retry)
    assert status(api, "m128") == PropagationReason.OK


@pytest.fixture
def half_failed(fleet):
    """web in namespace half on m128 (namespace missing: failed) and m130 (OK)."""
    register_fleet(fleet, ["m128", "m130"])
    ns = federate_namespace("half", ["m130"])
    drain(propagation.propagate_revision(ns))
    resource = web_deployment(namespace="half", placement={"clusters": ["m128", "m130"]})
    drain(propagation.propagate_revision(resource))  # placed on m130 only (KubeFed's namespace rule)
    waiting_for_namespace(resource, ["m128"])
    assert status(resource, "m130") == PropagationReason.OK
    return resource


def test_resync_all_failed_button_is_shown_to_operators_only(client, half_failed, operator, viewer):
    url = reverse("federation:resource_detail", args=[half_failed.pk])
    client.force_login(operator)
    assert "Re-sync all failed (1)" in client.get(url).content.decode()
    client.force_login(viewer)
    assert "Re-sync all failed" not in client.get(url).content.decode()


def test_resync_all_failed_re_syncs_only_the_failed_clusters_and_is_audited(client, half_failed, operator):
    client.force_login(operator)
    before = set(half_failed.runs.values_list("pk", flat=True))
    response = client.post(reverse("federation:resource_resync_failed", args=[half_failed.pk]))
    assert response.status_code == 302 and response["Location"] == half_failed.get_absolute_url()
    run = half_failed.runs.exclude(pk__in=before).get()
    assert run.trigger == RunTrigger.RESYNC and run.actor == operator
    assert list(run.targets.values_list("cluster__name", flat=True)) == ["m128"]
    event = AuditEvent.objects.get(action="federation.resource.resync_failed")
    assert event.actor == operator and event.after == {"run": run.pk, "clusters": ["m128"]}


def test_resync_all_failed_from_htmx_redirects_the_client(client, half_failed, operator):
    client.force_login(operator)
    response = client.post(reverse("federation:resource_resync_failed", args=[half_failed.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Redirect"] == half_failed.get_absolute_url()


def test_a_viewer_cannot_resync_all_failed(client, half_failed, viewer):
    client.force_login(viewer)
    before = half_failed.runs.count()
    response = client.post(reverse("federation:resource_resync_failed", args=[half_failed.pk]))
    assert response.status_code == 403
    assert half_failed.runs.count() == before
    assert not AuditEvent.objects.filter(action="federation.resource.resync_failed").exists()


def test_resync_all_failed_with_nothing_failed_starts_nothing(client, fleet, operator):
    register_fleet(fleet, ["m130"])
    drain(propagation.propagate_revision(federate_namespace("half", ["m130"])))
    resource = web_deployment(namespace="half", placement={"clusters": ["m130"]})
    drain(propagation.propagate_revision(resource))
    client.force_login(operator)
    response = client.post(reverse("federation:resource_resync_failed", args=[resource.pk]), follow=True)
    assert "Nothing failed" in response.content.decode()
    assert resource.runs.count() == 1


# --- what nobody approved does not move a workload -----------------------------------------------------


def test_an_unapproved_edit_of_a_propagated_namespace_does_not_move_its_workloads(fleet, operator):
    """The namespace's placement is its approved revision's: an operator's edit alone, then a re-sync
    of a cluster the edit left out, removed the workload there without any change request."""
    register_fleet(fleet, ["m128", "m130"])
    ns = federate_namespace("shop", ["m128", "m130"])
    drain(propagation.propagate_revision(ns))
    resource = web_deployment(placement={"clusters": ["m128", "m130"]})
    drain(propagation.propagate_revision(resource))
    m130 = Cluster.objects.get(name="m130")
    services.update_resource(ns, template={}, placement={"clusters": ["m128"]}, actor=operator)  # not approved
    assert schedule.decide_for(resource).targets == ["m128", "m130"]
    run = propagation.resync_cluster(resource, m130, actor=operator)
    drain(run)
    assert list(run.targets.values_list("action", flat=True)) == [TargetAction.APPLY]
    assert fleet.get_object("m130", "apps/v1", "Deployment", "shop", "web") is not None


def test_a_re_sync_never_removes_an_object_fedportal_applied(fleet, operator):
    register_fleet(fleet, ["m128", "m130"])
    ns = federate_namespace("fresh", ["m128", "m130"])  # never propagated on its own: its revision decides
    resource = web_deployment(namespace="fresh", placement={"clusters": ["m128", "m130"]})
    drain(propagation.propagate_revision(resource))
    assert status(resource, "m130") == PropagationReason.OK
    services.update_resource(ns, template={}, placement={"clusters": ["m128"]}, actor=operator)
    runs = resource.runs.count()
    with pytest.raises(propagation.PropagationError, match="no longer placed on m130"):
        propagation.resync_cluster(resource, Cluster.objects.get(name="m130"), actor=operator)
    PropagatedVersion.objects.filter(resource=resource, cluster__name="m130").update(
        status=PropagationReason.UPDATE_FAILED
    )
    with pytest.raises(propagation.PropagationError):  # nothing left to re-sync there
        propagation.resync_failed(resource, actor=operator)
    assert resource.runs.count() == runs, "a re-sync planned a removal"
    assert fleet.get_object("m130", "apps/v1", "Deployment", "fresh", "web") is not None


def test_a_namespace_nobody_approved_is_not_created_with_content(fleet):
    """A FederatedNamespace never propagated is created with the first workload in it only while it is
    the bare namespace: a label nobody approved (a Pod Security level) does not ride along."""
    register_fleet(fleet, ["m128"])
    services.create_resource(
        ftype("Namespace"),
        namespace="",
        name="loose",
        template={"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}},
        placement={"clusters": ["m128"]},
    )
    resource = web_deployment(namespace="loose", placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    pv = PropagatedVersion.objects.get(resource=resource, cluster__name="m128")
    assert pv.status == PropagationReason.NAMESPACE_NOT_FEDERATED
    assert "no change request approved" in pv.message
    assert fleet.get_object("m128", "v1", "Namespace", None, "loose") is None


def test_a_namespace_retry_repeats_what_was_approved_for_the_cluster(fleet, operator):
    """Not the propagated revision: a staged rollout's first wave has it, a later wave waiting for its
    approval must not get it through a retry."""
    from federation.propagation.sweep import retry_namespace_waiters

    register_fleet(fleet, ["m128", "m130"])
    drain(propagation.propagate_revision(federate_namespace("shop", ["m128", "m130"])))
    resource = web_deployment(placement={"clusters": ["m128", "m130"]})
    drain(propagation.propagate_revision(resource))
    first = resource.current_revision
    template = {**resource.current_revision.template, "metadata": {"labels": {"wave": "two"}}}
    services.update_resource(resource, template=template, placement={"clusters": ["m128", "m130"]}, actor=operator)
    resource.refresh_from_db()
    m128, m130 = Cluster.objects.get(name="m128"), Cluster.objects.get(name="m130")
    drain(propagation.propagate_revision(resource, only_clusters={m128.pk}))  # the first wave only
    PropagatedVersion.objects.filter(resource=resource, cluster=m130).update(
        status=PropagationReason.NAMESPACE_NOT_FEDERATED
    )
    (run,) = retry_namespace_waiters("shop", [m130.pk])
    assert run.revision_id == first.pk and list(run.targets.values_list("cluster__name", flat=True)) == ["m130"]


def test_widening_a_namespaces_placement_brings_its_resources_to_the_new_clusters(fleet, monkeypatch):
    """A resource placed on every cluster, in a namespace placed on one: it is on that one only
    (KubeFed's ComputeNamespacedPlacement). The namespace's placement widened and propagated: the
    resource stayed where it was, said Propagated, and no request could send it ("already what the
    clusters have"; a reviewer's finding). The Namespace's run now asks for the resources in it to be
    planned again for the clusters it brought the namespace to, and only those, as a join does
    (KubeFed's sync controller re-reconciles them)."""
    from federation import enqueue, membership

    register_fleet(fleet, ["m128", "m130", "m131"])
    ns = federate_namespace("wide", ["m128"])
    drain(propagation.propagate_revision(ns))
    resource = web_deployment(namespace="wide", placement={"clusterSelector": {}})
    drain(propagation.propagate_revision(resource))
    assert list(resource.propagated_versions.values_list("cluster__name", flat=True)) == ["m128"]
    queued = []
    monkeypatch.setattr(enqueue, "reconcile_namespace_members", lambda name, ids: queued.append((name, ids)))
    services.update_resource(ns, template={}, placement={"clusters": ["m128", "m130", "m131"]})
    ns.refresh_from_db()
    drain(propagation.propagate_revision(ns))
    m130, m131 = (Cluster.objects.get(name=name).pk for name in ("m130", "m131"))
    # the clusters the run created it on; m128 had it already
    assert sorted(ids for _, chunk in queued for ids in chunk) == [m130, m131] and {n for n, _ in queued} == {"wide"}
    queued.clear()
    drain(propagation.resync_cluster(ns, Cluster.objects.get(name="m130")))
    assert queued == [], "a re-sync of a namespace that is there asks nothing"
    # only the clusters the namespace reached are planned (a wave of the namespace's own rollout
    # reaching m130 must not send the resource to m131 ahead of that rollout's later waves)
    (run,) = membership.reconcile_namespace_members("wide", [m130])
    assert run.trigger == RunTrigger.RESYNC and run.actor is None
    assert list(run.targets.values_list("cluster__name", flat=True)) == ["m130"]
    drain(run)
    assert status(resource, "m130") == PropagationReason.OK
    assert fleet.get_object("m130", "apps/v1", "Deployment", "wide", "web") is not None
    assert not PropagatedVersion.objects.filter(resource=resource, cluster_id=m131).exists()
    event = AuditEvent.objects.filter(action="federation.resource.membership").latest("id")
    assert "m130 got namespace wide" in event.summary
    assert membership.reconcile_namespace_members("wide", [m130]) == []  # it holds it now: nothing to do


def test_a_namespace_reaching_clusters_sends_nothing_of_an_aborted_rollout(fleet, operator):
    """The resource's newest rollout was aborted after its canary: its propagated revision stopped
    there, and a cluster the namespace reaches now gets nothing until the next change (a reviewer
    sent an aborted rollout's revision to the prod clusters this way)."""
    from federation import membership
    from federation.approvals.choices import RolloutState
    from tests.approvals.factories import staged

    register_fleet(fleet, ["m128", "m130"])
    drain(propagation.propagate_revision(federate_namespace("held", ["m128", "m130"])))
    resource = web_deployment(namespace="held", placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    services.update_resource(resource, template=resource.current_revision.template, placement={"clusterSelector": {}})
    aborted = staged(resource, operator, state=RolloutState.ABORTED)
    aborted.runs.add(PropagationRun.objects.filter(resource=resource).latest("pk"))  # what its canary sent
    FederatedResource.objects.filter(pk=resource.pk).update(propagated_revision=resource.revisions.get(number=2))
    m130 = Cluster.objects.get(name="m130").pk
    assert membership.reconcile_namespace_members("held", [m130]) == []
    assert not PropagatedVersion.objects.filter(resource=resource, cluster_id=m130).exists()


def namespace_mid_rollout(fleet, operator, name: str):
    """Namespace ``name`` on m128, widened to m130 and m131 by a change whose staged rollout is
    unfinished and has sent it nowhere yet. Returns (namespace, its change request, m130, m131)."""
    register_fleet(fleet, ["m128", "m130", "m131"])
    ns = federate_namespace(name, ["m128"])
    drain(propagation.propagate_revision(ns))
    services.update_resource(ns, template={}, placement={"clusters": ["m128", "m130", "m131"]})
    FederatedResource.objects.filter(pk=ns.pk).update(propagated_revision=ns.revisions.get(number=2))
    ns.refresh_from_db()
    cr = staged(ns, operator, state=RolloutState.PROGRESSING)
    return ns, cr, Cluster.objects.get(name="m130"), Cluster.objects.get(name="m131")


def test_a_resource_run_never_creates_its_namespace_ahead_of_the_namespaces_rollout(fleet, operator):
    """A run of a resource planned before the namespace's rollout started targets m131, where the
    rollout has not sent the namespace: its target waits (NamespaceNotFederated, naming the
    rollout) instead of creating the namespace there with the new revision; once a wave sends the
    namespace to m131, the waiting target is retried and the resource lands."""
    ns, cr, _, m131 = namespace_mid_rollout(fleet, operator, "ahead")
    rollout = Rollout.objects.get(change_request=cr)
    Rollout.objects.filter(pk=rollout.pk).update(state=RolloutState.COMPLETED)
    resource = web_deployment(namespace="ahead", placement={"clusterSelector": {}})
    run = propagation.propagate_revision(resource)  # planned while nothing held the namespace back
    FederatedResource.objects.filter(pk=resource.pk).update(propagated_revision=resource.current_revision)
    assert sorted(run.targets.values_list("cluster__name", flat=True)) == ["m128", "m130", "m131"]
    Rollout.objects.filter(pk=rollout.pk).update(state=RolloutState.PROGRESSING)  # the namespace's rollout starts
    drain(run)
    assert fleet.get_object("m131", "v1", "Namespace", None, "ahead") is None
    target = PropagationTarget.objects.get(run=run, cluster=m131)
    assert target.reason == PropagationReason.NAMESPACE_NOT_FEDERATED
    assert f"its newest staged rollout, CR-{cr.pk}, has not completed" in target.message
    assert fleet.get_object("m128", "apps/v1", "Deployment", "ahead", "web") is not None

    drain(propagation.propagate_revision(ns, revision=ns.propagated_revision, only_clusters=[m131.pk]))  # a wave
    assert fleet.get_object("m131", "v1", "Namespace", None, "ahead") is not None
    (retry,) = resource.runs.exclude(pk=run.pk)  # the wave's Namespace run queued it
    assert list(retry.targets.values_list("cluster__name", flat=True)) == ["m131"]
    drain(retry)
    assert status(resource, "m131") == PropagationReason.OK
    assert fleet.get_object("m131", "apps/v1", "Deployment", "ahead", "web") is not None


def test_content_approved_once_reaches_production_through_its_namespace_only_by_a_reconcile_request(
    fleet, operator, approver, monkeypatch
):
    """A resource in a namespace federated to a dev cluster only: its request targets that cluster and
    needs one approval. The namespace later reaches a production cluster: the resource's content, which
    one approver let out, is not sent there on its own; a reconcile request asks production's count
    (a reviewer's finding: the namespace's run spread it to production automatically)."""
    from federation import enqueue, membership
    from federation.approvals.choices import ChangeKind, ChangeState

    clusters = register_fleet(fleet, ["m128", "m130"])
    Cluster.objects.filter(name="m128").update(labels={"env": "dev"})
    Cluster.objects.filter(name="m130").update(labels={"env": "prod"})
    ns = federate_namespace("shop", ["m128"])
    drain(propagation.propagate_revision(ns))
    resource = web_deployment(namespace="shop", placement={"clusterSelector": {}}, actor=operator)
    cr = approvals.submit(approvals.create_change_request(resource, actor=operator), actor=operator)
    assert cr.target_clusters == ["m128"] and cr.required_approvals == 1
    cr = approvals.approve(cr, actor=approver)
    for run in cr.runs.all():
        drain(run)
    assert status(resource, "m128") == PropagationReason.OK
    queued = []
    monkeypatch.setattr(enqueue, "reconcile_namespace_members", lambda name, ids: queued.append((name, ids)))
    services.update_resource(ns, template={}, placement={"clusters": ["m128", "m130"]})
    ns.refresh_from_db()
    drain(propagation.propagate_revision(ns))
    assert queued == [("shop", [clusters["m130"].pk])]

    (opened,) = membership.reconcile_namespace_members("shop", [clusters["m130"].pk])

    assert opened.kind == ChangeKind.RECONCILE and opened.state == ChangeState.DRAFT
    opened = approvals.refresh_change_request(opened)
    assert "m130" in opened.target_clusters and opened.required_approvals == 2
    assert not PropagatedVersion.objects.filter(resource=resource, cluster__name="m130").exists()
    assert fleet.get_object("m130", "apps/v1", "Deployment", "shop", "web") is None
