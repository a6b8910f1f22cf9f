"""Clusters that join later or are relabelled (issue 23, item 4), in-process against the fleet
simulator: the approved placement decides, per retention; the page lists the cluster as pending;
FEDPORTAL_JOIN_REQUIRES_CHANGE_REQUEST opens a change request instead. The worker path (register
through clusters.services, probe, reconcile, propagate) is in test_membership_integration.py."""

import pytest
from django.urls import reverse

from clusters import services as cluster_services
from clusters.choices import ClusterState
from federation import propagation, services
from federation.approvals.choices import ChangeKind, ChangeState
from federation.choices import PropagationReason, Retention, TargetAction
from federation.membership import (
    APPLY,
    membership_changes,
    reconcile_cluster_membership,
)
from federation.models import PropagatedVersion
from fedportal.models import AuditEvent
from tests.federation.factories import drain, ftype, register_fleet, web_deployment

pytestmark = pytest.mark.django_db
WEB = {"clusterSelector": {"matchLabels": {"tier": "web"}}}


def status(resource, cluster):
    return (
        PropagatedVersion.objects.filter(resource=resource, cluster__name=cluster)
        .values_list("status", flat=True)
        .first()
    )


@pytest.fixture
def labelled(fleet):
    """m128 labelled tier=web, m130 not; Namespace shop and Deployment web placed on tier=web, propagated."""
    clusters = register_fleet(fleet, ["m128", "m130"])
    clusters["m128"].labels = {"tier": "web"}
    clusters["m128"].save()
    ns = services.create_resource(ftype("Namespace"), namespace="", name="shop", template={}, placement=WEB)
    drain(propagation.propagate_revision(ns))
    return clusters


def relabel(cluster, labels):
    return cluster_services.update_cluster(cluster, labels=labels, verify=False)


def test_a_relabelled_cluster_gets_what_the_approved_placement_selects(fleet, labelled):
    web = web_deployment(placement=WEB)
    drain(propagation.propagate_revision(web))
    assert status(web, "m130") is None
    m130 = relabel(labelled["m130"], {"tier": "web"})
    assert [(c.resource.name, c.action) for c in membership_changes(m130)] == [("shop", APPLY), ("web", APPLY)]
    runs = reconcile_cluster_membership(m130, reason="labels changed")
    assert [list(r.targets.values_list("cluster__name", "action")) for r in runs] == [
        [("m130", TargetAction.APPLY)],
        [("m130", TargetAction.APPLY)],
    ]
    assert all(r.actor is None for r in runs)
    assert status(web, "m130") == PropagationReason.PENDING  # listed, pending until done
    for run in runs:
        drain(run)
    assert status(web, "m130") == PropagationReason.OK
    assert fleet.get_object("m130", "apps/v1", "Deployment", "shop", "web") is not None
    event = AuditEvent.objects.get(action="federation.resource.membership", object_repr=str(web))
    assert event.actor is None and event.after == {
        "run": runs[1].pk,
        "action": APPLY,
        "cluster": "m130",
        "reason": "labels changed",
    }
    assert membership_changes(m130) == []  # nothing left to do: reconciling twice is a no-op


def test_the_resource_page_lists_the_joining_cluster_as_pending(client, fleet, labelled, viewer):
    web = web_deployment(placement=WEB)
    drain(propagation.propagate_revision(web))
    reconcile_cluster_membership(relabel(labelled["m130"], {"tier": "web"}), reason="labels changed")
    client.force_login(viewer)
    page = client.get(reverse("federation:resource_detail", args=[web.pk])).content.decode()
    assert '<tr data-cluster="m130">' in page
    row = page[page.index('<tr data-cluster="m130">') :]
    assert 'data-status="Pending">Pending</span>' in row[: row.index("</tr>")]


@pytest.mark.parametrize(
    "retention, expected, remains",
    [
        (Retention.DELETE, PropagationReason.REMOVED, False),
        (Retention.ORPHAN, PropagationReason.ORPHANED, True),
    ],
)
def test_a_cluster_relabelled_out_of_the_placement_loses_it_per_retention(
    fleet, labelled, retention, expected, remains
):
    web = web_deployment(placement=WEB, retention=retention)
    drain(propagation.propagate_revision(web))
    assert status(web, "m128") == PropagationReason.OK
    m128 = relabel(labelled["m128"], {"tier": "batch"})
    runs = reconcile_cluster_membership(m128, reason="labels changed")
    web_run = next(r for r in runs if r.resource_id == web.pk)
    removal = TargetAction.ORPHAN if retention == Retention.ORPHAN else TargetAction.DELETE
    assert list(web_run.targets.values_list("cluster__name", "action")) == [("m128", removal)]
    drain(web_run)
    assert status(web, "m128") == expected
    assert (fleet.get_object("m128", "apps/v1", "Deployment", "shop", "web") is not None) is remains
    assert [c for c in membership_changes(m128) if c.resource.pk == web.pk] == []


