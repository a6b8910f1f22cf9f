"""The change-request workflow through its services (no network: the clusters are not Ready)."""

import pytest
from django.core.exceptions import PermissionDenied

from federation import services as federation_services
from federation.approvals import services
from federation.approvals.choices import ChangeKind, ChangeState, Severity
from federation.approvals.models import ChangeRequest
from federation.approvals.preflight import PreflightProblem, register_preflight, unregister_preflight
from federation.models import FederatedResource, PropagationRun
from federation.rendering import content_hash
from fedportal.models import AuditEvent
from tests.approvals.factories import draft, submitted
from tests.federation.factories import WEB_TEMPLATE

pytestmark = pytest.mark.django_db


def actions_for(cr):
    return list(
        AuditEvent.objects.filter(object_type="approvals.changerequest", object_id=str(cr.pk))
        .order_by("id")
        .values_list("action", flat=True)
    )


def test_draft_of_a_never_propagated_resource_is_a_create_with_targets_and_diff(dev_resource, operator):
    cr = draft(dev_resource, operator)
    assert cr.state == ChangeState.DRAFT and cr.kind == ChangeKind.CREATE
    assert cr.proposed_revision == dev_resource.current_revision
    # what approvers agree to: the revision's content and the resource's retention and drift policy
    assert cr.proposed_hash == content_hash(
        {"revision": dev_resource.current_revision.content_hash, "retention": "Delete", "drift_policy": "Report"}
    )
    assert cr.target_clusters == ["dev-a"] and cr.required_approvals == 1
    assert [d["cluster"] for d in cr.diffs] == ["dev-a"] and cr.diffs_at is not None
    assert actions_for(cr) == ["approvals.change.create"]


def test_viewer_and_approver_cannot_draft(dev_resource, viewer, approver):
    for user in (viewer, approver):
        with pytest.raises(PermissionDenied):
            draft(dev_resource, user)


def test_author_cannot_approve_own_change(dev_resource, admin_user):
    cr = submitted(dev_resource, admin_user)  # an admin holds every role, approver included
    with pytest.raises(PermissionDenied, match="another approver"):
        services.approve(cr, actor=admin_user)
    cr.refresh_from_db()
    assert cr.state == ChangeState.SUBMITTED and not cr.approvals.exists()


def test_one_approval_is_not_enough_for_a_prod_labelled_target(prod_resource, operator, approver, second_approver):
    cr = submitted(prod_resource, operator)
    assert cr.required_approvals == 2 and cr.target_clusters == ["dev-a", "prod-a"]
    cr = services.approve(cr, actor=approver, comment="looks fine")
    assert cr.state == ChangeState.SUBMITTED
    assert services.approval_summary(cr).valid == 1
    assert not PropagationRun.objects.filter(resource=prod_resource).exists()
    cr = services.approve(cr, actor=second_approver)
    assert cr.state == ChangeState.APPLYING  # auto-apply once approved
    assert cr.runs.count() == 1


def test_same_approver_cannot_count_twice(prod_resource, operator, approver):
    cr = submitted(prod_resource, operator)
    services.approve(cr, actor=approver)
    with pytest.raises(services.TransitionError, match="already approved"):
        services.approve(cr, actor=approver)


def test_required_approvals_follow_settings(prod_resource, operator, settings):
    settings.FEDPORTAL_APPROVALS_PROD = 3
    settings.FEDPORTAL_APPROVALS_DEFAULT = 2
    assert draft(prod_resource, operator).required_approvals == 3


def test_editing_after_approval_voids_it(prod_resource, operator, approver, second_approver, settings):
    cr = submitted(prod_resource, operator)
    services.approve(cr, actor=approver)
    new = federation_services.update_resource(
        prod_resource,
        template={**WEB_TEMPLATE, "spec": {**WEB_TEMPLATE["spec"], "replicas": 3}},
        placement={"clusters": ["prod-a", "dev-a"]},
        actor=operator,
    )
    cr = services.revise_change_request(cr, actor=operator, revision=new)
    summary = services.approval_summary(cr)
    assert (summary.valid, summary.void) == (0, 1)
    cr = services.approve(cr, actor=second_approver)
    assert cr.state == ChangeState.SUBMITTED, "the void approval does not count"
    assert "approvals.change.revise" in actions_for(cr)


