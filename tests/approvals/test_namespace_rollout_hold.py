"""A FederatedNamespace's own staged rollout holds the resources in it back as well: until its newest
rollout completes, a namespaced resource is placed only where approved runs sent the namespace, and
its worker never creates the namespace on a cluster the waves have not reached (or never will,
after an abort). Before, the namespace's propagated (or, never propagated, current) revision
placed them, and the worker created the namespace with the first workload ahead of the waves.
Driven in this process against the fleet simulator, as tests/approvals/test_rollout_steps.py."""

import pytest

from federation import propagation, schedule
from federation import services as federation_services
from federation.approvals import rollout as rollouts
from federation.approvals import services
from federation.approvals.choices import RolloutState
from federation.approvals.models import Rollout
from federation.choices import PropagationReason
from federation.models import PropagatedVersion, PropagationTarget
from tests.federation.factories import drain, federate_namespace, register_fleet, web_deployment
from tests.fleet_fixtures import DEFAULT_FLEET

pytestmark = pytest.mark.django_db

MEMBERS = ["m127", "m128", "m130", "m131"]
# the second wave waits for an approval: the rollout stops between the waves
STRATEGY = {
    "autoRollback": False,
    "waves": [
        {"name": "first", "clusters": ["m130"], "maxParallel": 1},
        {"name": "second", "clusters": ["m131"], "maxParallel": 1, "requireApproval": True},
    ],
}


@pytest.fixture
def ready_fleet(fleet_factory, settings):
    settings.FEDPORTAL_ROLLOUT_POLL_SECONDS = 0.05
    fleet = fleet_factory(DEFAULT_FLEET, rollout_seconds=0)
    register_fleet(fleet, MEMBERS)
    return fleet


def approve_change(resource, operator, approvers) -> Rollout:
    cr = services.submit(services.create_change_request(resource, actor=operator), actor=operator)
    for approver in approvers:
        cr = services.approve(cr, actor=approver)
    return Rollout.objects.get(change_request=cr)


def namespace_on(fleet, cluster: str, name: str) -> bool:
    return fleet.get_object(cluster, "v1", "Namespace", None, name) is not None


def widened_to_the_first_wave(operator, approvers) -> Rollout:
    """Namespace wide on m128, widened to m130 and m131; its rollout sent it to m130 (the first
    wave) and waits for the second wave's approval."""
    ns = federate_namespace("wide", ["m128"], actor=operator)
    drain(propagation.propagate_revision(ns))
    federation_services.set_rollout_strategy(ns, STRATEGY, actor=operator)
    federation_services.update_resource(
        ns, template={}, placement={"clusters": ["m128", "m130", "m131"]}, actor=operator
    )
    rollout = approve_change(ns, operator, approvers)
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.WAITING_APPROVAL
    return rollout


def test_resources_follow_the_namespaces_waves_not_its_placement(ready_fleet, operator, approver, second_approver):
    rollout = widened_to_the_first_wave(operator, [approver, second_approver])
    assert namespace_on(ready_fleet, "m130", "wide") and not namespace_on(ready_fleet, "m131", "wide")
    web = web_deployment(namespace="wide", placement={"clusterSelector": {}}, actor=operator)
    decision = schedule.decide_for(web)
    assert decision.targets == ["m128", "m130"]
    assert decision.excluded["m131"] == (
        "Namespace wide is not on m131 yet: no approved run has sent it there "
        f"(its newest staged rollout, CR-{rollout.change_request_id}, has not completed)"
    )
    drain(propagation.propagate_revision(web))
    assert not namespace_on(ready_fleet, "m131", "wide"), "the workload did not take the namespace ahead of its wave"
    assert not PropagatedVersion.objects.filter(resource=web, cluster__name="m131").exists()

    # the second wave approved (as many approvals as its environment needs) and applied
    cr = rollout.change_request
    for approver_ in (approver, second_approver):
        if Rollout.objects.get(pk=rollout.pk).state == RolloutState.WAITING_APPROVAL:
            rollouts.approve_wave(cr, actor=approver_)
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.COMPLETED
    assert namespace_on(ready_fleet, "m131", "wide")
    assert schedule.decide_for(web).targets == ["m128", "m130", "m131"]


def test_after_an_abort_the_namespace_stays_where_the_waves_sent_it(ready_fleet, operator, approver, second_approver):
    rollout = widened_to_the_first_wave(operator, [approver, second_approver])
    rollouts.abort_rollout(rollout.change_request, actor=operator, reason="enough")
    web = web_deployment(namespace="wide", placement={"clusterSelector": {}}, actor=operator)
    assert schedule.decide_for(web).targets == ["m128", "m130"]
    drain(propagation.propagate_revision(web))
    assert not namespace_on(ready_fleet, "m131", "wide")


