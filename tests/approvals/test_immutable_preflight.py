"""Preflight: an edit changing a field kube-apiserver never lets change on an existing object blocks
approval on each cluster holding the object (clusters.immutable_fields), until it is restored or an
admin overrides it; clusters without the object, and edits of mutable fields, are not held up."""

import copy

import pytest

from clusters.models import Cluster
from federation import services as federation
from federation.approvals import services
from federation.approvals.choices import ChangeState, Severity
from federation.choices import PropagationReason
from federation.models import PropagatedVersion
from federation.propagation.common import render_args
from federation.rendering import render_manifest
from tests.approvals.factories import draft, submitted
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import WEB_TEMPLATE, ftype

pytestmark = pytest.mark.django_db


def held_as_applied(resource, cluster, live=None):
    """``cluster`` holds ``resource``'s current revision as FedPortal applied it (over ``live``)."""
    revision = resource.current_revision
    manifest = render_manifest(
        overrides=revision.overrides, replicas=None, **render_args(resource, revision, cluster, live=live)
    )
    return PropagatedVersion.objects.create(
        resource=resource,
        cluster=cluster,
        revision=revision,
        applied_manifest=manifest,
        live_uid="3f1e0000-0000-4000-8000-000000000001",
        status=PropagationReason.OK,
    )


def moved_selector():
    """WEB_TEMPLATE with its selector (and the pod labels it selects) changed."""
    moved = copy.deepcopy(WEB_TEMPLATE)
    moved["spec"]["selector"]["matchLabels"]["track"] = "stable"
    moved["spec"]["template"]["metadata"]["labels"]["track"] = "stable"
    return moved


def blocking(cr):
    return [p for p in cr.preflight if p["severity"] == Severity.BLOCKING]


def test_a_moved_selector_blocks_where_the_object_exists_until_an_admin_overrides(
    make_resource, dev_cluster, operator, approver, admin_user
):
    ClusterFactory(name="dev-b", labels={"env": "dev"}, state=dev_cluster.state)
    resource = make_resource("web", ("dev-a", "dev-b"))
    held_as_applied(resource, dev_cluster)  # dev-b has not got it yet: it would be created there
    moved = moved_selector()
    federation.update_resource(resource, template=moved, placement={"clusters": ["dev-a", "dev-b"]}, actor=operator)

    cr = submitted(resource, operator)
    (problem,) = blocking(cr)
    assert problem["cluster_name"] == "dev-a"
    assert "spec.selector cannot change on an object that exists" in problem["message"]
    assert "delete the object on dev-a first" in problem["message"]
    with pytest.raises(services.TransitionError, match="Preflight found blocking problems .*spec.selector"):
        services.approve(cr, actor=approver)
    services.override_preflight(cr, actor=admin_user, reason="dev-a's copy is deleted first")
    assert services.approve(cr, actor=approver).state in (ChangeState.APPROVED, ChangeState.APPLYING)