def test_revising_an_approved_request_sends_it_back_to_submitted(dev_resource, operator, approver, settings):
    settings.FEDPORTAL_APPROVALS_AUTO_APPLY = False
    cr = services.approve(submitted(dev_resource, operator), actor=approver)
    assert cr.state == ChangeState.APPROVED
    new = federation_services.update_resource(
        dev_resource,
        template={**WEB_TEMPLATE, "spec": {**WEB_TEMPLATE["spec"], "replicas": 2}},
        placement={"clusters": ["dev-a"]},
        actor=operator,
    )
    cr = services.revise_change_request(cr, actor=operator, revision=new)
    assert cr.state == ChangeState.SUBMITTED
    with pytest.raises(services.TransitionError, match="only an Approved request can be applied"):
        services.apply_change_request(cr, actor=operator)


def test_rejected_request_never_reaches_a_cluster(dev_resource, operator, approver):
    cr = services.reject(submitted(dev_resource, operator), actor=approver, comment="wrong image")
    assert cr.state == ChangeState.REJECTED
    for call in (
        lambda: services.apply_change_request(cr, actor=operator),
        lambda: services.approve(cr, actor=approver),
        lambda: services.submit(cr, actor=operator),
    ):
        with pytest.raises(services.TransitionError):
            call()
    assert not PropagationRun.objects.filter(resource=dev_resource).exists()
    dev_resource.refresh_from_db()
    assert dev_resource.propagated_revision is None


def test_reject_needs_a_comment(dev_resource, operator, approver):
    cr = submitted(dev_resource, operator)
    with pytest.raises(services.TransitionError, match="comment is required"):
        services.reject(cr, actor=approver, comment="  ")


def test_illegal_transitions_are_refused_with_a_reason(dev_resource, operator, approver):
    cr = draft(dev_resource, operator)
    with pytest.raises(services.TransitionError, match="CR-.* is Draft: only a Submitted request can be approved"):
        services.approve(cr, actor=approver)
    with pytest.raises(services.TransitionError, match="only an Approved request can be applied"):
        services.apply_change_request(cr, actor=operator)
    services.cancel(cr, actor=operator)
    with pytest.raises(services.TransitionError, match="is Cancelled: only a Draft request can be submitted"):
        services.submit(cr, actor=operator)
    with pytest.raises(services.TransitionError, match="Cancelled"):
        services.cancel(cr, actor=operator)


def test_compare_and_set_refuses_a_stale_transition(dev_resource, operator):
    cr = draft(dev_resource, operator)
    stale = ChangeRequest.objects.get(pk=cr.pk)
    services.submit(cr, actor=operator)
    with pytest.raises(services.TransitionError, match="is Submitted"):
        services.transition(stale, (ChangeState.DRAFT,), ChangeState.SUBMITTED, verb="submitted")


def test_only_author_or_admin_cancels(dev_resource, operator, make_user, admin_user):
    other = make_user("olga-operator", "operator")
    cr = draft(dev_resource, operator)
    with pytest.raises(PermissionDenied):
        services.cancel(cr, actor=other)
    assert services.cancel(cr, actor=admin_user).state == ChangeState.CANCELLED


def test_approved_request_applies_and_records_per_cluster_outcome(dev_resource, operator, approver):
    cr = services.approve(submitted(dev_resource, operator), actor=approver, comment="ship it")
    assert cr.state == ChangeState.APPLYING
    cr = services.sync_change_request(cr)  # the not-Ready cluster is skipped: the run ends at once
    assert cr.state == ChangeState.APPLIED
    assert [(r["cluster"], r["action"], r["state"], r["reason"]) for r in cr.outcome] == [
        ("dev-a", "skip", "done", "ClusterNotReady")
    ]
    assert services.sync_change_request(cr).state == ChangeState.APPLIED, "idempotent"
    assert actions_for(cr) == [
        "approvals.change.create",
        "approvals.change.submit",
        "approvals.change.approve",
        "approvals.change.approved",
        "approvals.change.apply",
        "approvals.change.finish",
    ]