def test_a_namespace_created_by_a_staged_change_is_not_made_with_a_workload_before_its_waves(
    ready_fleet, operator, approver, second_approver
):
    """Never propagated, a bare namespace is created with the first workload placed in it; created
    by a staged change whose first wave waits for an approval, nothing has been sent yet, so no
    workload places it anywhere, and a workload's run planned before the change was applied waits
    instead of creating it."""
    ns = federate_namespace("fresh", ["m130", "m131"], actor=operator)
    federation_services.set_rollout_strategy(
        ns,
        {"autoRollback": False, "waves": [{"name": "gated", "clusters": ["m130", "m131"], "requireApproval": True}]},
        actor=operator,
    )
    web = web_deployment(namespace="fresh", placement={"clusterSelector": {}}, actor=operator)
    early = propagation.propagate_revision(web)  # planned before the namespace's change was applied
    assert sorted(early.targets.values_list("cluster__name", flat=True)) == ["m130", "m131"]
    rollout = approve_change(ns, operator, [approver, second_approver])
    rollouts.advance_rollout(rollout.pk)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.WAITING_APPROVAL
    assert schedule.decide_for(web).targets == []
    drain(early)
    for cluster in ("m130", "m131"):
        assert not namespace_on(ready_fleet, cluster, "fresh")
        target = PropagationTarget.objects.get(run=early, cluster__name=cluster)
        assert target.reason == PropagationReason.NAMESPACE_NOT_FEDERATED
        assert f"CR-{rollout.change_request_id}, has not completed" in target.message


def test_a_rolled_back_rollout_does_not_uncover_an_aborted_ones_revision(
    ready_fleet, operator, approver, second_approver
):
    """The widening's rollout was aborted after its first wave; a later change's rollout was rolled
    back, giving each cluster what it had: the propagated revision is then the aborted widening's
    (the highest one given back), whose placement names m131, where no approved run sent the
    namespace (a reviewer's finding: only an unfinished or aborted newest rollout held it back)."""
    from federation.models import PropagationRun

    first = widened_to_the_first_wave(operator, [approver, second_approver])
    ns = first.change_request.resource
    rollouts.abort_rollout(first.change_request, actor=operator, reason="enough")
    federation_services.update_resource(
        ns,
        template={"metadata": {"labels": {"team": "web"}}},
        placement={"clusters": ["m128", "m130", "m131"]},
        actor=operator,
    )
    second = approve_change(ns, operator, [approver, second_approver])
    rollouts.advance_rollout(second.pk)
    rollouts.rollback_rollout(second.change_request, actor=operator, reason="undo")
    for run in PropagationRun.objects.filter(resource=ns, finished_at__isnull=True):
        drain(run)
    ns.refresh_from_db()
    assert "m131" in schedule.select_clusters(ns.propagated_revision.placement, [schedule.ClusterRef("m131", {})])
    web = web_deployment(namespace="wide", placement={"clusterSelector": {}}, actor=operator)
    assert schedule.decide_for(web).targets == ["m128", "m130"]
    drain(propagation.propagate_revision(web))
    assert not namespace_on(ready_fleet, "m131", "wide")


def test_the_hold_takes_no_resource_away_from_a_cluster_it_is_on(ready_fleet, operator, approver, second_approver):
    """A namespace that was on the clusters before it was federated has no record of FedPortal's
    there (the worker found it and wrote nothing): holding the resources in it to where the
    namespace's runs went placed them nowhere, and their next run planned them for removal from
    every cluster (a reviewer's finding). The hold adds no cluster; it takes none away."""
    from clusters import kube
    from clusters.models import Cluster
    from clusters.services import connection_for

    for name in ("m128", "m130"):
        manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "legacy"}}
        kube.apply_object(
            connection_for(Cluster.objects.get(name=name)), manifest, plural="namespaces", namespaced=False
        )
    ns = federate_namespace("legacy", ["m128", "m130"], actor=operator)
    web = web_deployment(namespace="legacy", placement={"clusterSelector": {}}, actor=operator)
    drain(propagation.propagate_revision(web))
    assert not PropagatedVersion.objects.filter(resource=ns).exists(), "the namespace was there: nothing written"
    federation_services.set_rollout_strategy(
        ns,
        {"autoRollback": False, "waves": [{"name": "gated", "clusters": ["m128"], "requireApproval": True}]},
        actor=operator,
    )
    federation_services.update_resource(
        ns, template={"metadata": {"labels": {"team": "a"}}}, placement={"clusters": ["m128", "m130"]}, actor=operator
    )
    rollout = approve_change(ns, operator, [approver, second_approver])
    rollouts.advance_rollout(rollout.pk)
    assert Rollout.objects.get(pk=rollout.pk).state == RolloutState.WAITING_APPROVAL
    assert schedule.decide_for(web).targets == ["m128", "m130"]
    run = propagation.propagate_revision(web)
    assert set(run.targets.values_list("action", flat=True)) == {"apply"}
    drain(run)
    for cluster in ("m128", "m130"):
        assert ready_fleet.get_object(cluster, "apps/v1", "Deployment", "legacy", "web") is not None