def test_an_image_change_and_an_unchanged_selector_are_not_held_up(make_resource, dev_cluster, operator):
    resource = make_resource("web", ("dev-a",))
    held_as_applied(resource, dev_cluster)
    newer = copy.deepcopy(WEB_TEMPLATE)
    newer["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.27"
    federation.update_resource(resource, template=newer, placement={"clusters": ["dev-a"]}, actor=operator)
    assert blocking(submitted(resource, operator)) == []


def test_an_immutable_configmaps_new_data_blocks(dev_cluster, operator):
    from tests.federation.factories import namespace_everywhere

    namespace_everywhere("shop")
    frozen = {"immutable": True, "data": {"mode": "a"}}
    resource = federation.create_resource(
        ftype("ConfigMap"), namespace="shop", name="cfg", template=frozen, placement={"clusters": ["dev-a"]}
    )
    held_as_applied(resource, dev_cluster)
    federation.update_resource(
        resource, template={"immutable": True, "data": {"mode": "b"}}, placement={"clusters": ["dev-a"]}, actor=operator
    )
    (problem,) = blocking(submitted(resource, operator))
    assert "ConfigMap shop/cfg exists on dev-a, and data cannot change" in problem["message"]


def test_an_edit_of_a_job_applied_over_its_generated_selector_blocks_only_a_template_change(dev_cluster, operator):
    """A Job is applied over the live one, keeping the selector and pod labels its apiserver generated
    (KubeFed's retained fields): an edit of a mutable field is no selector change (a reviewer's
    finding: every edit of such a Job was blocked), a new image is a template change."""
    from tests.federation.factories import namespace_everywhere

    namespace_everywhere("shop")
    pod = {"restartPolicy": "Never", "containers": [{"name": "run", "image": "busybox:1.36"}]}
    job = {"spec": {"backoffLimit": 2, "template": {"spec": pod}}}
    resource = federation.create_resource(
        ftype("Job"), namespace="shop", name="once", template=job, placement={"clusters": ["dev-a"]}
    )
    generated = {"batch.kubernetes.io/controller-uid": "3f1e", "job-name": "once"}
    live = {"spec": {"selector": {"matchLabels": generated}, "template": {"metadata": {"labels": generated}}}}
    held_as_applied(resource, dev_cluster, live=live)
    federation.update_resource(
        resource,
        template={"spec": {**job["spec"], "backoffLimit": 4}},
        placement={"clusters": ["dev-a"]},
        actor=operator,
    )
    first = submitted(resource, operator)
    assert blocking(first) == []
    services.cancel(first, actor=operator)
    newer = {
        "spec": {**job["spec"], "template": {"spec": {**pod, "containers": [{"name": "run", "image": "busybox:1.37"}]}}}
    }
    federation.update_resource(resource, template=newer, placement={"clusters": ["dev-a"]}, actor=operator)
    (problem,) = blocking(submitted(resource, operator))
    assert "spec.template cannot change" in problem["message"]


def test_an_object_drift_found_removed_is_not_held_up(make_resource, dev_cluster, operator):
    """The way out the message gives (delete it there) must clear the block: drift records the removal."""
    from federation.choices import SyncState

    resource = make_resource("web", ("dev-a",))
    pv = held_as_applied(resource, dev_cluster)
    moved = moved_selector()
    federation.update_resource(resource, template=moved, placement={"clusters": ["dev-a"]}, actor=operator)
    PropagatedVersion.objects.filter(pk=pv.pk).update(
        sync_state=SyncState.OUT_OF_SYNC, drift=[{"path": "/", "before": "present", "after": None, "change": "removed"}]
    )
    assert blocking(submitted(resource, operator)) == []


def test_clusters_sharing_their_overrides_are_rendered_once_and_judged_by_their_own(
    make_resource, dev_cluster, operator, monkeypatch
):
    """Most of a fleet shares a rendering (no overrides): it is rendered once; a cluster whose override
    keeps the old selector is judged by its own rendering, and not held up."""
    from federation.approvals import immutable_preflight

    names = ("dev-a", "dev-b", "dev-c")
    for name in names[1:]:
        ClusterFactory(name=name, labels={"env": "dev"}, state=dev_cluster.state)
    resource = make_resource("web", names)
    for name in names:
        held_as_applied(resource, Cluster.objects.get(name=name))
    moved = moved_selector()
    keep_selector = [{"op": "remove", "path": "/spec/selector/matchLabels/track"}]
    federation.update_resource(
        resource,
        template=moved,
        placement={"clusters": list(names)},
        overrides=[{"clusterName": "dev-c", "clusterOverrides": keep_selector}],
        actor=operator,
    )
    cr = submitted(resource, operator)
    assert [problem["cluster_name"] for problem in blocking(cr)] == ["dev-a", "dev-b"]
    renders = []
    real = immutable_preflight.render_manifest
    monkeypatch.setattr(immutable_preflight, "render_manifest", lambda **kw: renders.append(1) or real(**kw))
    assert len(immutable_preflight.immutable_field_check(cr)) == 2
    assert len(renders) == 2  # dev-a and dev-b's shared one, dev-c's own


def test_a_cluster_the_edit_removes_the_object_from_is_not_held_up(make_resource, dev_cluster, operator):
    """A reviewer's finding: moving the placement away from a cluster and the selector in one edit
    deletes (or orphans) the object there, and creates it elsewhere; nothing is updated, nothing refused."""
    ClusterFactory(name="dev-b", labels={"env": "dev"}, state=dev_cluster.state)
    resource = make_resource("web", ("dev-a",))
    held_as_applied(resource, dev_cluster)
    moved = moved_selector()
    federation.update_resource(resource, template=moved, placement={"clusters": ["dev-b"]}, actor=operator)
    cr = submitted(resource, operator)
    assert "dev-a" in cr.target_clusters and blocking(cr) == []


def test_the_first_preflight_of_a_new_request_already_sees_its_clusters(make_resource, dev_cluster, operator):
    """The preflight runs before the request's target clusters are stored (they are refreshed with it):
    it reads the plan itself, so a draft already shows the refusal."""
    resource = make_resource("web", ("dev-a",))
    held_as_applied(resource, dev_cluster)
    moved = moved_selector()
    federation.update_resource(resource, template=moved, placement={"clusters": ["dev-a"]}, actor=operator)
    (problem,) = blocking(draft(resource, operator))
    assert problem["cluster_name"] == "dev-a"


@pytest.mark.parametrize(
    "remote_status, blocks",
    [
        ({"conditions": [{"type": "Suspended", "status": "True"}]}, False),
        ({"startTime": "2026-12-07T23:00:00Z"}, True),
        (None, True),
    ],
    ids=["never started", "started", "status not collected"],
)
def test_a_suspended_job_may_move_its_pods_only_while_the_cluster_says_it_never_started(
    dev_cluster, operator, remote_status, blocks
):
    from tests.federation.factories import namespace_everywhere

    namespace_everywhere("shop")
    pod = {"restartPolicy": "Never", "containers": [{"name": "run", "image": "busybox:1.36"}]}
    job = {"spec": {"suspend": True, "template": {"spec": pod}}}
    resource = federation.create_resource(
        ftype("Job"), namespace="shop", name="later", template=job, placement={"clusters": ["dev-a"]}
    )
    pv = held_as_applied(resource, dev_cluster)
    PropagatedVersion.objects.filter(pk=pv.pk).update(remote_status=remote_status)
    moved = {"spec": {"suspend": True, "template": {"spec": {**pod, "nodeSelector": {"zone": "b"}}}}}
    federation.update_resource(resource, template=moved, placement={"clusters": ["dev-a"]}, actor=operator)
    problems = blocking(submitted(resource, operator))
    assert [p["cluster_name"] for p in problems] == (["dev-a"] if blocks else [])