def test_a_relabel_orphans_until_retention_delete_is_held_by_an_applied_request(fleet, labelled, operator):
    """An operator's switch from Orphan to Delete waits for approval: until then a cluster relabelled
    out of the placement keeps the object (a review's finding: retention acted live)."""
    web = web_deployment(placement=WEB, retention=Retention.ORPHAN)
    drain(propagation.propagate_revision(web))
    current = web.current_revision
    services.update_resource(
        web, template=current.template, placement=current.placement, actor=operator, retention=Retention.DELETE
    )
    web.refresh_from_db()
    assert (web.retention, web.approved_retention) == (Retention.DELETE, Retention.ORPHAN)
    # a change request's preview shows what applying it (which adopts Delete) does
    assert {p.cluster.name: p.action for p in propagation.plan_targets(web, current)}["m128"] == TargetAction.APPLY
    m128 = relabel(labelled["m128"], {"tier": "batch"})
    assert {p.cluster.name: p.action for p in propagation.plan_targets(web, current)}["m128"] == TargetAction.DELETE
    runs = reconcile_cluster_membership(m128, reason="labels changed")
    web_run = next(r for r in runs if r.resource_id == web.pk)
    assert list(web_run.targets.values_list("cluster__name", "action")) == [("m128", TargetAction.ORPHAN)]
    drain(web_run)
    assert status(web, "m128") == PropagationReason.ORPHANED
    assert fleet.get_object("m128", "apps/v1", "Deployment", "shop", "web") is not None


def test_a_cluster_not_ready_yet_is_waited_for(fleet, labelled):
    from federation.membership import reconcile_when_ready

    web = web_deployment(placement=WEB)
    drain(propagation.propagate_revision(web))
    m130 = relabel(labelled["m130"], {"tier": "web"})
    m130.__class__.objects.filter(pk=m130.pk).update(state=ClusterState.UNKNOWN)
    assert reconcile_when_ready(m130.pk, "joined") == "waiting"
    assert status(web, "m130") is None
    m130.__class__.objects.filter(pk=m130.pk).update(state=ClusterState.READY)
    assert reconcile_when_ready(m130.pk, "joined") == "2 started"
    assert reconcile_when_ready(10**6, "joined") == "gone"


def test_with_the_setting_a_change_request_is_opened_instead(client, fleet, labelled, settings, viewer):
    settings.FEDPORTAL_JOIN_REQUIRES_CHANGE_REQUEST = True
    web = web_deployment(placement=WEB)
    drain(propagation.propagate_revision(web))
    runs_before = web.runs.count()
    m130 = relabel(labelled["m130"], {"tier": "web"})
    opened = reconcile_cluster_membership(m130, reason="labels changed")
    assert [(cr.resource.name, cr.kind, cr.state, cr.author) for cr in opened] == [
        ("shop", ChangeKind.RECONCILE, ChangeState.DRAFT, None),
        ("web", ChangeKind.RECONCILE, ChangeState.DRAFT, None),
    ]
    cr = opened[1]
    assert cr.title == "Reconcile Deployment shop/web: m130 labels changed"
    web.refresh_from_db()
    assert cr.proposed_revision_id == web.propagated_revision_id
    assert cr.target_clusters == ["m128", "m130"]
    # its per-cluster diff was read (after the resource's row was let go): m130 would get the object
    assert cr.diffs_at is not None and {d["cluster"] for d in cr.diffs} >= {"m130"}
    assert web.runs.count() == runs_before and status(web, "m130") is None  # nothing propagated yet
    assert AuditEvent.objects.filter(action="approvals.change.create", object_id=str(cr.pk)).exists()
    assert reconcile_cluster_membership(m130, reason="labels changed") == []  # one open request per resource
    client.force_login(viewer)
    page = client.get(cr.get_absolute_url())
    assert page.status_code == 200 and "Reconcile Deployment shop/web: m130 labels changed" in page.content.decode()