def test_a_later_change_to_the_whole_placement_ends_an_aborted_rollouts_hold(
    ready_fleet, operator, approver, second_approver
):
    """After the abort, a change of the namespace went to its whole placement at once (no strategy):
    its placement says again where the namespace is. The aborted rollout stayed the newest all the
    same, and held the resources in it back for good: a cluster relabelled into the namespace's
    placement later never got them, "not on m127 yet ... CR-<the aborted one> has not completed"."""
    from clusters.models import Cluster

    first = widened_to_the_first_wave(operator, [approver, second_approver])
    ns = first.change_request.resource
    rollouts.abort_rollout(first.change_request, actor=operator, reason="enough")
    for cluster in Cluster.objects.filter(name__in=["m128", "m130", "m131"]):
        cluster.labels = {**cluster.labels, "tier": "web"}
        cluster.save()
    federation_services.update_resource(
        ns,
        template={"metadata": {"labels": {"team": "web"}}},
        placement={"clusterSelector": {"matchLabels": {"tier": "web"}}},
        actor=operator,
    )
    ns.refresh_from_db()
    later = services.create_change_request(ns, actor=operator, rollout_strategy={})
    later = services.submit(later, actor=operator)
    for approver_ in (approver, second_approver):
        later = services.approve(later, actor=approver_)
    assert not Rollout.objects.filter(change_request=later).exists()
    for run in later.runs.all():
        drain(run)
    assert all(namespace_on(ready_fleet, name, "wide") for name in ("m128", "m130", "m131"))
    assert rollouts.rollout_holding_back(ns.pk) is None

    web = web_deployment(namespace="wide", placement={"clusterSelector": {}}, actor=operator)
    m127 = Cluster.objects.get(name="m127")
    m127.labels = {**m127.labels, "tier": "web"}
    m127.save()
    assert schedule.decide_for(web).targets == ["m127", "m128", "m130", "m131"]
    drain(propagation.propagate_revision(web))
    assert namespace_on(ready_fleet, "m127", "wide")
    assert ready_fleet.get_object("m127", "apps/v1", "Deployment", "wide", "web") is not None


def test_a_later_change_to_the_whole_placement_ends_an_aborted_rollouts_wait_for_joiners(
    ready_fleet, operator, approver, second_approver
):
    """A resource whose rollout was aborted gets nothing on a cluster its namespace newly reaches
    "until the next change"; once that change went to its whole placement, the namespace reaching a
    cluster brings the resource too (before, the aborted rollout, still the newest, refused it for good)."""
    from clusters.models import Cluster
    from federation.membership import reconcile_resource_membership
    from tests.federation.factories import WEB_TEMPLATE

    everywhere = {"clusterSelector": {}}

    def labelled(version: str) -> dict:
        return {**WEB_TEMPLATE, "metadata": {"labels": {"app": "web", "v": version}}}

    ns = federate_namespace("shop2", ["m128", "m130", "m131"], actor=operator)
    drain(propagation.propagate_revision(ns))
    web = web_deployment(namespace="shop2", placement=everywhere, actor=operator)
    drain(propagation.propagate_revision(web))
    federation_services.set_rollout_strategy(
        web,
        {
            "autoRollback": False,
            "waves": [
                {"name": "canary", "clusters": ["m128"]},
                {"name": "others", "clusters": ["m130", "m131"], "requireApproval": True},
            ],
        },
        actor=operator,
    )
    web.refresh_from_db()
    federation_services.update_resource(web, template=labelled("2"), placement=everywhere, actor=operator)
    web.refresh_from_db()
    staged = approve_change(web, operator, [approver, second_approver])
    rollouts.advance_rollout(staged.pk)
    assert Rollout.objects.get(pk=staged.pk).state == RolloutState.WAITING_APPROVAL  # the canary has it
    rollouts.abort_rollout(staged.change_request, actor=operator, reason="enough")

    federation_services.update_resource(web, template=labelled("3"), placement=everywhere, actor=operator)
    web.refresh_from_db()
    later = services.submit(services.create_change_request(web, actor=operator, rollout_strategy={}), actor=operator)
    for approver_ in (approver, second_approver):
        later = services.approve(later, actor=approver_)
    for run in later.runs.all():
        drain(run)
    federation_services.update_resource(ns, template={}, placement={"clusters": MEMBERS}, actor=operator)
    ns.refresh_from_db()
    drain(propagation.propagate_revision(ns))
    assert namespace_on(ready_fleet, "m127", "shop2")

    m127 = Cluster.objects.get(name="m127")
    runs = reconcile_resource_membership(web.pk, among={m127.pk})  # what the namespace reaching m127 asks
    assert len(runs) == 1
    drain(runs[0])
    live = ready_fleet.get_object("m127", "apps/v1", "Deployment", "shop2", "web")
    assert live["metadata"]["labels"]["v"] == "3"