def test_emergency_apply_is_admin_only_audited_and_flagged(dev_resource, operator, approver, admin_user):
    for user in (operator, approver):
        with pytest.raises(PermissionDenied):
            services.emergency_apply(dev_resource, actor=user, reason="outage")
    with pytest.raises(services.TransitionError, match="reason"):
        services.emergency_apply(dev_resource, actor=admin_user, reason="")
    cr = services.emergency_apply(dev_resource, actor=admin_user, reason="prod outage INC-42")
    assert cr.emergency and cr.state == ChangeState.APPLYING and cr.runs.count() == 1
    event = AuditEvent.objects.get(action="approvals.change.emergency_apply")
    assert "INC-42" in event.summary and event.actor == admin_user


def test_preflight_blocking_problem_stops_approval_until_an_admin_overrides(
    dev_resource, operator, approver, admin_user
):
    def check(cr):
        return [PreflightProblem("dev-a", Severity.BLOCKING, "apps/v1 Deployment field x is not served")]

    register_preflight(check)
    try:
        cr = submitted(dev_resource, operator)
        assert cr.preflight == [
            {"cluster_name": "dev-a", "severity": "blocking", "message": "apps/v1 Deployment field x is not served"}
        ]
        with pytest.raises(services.TransitionError, match="blocking"):
            services.approve(cr, actor=approver)
        with pytest.raises(PermissionDenied):
            services.override_preflight(cr, actor=approver, reason="x")
        with pytest.raises(services.TransitionError, match="reason"):
            services.override_preflight(cr, actor=admin_user, reason="")
        services.override_preflight(cr, actor=admin_user, reason="field is ignored there, accepted risk")
        assert services.approve(cr, actor=approver).state == ChangeState.APPLYING
        assert "approvals.change.preflight_override" in actions_for(cr)
    finally:
        unregister_preflight(check)


def test_a_broken_preflight_check_is_a_warning_not_a_crash(dev_resource, operator):
    def broken(cr):
        raise RuntimeError("boom")

    register_preflight(broken)
    try:
        cr = draft(dev_resource, operator)
        assert cr.preflight[0]["severity"] == "warning" and "boom" in cr.preflight[0]["message"]
    finally:
        unregister_preflight(broken)


def test_comments_are_audited(dev_resource, operator, viewer):
    cr = draft(dev_resource, operator)
    services.add_comment(cr, actor=viewer, body="why?")
    with pytest.raises(services.TransitionError):
        services.add_comment(cr, actor=viewer, body=" ")
    assert actions_for(cr)[-1] == "approvals.change.comment"


def test_delete_request_removes_the_resource_row_when_applied(dev_resource, operator, approver):
    cr = draft(dev_resource, operator, kind=ChangeKind.DELETE)
    assert cr.kind == ChangeKind.DELETE
    cr = services.approve(services.submit(cr, actor=operator), actor=approver)
    cr = services.sync_change_request(cr)
    assert cr.state == ChangeState.APPLIED
    assert not FederatedResource.objects.filter(pk=dev_resource.pk).exists()
    cr.refresh_from_db()
    assert cr.resource is None and cr.resource_repr.endswith("shop/web")


def test_unjoin_request_is_admin_only_and_unjoins_the_cluster(dev_cluster, operator, approver, admin_user):
    with pytest.raises(PermissionDenied):
        services.create_change_request(kind=ChangeKind.UNJOIN, cluster=dev_cluster, actor=operator)
    cr = services.create_change_request(kind=ChangeKind.UNJOIN, cluster=dev_cluster, actor=admin_user)
    assert cr.target_clusters == ["dev-a"] and cr.subject == "cluster dev-a"
    cr = services.approve(services.submit(cr, actor=admin_user), actor=approver)
    cr = services.sync_change_request(cr)
    assert cr.state == ChangeState.APPLIED
    from clusters.models import Cluster

    assert not Cluster.objects.filter(name="dev-a").exists()


def test_periodic_safety_net_settles_applying_requests(dev_resource, operator, approver):
    cr = services.approve(submitted(dev_resource, operator), actor=approver)
    assert cr.state == ChangeState.APPLYING
    assert services.sync_running_requests() == 1
    cr.refresh_from_db()
    assert cr.state == ChangeState.APPLIED