def test_with_the_setting_an_operator_cannot_resync_a_cluster_ahead_of_its_reconcile_request(
    client, fleet, labelled, settings, operator
):
    settings.FEDPORTAL_JOIN_REQUIRES_CHANGE_REQUEST = True
    web = web_deployment(placement=WEB)
    drain(propagation.propagate_revision(web))
    m130 = relabel(labelled["m130"], {"tier": "web"})
    assert reconcile_cluster_membership(m130, reason="labels changed")  # the request waits for approval
    client.force_login(operator)
    response = client.post(reverse("federation:resource_resync", args=[web.pk, m130.pk]), follow=True)
    assert "No approved change has sent Deployment shop/web to m130" in response.content.decode()
    assert not web.runs.filter(targets__cluster=m130).exists() and status(web, "m130") is None


def test_joining_and_relabelling_notify_the_listener_on_commit(db, django_capture_on_commit_callbacks, monkeypatch):
    from federation import enqueue

    sent = []
    monkeypatch.setattr(
        enqueue, "reconcile_membership", lambda cluster_id, reason, **kw: sent.append((cluster_id, reason))
    )
    from tests.clusters.factories import ClusterFactory

    cluster = ClusterFactory(name="late")
    with django_capture_on_commit_callbacks(execute=True):
        cluster_services.update_cluster(cluster, labels={"tier": "web"}, verify=False)
        cluster_services.update_cluster(cluster, role=cluster.role, verify=False)  # no label change: no call
    assert sent == [(cluster.pk, "labels changed")]


def test_an_import_or_a_bulk_relabel_queues_one_batch_not_one_message_per_cluster(
    db, admin_user, django_capture_on_commit_callbacks, monkeypatch
):
    from clusters.models import Cluster
    from clusters.services.bulk_labels import bulk_label_clusters
    from clusters.services.registry import save_new_clusters
    from federation import enqueue
    from tests.clusters.factories import ClusterFactory

    one, batches = [], []
    monkeypatch.setattr(enqueue, "reconcile_membership", lambda cluster_id, reason, **kw: one.append(cluster_id))
    monkeypatch.setattr(enqueue, "reconcile_memberships", lambda ids, reason: batches.append((sorted(ids), reason)))
    new = [Cluster(name=f"new-{n}", api_server=f"https://new-{n}.example.test:6443") for n in range(3)]
    with django_capture_on_commit_callbacks(execute=True):
        save_new_clusters(new, actor=admin_user)
    assert batches == [(sorted(c.pk for c in new), "joined")] and one == []
    assert AuditEvent.objects.filter(action="cluster.register").count() == 3

    batches.clear()
    ClusterFactory(name="old", labels={"tier": "web"})
    with django_capture_on_commit_callbacks(execute=True):
        bulk_label_clusters(Cluster.objects.all(), add={"tier": "web"}, actor=admin_user)
    assert batches == [(sorted(c.pk for c in new), "labels changed")]  # "old" had the label already
    assert one == []


def test_the_reconcile_memberships_task_queues_one_reconcile_per_cluster(monkeypatch):
    from federation import enqueue
    from federation.tasks import reconcile_memberships_task

    sent = []
    monkeypatch.setattr(
        enqueue, "reconcile_membership", lambda cluster_id, reason, **kw: sent.append((cluster_id, reason))
    )
    assert reconcile_memberships_task.run([4, 7], "joined") == 2
    assert sent == [(4, "joined"), (7, "joined")]


def test_the_reconcile_change_request_once_approved_propagates_to_the_cluster(
    fleet, labelled, settings, operator, approver
):
    from federation.approvals import services as approvals

    settings.FEDPORTAL_JOIN_REQUIRES_CHANGE_REQUEST = True
    web = web_deployment(placement=WEB)
    drain(propagation.propagate_revision(web))
    m130 = relabel(labelled["m130"], {"tier": "web"})
    cr = next(cr for cr in reconcile_cluster_membership(m130, reason="labels changed") if cr.resource_id == web.pk)
    approvals.submit(cr, actor=operator)
    cr = approvals.approve(cr, actor=approver)
    if cr.state == ChangeState.APPROVED:  # FEDPORTAL_APPROVALS_AUTO_APPLY off
        cr = approvals.apply_change_request(cr, actor=operator)
    assert cr.state == ChangeState.APPLYING
    (run,) = cr.runs.all()
    drain(run)
    assert status(web, "m130") == PropagationReason.OK and status(web, "m128") == PropagationReason.OK
    assert fleet.get_object("m130", "apps/v1", "Deployment", "shop", "web") is not None