def test_sync_task_body_skips_a_missing_request():
    from federation.approvals.tasks import sync_change_request_task

    assert sync_change_request_task.run(987654) == {"cr_id": 987654, "skipped": "gone"}


def test_rollback_request_proposes_the_rolled_back_content(dev_resource, operator, approver):
    cr = services.approve(submitted(dev_resource, operator), actor=approver)
    services.sync_change_request(cr)
    first = dev_resource.current_revision
    dev_resource.refresh_from_db()
    federation_services.update_resource(
        dev_resource,
        template={**WEB_TEMPLATE, "spec": {**WEB_TEMPLATE["spec"], "replicas": 5}},
        placement={"clusters": ["dev-a"]},
        actor=operator,
    )
    dev_resource.refresh_from_db()
    back = federation_services.rollback_resource(dev_resource, to_revision=first, actor=operator)
    rollback = draft(
        FederatedResource.objects.get(pk=dev_resource.pk), operator, kind=ChangeKind.ROLLBACK, revision=back
    )
    assert rollback.kind == ChangeKind.ROLLBACK and back.content_hash == first.content_hash
    assert rollback.proposed_hash == content_hash(
        {"revision": first.content_hash, "retention": "Delete", "drift_policy": "Report"}
    )


def test_a_request_for_what_the_clusters_already_have_is_refused(dev_resource, operator, approver):
    services.sync_change_request(services.approve(submitted(dev_resource, operator), actor=approver))
    with pytest.raises(services.TransitionError, match="already what the clusters have"):
        draft(FederatedResource.objects.get(pk=dev_resource.pk), operator)


def test_auto_apply_failure_keeps_the_approval_and_says_why(dev_resource, operator, approver):
    from federation.choices import Toggle

    cr = submitted(dev_resource, operator)
    type(dev_resource.type).objects.filter(pk=dev_resource.type_id).update(propagation=Toggle.DISABLED)
    with pytest.raises(
        services.TransitionError, match="approved, but applying it failed: Propagation of deployments.apps is Disabled"
    ):
        services.approve(cr, actor=approver)
    cr.refresh_from_db()
    assert cr.state == ChangeState.APPROVED and not PropagationRun.objects.filter(resource=dev_resource).exists()


def test_cluster_with_propagated_objects_needs_a_change_request_to_unjoin(dev_cluster, dev_resource):
    from federation.models import PropagatedVersion

    assert not services.cluster_has_propagated_objects(dev_cluster)
    PropagatedVersion.objects.create(
        resource=dev_resource, cluster=dev_cluster, status="OK", applied_manifest={"kind": "Deployment"}
    )
    assert services.cluster_has_propagated_objects(dev_cluster)


def test_unjoin_page_sends_a_cluster_with_propagated_objects_to_a_change_request(
    client, admin_user, dev_cluster, dev_resource
):
    from django.urls import reverse

    from clusters.models import Cluster
    from federation.models import PropagatedVersion

    PropagatedVersion.objects.create(
        resource=dev_resource, cluster=dev_cluster, status="OK", applied_manifest={"kind": "Deployment"}
    )
    client.force_login(admin_user)
    url = reverse("clusters:cluster_unjoin", args=[dev_cluster.pk])
    page = client.get(url).content.decode()
    assert "needs an approved change request" in page
    assert reverse("approvals:change_create_unjoin", args=[dev_cluster.pk]) in page
    response = client.post(url, {"confirm_name": dev_cluster.name, "confirm": "on", "name": dev_cluster.name})
    assert response.status_code == 409
    assert Cluster.objects.filter(pk=dev_cluster.pk).exists()


def test_approving_rechecks_required_approvals_but_keeps_the_diff_taken_at_submit(
    prod_resource, operator, approver, prod_cluster
):
    cr = services.submit(services.create_change_request(prod_resource, actor=operator), actor=operator)
    taken = cr.diffs_at
    assert cr.required_approvals == 2
    type(prod_cluster).objects.filter(pk=prod_cluster.pk).update(labels={"env": "staging"})
    cr = services.approve(cr, actor=approver)
    assert cr.diffs_at == taken, "no second read of every target cluster on approve"
    assert cr.required_approvals == 1 and cr.state != ChangeState.SUBMITTED
