"""Issue 16, findings 1 and 3: an approval counts only from someone who wrote none of what the
request would apply, and everything that decides what propagation does is in the approved hash.
(No network: the clusters are not Ready.)"""

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from federation import services as federation_services
from federation.approvals import services
from federation.approvals.choices import ChangeKind, ChangeState
from federation.approvals.models import ChangeRequest
from federation.choices import DriftPolicy, Retention
from federation.models import FederatedResource, PropagatedVersion, PropagationRun, SettingsChange
from fedportal.models import AuditEvent
from fedportal.roles import Role
from tests.approvals.factories import draft, submitted
from tests.federation.factories import WEB_TEMPLATE

pytestmark = pytest.mark.django_db


def replicas(n):
    return {**WEB_TEMPLATE, "spec": {**WEB_TEMPLATE["spec"], "replicas": n}}


def edit(resource, actor, n, clusters=("dev-a",), **settings):
    resource = FederatedResource.objects.get(pk=resource.pk)
    return federation_services.update_resource(
        resource, template=replicas(n), placement={"clusters": list(clusters)}, actor=actor, **settings
    )


def set_settings(resource, actor, clusters=("dev-a",), **settings):
    """Change retention / drift policy only (same content: no new revision)."""
    resource = FederatedResource.objects.select_related("current_revision").get(pk=resource.pk)
    current = resource.current_revision
    revision = federation_services.update_resource(
        resource,
        template=current.template,
        placement=current.placement,
        overrides=current.overrides,
        scheduling=current.scheduling,
        actor=actor,
        **settings,
    )
    assert revision.pk == current.pk
    return revision


def applied(resource, author, approver):
    """Propagate the current revision through an approved request (the clusters' baseline)."""
    resource = FederatedResource.objects.get(pk=resource.pk)
    services.sync_change_request(services.approve(submitted(resource, author), actor=approver))
    return FederatedResource.objects.get(pk=resource.pk)


def mark_present(resource, *clusters):
    for cluster in clusters:
        PropagatedVersion.objects.update_or_create(
            resource=resource,
            cluster=cluster,
            defaults={"status": "OK", "applied_manifest": {"kind": "Deployment", "metadata": {"name": resource.name}}},
        )


@pytest.fixture
def bob(make_user):
    """Holds both the operator and the approver role."""
    return make_user("bob-both", Role.OPERATOR, Role.APPROVER)


@pytest.fixture
def carol(make_user):
    return make_user("carol-approver", Role.APPROVER)


# --- finding 1: four-eyes bypass ---------------------------------------------------------------


def test_operator_approver_cannot_repoint_someone_elses_request_at_his_revision_and_approve_it(
    dev_resource, operator, bob
):
    """The attack as the issue tells it: operator A submits; B (operator+approver) edits the
    resource, uses "revise" on A's request so it proposes B's revision, then approves it alone."""
    cr = submitted(dev_resource, operator)
    proposed = cr.proposed_revision
    bobs = edit(dev_resource, bob, 7)
    assert bobs.author == bob and bobs.number == 2
    with pytest.raises(PermissionDenied, match=r"Only the author of CR-\d+ \(otto-operator\) or an admin"):
        services.revise_from_current(cr, actor=bob)
    cr.refresh_from_db()
    assert cr.proposed_revision == proposed
    # approving A's (unchanged) content would be fine for B, but B's revision is not in it
    assert services.approval_summary(cr).valid == 0
    assert not PropagationRun.objects.filter(resource=dev_resource, revision=bobs).exists()


def test_content_author_approval_never_counts_even_when_an_admin_repoints(
    dev_resource, operator, bob, admin_user, carol
):
    cr = submitted(dev_resource, operator)
    bobs = edit(dev_resource, bob, 7)
    cr = services.revise_change_request(cr, actor=admin_user, revision=bobs)  # allowed, audited as an admin's
    event = AuditEvent.objects.filter(action="approvals.change.revise").latest("id")
    assert event.actor_name == "adam-admin" and event.after["by_admin"] is True
    assert "by admin adam-admin, not the author" in event.summary
    with pytest.raises(PermissionDenied, match=r"You wrote part of what CR-\d+ would apply \(revision 2\)"):
        services.approve(cr, actor=bob)
    cr.refresh_from_db()
    assert cr.state == ChangeState.SUBMITTED and not cr.approvals.exists()
    cr = services.approve(cr, actor=carol)
    assert cr.state == ChangeState.APPLYING and cr.runs.get().revision == bobs


def test_approval_from_the_author_of_an_earlier_unapplied_revision_does_not_count(dev_resource, operator, bob, carol):
    edit(dev_resource, bob, 5)  # revision 2, by B
    third = edit(dev_resource, operator, 6)  # revision 3, by A, on top of B's
    cr = submitted(FederatedResource.objects.get(pk=dev_resource.pk), operator)
    assert cr.proposed_revision == third
    with pytest.raises(PermissionDenied, match=r"\(revision 2\)"):
        services.approve(cr, actor=bob)
    # an approval recorded before the rule existed (or by any other path) is not counted either
    cr.approvals.create(approver=bob, approver_name="bob-both", decision="approve", content_hash=cr.proposed_hash)
    assert services.approval_summary(cr).valid == 0
    assert services.approve(cr, actor=carol).state == ChangeState.APPLYING


def test_revisions_already_applied_do_not_make_their_author_a_content_author(dev_resource, operator, bob, carol):
    edit(dev_resource, bob, 5)  # B's revision 2 ...
    resource = applied(dev_resource, operator, carol)  # ... reaches the clusters through A's request
    assert resource.propagated_revision.number == 2
    edit(resource, operator, 6)  # A's revision 3
    cr = submitted(FederatedResource.objects.get(pk=dev_resource.pk), operator)
    assert services.approve(cr, actor=bob).state == ChangeState.APPLYING


def test_restoring_a_revision_that_never_reached_the_clusters_keeps_its_author_out(
    dev_resource, operator, approver, bob
):
    """A rollback copies an older revision's content into a new revision written by whoever rolled
    back: the author of the copied content, never approved, is still its author."""
    resource = applied(dev_resource, operator, approver)  # revision 1 on the clusters
    bobs = edit(resource, bob, 7)  # revision 2, never approved
    resource = FederatedResource.objects.get(pk=resource.pk)
    federation_services.rollback_resource(resource, to_revision=resource.revisions.get(number=1), actor=operator)
    resource = applied(resource, operator, approver)  # revision 3 (= 1) propagated
    restored = federation_services.rollback_resource(resource, to_revision=bobs, actor=operator)
    assert restored.content_hash == bobs.content_hash and restored.author == operator
    cr = submitted(FederatedResource.objects.get(pk=resource.pk), operator)
    with pytest.raises(PermissionDenied, match=r"\(revision 2\)"):
        services.approve(cr, actor=bob)
    assert services.approve(cr, actor=approver).state == ChangeState.APPLYING


def test_proposing_an_older_revision_keeps_the_authors_it_was_built_on_out(dev_resource, operator, approver, bob):
    yves = type(operator).objects.create_user("yves-operator")
    yves.groups.add(*operator.groups.all())
    resource = applied(dev_resource, operator, approver)
    edit(resource, bob, 7)  # revision 2 by bob
    resource = FederatedResource.objects.get(pk=resource.pk)
    built_on_bobs = edit(resource, yves, 8)  # revision 3 by yves, on top of bob's
    resource = FederatedResource.objects.get(pk=resource.pk)
    federation_services.rollback_resource(resource, to_revision=resource.revisions.get(number=1), actor=operator)
    applied(resource, operator, approver)  # revision 4 (= 1) propagated
    cr = submitted(FederatedResource.objects.get(pk=resource.pk), operator, revision=built_on_bobs)
    with pytest.raises(PermissionDenied, match=r"\(revision 2\)"):
        services.approve(cr, actor=bob)


def test_content_others_approved_clears_its_author_even_when_restored(dev_resource, operator, approver, bob, carol):
    edit(dev_resource, bob, 5)  # bob's revision 2 ...
    resource = applied(dev_resource, operator, carol)  # ... approved by carol and propagated
    edit(resource, operator, 6)
    resource = applied(resource, operator, carol)  # revision 3 propagated
    federation_services.rollback_resource(resource, to_revision=resource.revisions.get(number=2), actor=operator)
    cr = submitted(FederatedResource.objects.get(pk=resource.pk), operator)
    assert services.approve(cr, actor=bob).state == ChangeState.APPLYING


def test_whoever_changed_retention_since_the_last_propagation_cannot_approve(dev_resource, operator, bob, carol):
    resource = applied(dev_resource, operator, carol)
    set_settings(resource, bob, retention=Retention.ORPHAN)
    cr = submitted(resource, operator, kind=ChangeKind.DELETE)
    with pytest.raises(PermissionDenied, match="the retention/drift policy change"):
        services.approve(cr, actor=bob)
    assert services.approve(cr, actor=carol).state == ChangeState.APPLYING


STAGED = {
    "waves": [
        {"name": "canary", "clusters": ["dev-a"]},
        {"name": "later", "clusters": ["dev-b"], "requireApproval": True},
    ]
}


def test_a_propagation_nobody_approved_does_not_clear_a_settings_author(dev_resource, operator, bob, carol, admin_user):
    """A run after the change is no proof that anyone else agreed to it: an emergency apply (or a
    rollout's later wave, approved before the change) propagates it without approvers."""
    resource = applied(dev_resource, operator, carol)
    set_settings(resource, bob, retention=Retention.ORPHAN)
    changed_at = SettingsChange.objects.get(author=bob).created_at
    services.emergency_apply(FederatedResource.objects.get(pk=resource.pk), actor=admin_user, reason="outage")
    assert PropagationRun.objects.filter(resource=resource, started_at__gt=changed_at).exists()
    cr = submitted(FederatedResource.objects.get(pk=resource.pk), operator, kind=ChangeKind.DELETE)
    with pytest.raises(PermissionDenied, match="the retention/drift policy change"):
        services.approve(cr, actor=bob)
    assert services.approve(cr, actor=carol).state == ChangeState.APPLYING


def test_a_settings_change_others_approved_no_longer_bars_its_author(dev_resource, operator, bob, carol):
    resource = applied(dev_resource, operator, carol)
    set_settings(resource, bob, retention=Retention.ORPHAN)
    edit(resource, operator, 5)
    resource = applied(resource, operator, carol)  # carol approved content holding bob's retention
    edit(resource, operator, 6)
    cr = submitted(FederatedResource.objects.get(pk=resource.pk), operator)
    assert services.approve(cr, actor=bob).state == ChangeState.APPLYING


def test_a_request_with_its_own_strategy_does_not_clear_the_resource_strategys_author(
    dev_resource, operator, bob, carol, settings
):
    settings.FEDPORTAL_APPROVALS_AUTO_APPLY = False
    federation_services.set_rollout_strategy(dev_resource, STAGED, actor=bob)
    edit(dev_resource, operator, 4)
    resource = FederatedResource.objects.get(pk=dev_resource.pk)
    own = services.create_change_request(resource=resource, actor=operator, rollout_strategy={})
    assert services.approve(services.submit(own, actor=operator), actor=carol).state == ChangeState.APPROVED
    services.apply_change_request(own, actor=operator)  # propagated without the resource's waves
    edit(resource, operator, 5)
    cr = submitted(FederatedResource.objects.get(pk=resource.pk), operator)  # through the resource's waves
    with pytest.raises(PermissionDenied, match="the rollout strategy change"):
        services.approve(cr, actor=bob)


def test_a_rollout_strategy_change_voids_approvals_and_its_author_cannot_approve(
    dev_resource, operator, bob, carol, approver, settings
):
    """Approvers agree to the waves and gates a change goes through: removing a wave's approval gate
    after they approved must not let the change reach every cluster at once."""
    settings.FEDPORTAL_APPROVALS_AUTO_APPLY = False
    federation_services.set_rollout_strategy(dev_resource, STAGED, actor=operator)
    resource = FederatedResource.objects.get(pk=dev_resource.pk)
    edit(resource, operator, 4)
    cr = services.approve(submitted(FederatedResource.objects.get(pk=resource.pk), operator), actor=carol)
    assert cr.state == ChangeState.APPROVED
    hash_with_waves = cr.proposed_hash

    federation_services.set_rollout_strategy(resource, {}, actor=bob)  # no waves, no gate

    cr.refresh_from_db()
    assert cr.state == ChangeState.SUBMITTED and services.approval_summary(cr).valid == 0
    assert cr.proposed_hash != hash_with_waves
    assert AuditEvent.objects.filter(action="approvals.change.content_changed", object_id=str(cr.pk)).exists()
    with pytest.raises(PermissionDenied, match="the rollout strategy change"):
        services.approve(cr, actor=bob)
    assert services.approve(cr, actor=approver).state == ChangeState.APPROVED


def test_a_request_with_its_own_strategy_ignores_the_resources(dev_resource, operator, bob, carol, settings):
    settings.FEDPORTAL_APPROVALS_AUTO_APPLY = False
    edit(dev_resource, operator, 4)
    resource = FederatedResource.objects.get(pk=dev_resource.pk)
    cr = services.create_change_request(resource=resource, actor=operator, rollout_strategy=STAGED)
    cr = services.approve(services.submit(cr, actor=operator), actor=carol)
    federation_services.set_rollout_strategy(resource, STAGED, actor=bob)  # not what the request goes through
    cr.refresh_from_db()
    assert cr.state == ChangeState.APPROVED and services.approval_summary(cr).valid == 1


def test_a_strategy_change_neither_voids_nor_bars_requests_no_strategy_stages(
    dev_resource, operator, bob, carol, settings
):
    settings.FEDPORTAL_APPROVALS_AUTO_APPLY = False
    resource = applied(dev_resource, operator, carol)
    cr = submitted(resource, operator, kind=ChangeKind.DELETE)
    hash_before = cr.proposed_hash
    federation_services.set_rollout_strategy(resource, STAGED, actor=bob)
    cr.refresh_from_db()
    assert cr.proposed_hash == hash_before
    assert services.approve(cr, actor=bob).state == ChangeState.APPROVED


def test_requests_without_waves_keep_the_hash_they_always_had(dev_resource, operator):
    from federation.approvals.content import request_content_hash
    from federation.rendering import content_hash

    cr = submitted(dev_resource, operator)
    resource = FederatedResource.objects.get(pk=dev_resource.pk)
    expected = content_hash(
        {
            "revision": cr.proposed_revision.content_hash,
            "retention": resource.retention,
            "drift_policy": resource.drift_policy,
        }
    )
    assert cr.proposed_hash == request_content_hash(cr) == expected


def test_the_author_can_still_repoint_his_own_request(dev_resource, operator, approver):
    cr = submitted(dev_resource, operator)
    cr = services.revise_from_current(cr, actor=operator)
    assert cr.proposed_revision.number == 1  # already current: unchanged
    newer = edit(dev_resource, operator, 3)
    cr = services.revise_from_current(cr, actor=operator)
    assert cr.proposed_revision == newer
    assert services.approve(cr, actor=approver).state == ChangeState.APPLYING


def test_a_revised_request_keeps_a_title_someone_wrote_and_renames_the_one_fedportal_made(dev_resource, operator):
    made = draft(dev_resource, operator)
    named = draft(dev_resource, operator, title="Scale web for the sale")
    assert made.title.endswith("(revision 1)")
    revision = edit(dev_resource, operator, 7)
    made = services.revise_change_request(made, actor=operator, revision=revision)
    named = services.revise_change_request(named, actor=operator, revision=revision)
    assert made.title.endswith("(revision 2)") and "revision 1" not in made.title
    assert named.title == "Scale web for the sale"


def test_detail_page_offers_revise_and_approve_only_to_who_may(client, dev_resource, operator, bob, carol):
    cr = submitted(dev_resource, operator)
    edit(dev_resource, bob, 7)
    client.force_login(bob)
    page = client.get(cr.get_absolute_url()).content.decode()
    assert 'name="revise"' not in page
    assert 'id="approve-form"' in page  # A's revision 1: B wrote none of it
    client.force_login(operator)
    assert 'name="revise"' in client.get(cr.get_absolute_url()).content.decode()
    client.force_login(bob)
    response = client.post(reverse("approvals:change_refresh", args=[cr.pk]), {"revise": "1"})
    assert response.status_code == 403
    assert ChangeRequest.objects.get(pk=cr.pk).proposed_revision.number == 1


def test_an_approver_who_wrote_part_of_a_request_is_told_why_he_cannot_approve_it(
    client, dev_resource, operator, bob, admin_user
):
    """Bob may still reject it, and the page said nothing about why Approve was missing."""
    cr = submitted(dev_resource, operator)
    bobs = edit(dev_resource, bob, 7)
    services.revise_change_request(cr, actor=admin_user, revision=bobs)
    client.force_login(bob)
    page = client.get(cr.get_absolute_url()).content.decode()
    assert 'id="approve-form"' not in page and 'id="reject-form"' in page
    assert "You wrote part of what this request would apply (revision 2): another approver must approve it." in page
    client.force_login(operator)
    page = client.get(cr.get_absolute_url()).content.decode()
    assert 'id="approve-form"' not in page and "Another approver must approve your request." in page


# --- finding 3: retention and drift policy are part of the approved content --------------------------


def test_retention_flip_after_one_prod_approval_voids_it_and_refreshes_the_diff(
    prod_resource, prod_cluster, dev_cluster, operator, approver, second_approver, django_capture_on_commit_callbacks
):
    set_settings(prod_resource, operator, clusters=("prod-a", "dev-a"), retention=Retention.ORPHAN)
    resource = FederatedResource.objects.get(pk=prod_resource.pk)
    mark_present(resource, prod_cluster, dev_cluster)
    cr = submitted(resource, operator, kind=ChangeKind.DELETE)
    assert cr.required_approvals == 2
    assert {d["message"] for d in cr.diffs} == {"Left in place (retention Orphan)."}
    cr = services.approve(cr, actor=approver)
    assert services.approval_summary(cr).valid == 1

    with django_capture_on_commit_callbacks(execute=True):
        set_settings(resource, operator, clusters=("prod-a", "dev-a"), retention=Retention.DELETE)

    cr = ChangeRequest.objects.get(pk=cr.pk)
    summary = services.approval_summary(cr)
    assert (summary.valid, summary.void) == (0, 1)
    assert sorted((d["cluster"], d["action"], d["message"]) for d in cr.diffs) == [
        ("dev-a", "delete", "Will be deleted."),
        ("prod-a", "delete", "Will be deleted."),
    ]
    assert AuditEvent.objects.filter(action="approvals.change.content_changed", object_id=str(cr.pk)).count() == 1
    cr = services.approve(cr, actor=second_approver)
    assert cr.state == ChangeState.SUBMITTED, "the approval given for Orphan does not count for Delete"
    assert not PropagationRun.objects.filter(resource=resource).exists()
    cr = services.approve(cr, actor=approver)  # the first approver agrees to Delete too
    assert cr.state == ChangeState.APPLYING


def test_a_settings_change_that_bypasses_the_hook_is_still_caught_before_apply(
    dev_resource, dev_cluster, operator, approver, settings
):
    settings.FEDPORTAL_APPROVALS_AUTO_APPLY = False
    resource = applied(dev_resource, operator, approver)
    mark_present(resource, dev_cluster)
    FederatedResource.objects.filter(pk=resource.pk).update(retention=Retention.ORPHAN)
    cr = services.approve(submitted(resource, operator, kind=ChangeKind.DELETE), actor=approver)
    assert cr.state == ChangeState.APPROVED
    FederatedResource.objects.filter(pk=resource.pk).update(retention=Retention.DELETE)  # e.g. a raw SQL edit
    with pytest.raises(services.TransitionError, match="changed after it was approved"):
        services.apply_change_request(cr, actor=operator)
    cr.refresh_from_db()
    assert cr.state == ChangeState.SUBMITTED and services.approval_summary(cr).valid == 0
    assert [d["action"] for d in cr.diffs] == ["delete"]


def test_drift_policy_change_voids_approvals_of_an_open_edit_and_sends_approved_back(
    dev_resource, operator, approver, settings
):
    settings.FEDPORTAL_APPROVALS_AUTO_APPLY = False
    cr = services.approve(submitted(dev_resource, operator), actor=approver)
    assert cr.state == ChangeState.APPROVED
    set_settings(dev_resource, operator, drift_policy=DriftPolicy.ENFORCE)
    cr.refresh_from_db()
    assert cr.state == ChangeState.SUBMITTED
    assert services.approval_summary(cr).void == 1
    with pytest.raises(services.TransitionError, match="only an Approved request can be applied"):
        services.apply_change_request(cr, actor=operator)


def test_the_drift_policy_drift_checks_act_on_is_the_one_an_applied_request_held(
    client, dev_resource, operator, approver, admin_user
):
    resource = applied(dev_resource, operator, approver)
    assert resource.approved_drift_policy == DriftPolicy.REPORT
    set_settings(resource, operator, drift_policy=DriftPolicy.ENFORCE)
    resource = FederatedResource.objects.get(pk=resource.pk)
    assert (resource.drift_policy, resource.approved_drift_policy) == (DriftPolicy.ENFORCE, DriftPolicy.REPORT)
    client.force_login(operator)
    page = client.get(reverse("federation:resource_detail", args=[resource.pk])).content.decode()
    assert "drift checks act on Report until a change request holding Enforce is applied" in page
    # no new revision: the request proposes the one the clusters have, holding Enforce
    resource = applied(resource, operator, approver)
    assert resource.approved_drift_policy == DriftPolicy.ENFORCE
    set_settings(resource, operator, drift_policy=DriftPolicy.REPORT)  # stopping needs nobody's approval
    assert FederatedResource.objects.get(pk=resource.pk).approved_drift_policy == DriftPolicy.REPORT
    # nothing pending: a request for the revision the clusters have is refused, as before
    with pytest.raises(services.TransitionError, match="already what the clusters have"):
        submitted(FederatedResource.objects.get(pk=resource.pk), operator)
    set_settings(resource, operator, drift_policy=DriftPolicy.ENFORCE)
    services.emergency_apply(FederatedResource.objects.get(pk=resource.pk), actor=admin_user, reason="outage")
    assert FederatedResource.objects.get(pk=resource.pk).approved_drift_policy == DriftPolicy.ENFORCE


def test_the_retention_removals_act_on_is_the_one_an_applied_request_held(
    client, dev_resource, operator, approver, admin_user
):
    """Retention Delete makes a cluster leaving the placement outside a change request (a relabel)
    delete the object: part of the approved content, like Enforce (tests/federation/test_membership.py
    relabels against the simulator)."""
    resource = applied(dev_resource, operator, approver)
    assert resource.approved_retention == Retention.DELETE
    set_settings(resource, operator, retention=Retention.ORPHAN)  # the safer one needs nobody's approval
    assert FederatedResource.objects.get(pk=resource.pk).approved_retention == Retention.ORPHAN
    set_settings(resource, operator, retention=Retention.DELETE)
    resource = FederatedResource.objects.get(pk=resource.pk)
    assert (resource.retention, resource.approved_retention) == (Retention.DELETE, Retention.ORPHAN)
    client.force_login(operator)
    page = client.get(reverse("federation:resource_detail", args=[resource.pk])).content.decode()
    assert 'id="retention-pending"' in page and "until a change request holding Delete is applied" in page
    # no new revision: the request proposes the one the clusters have, holding Delete
    resource = applied(resource, operator, approver)
    assert resource.approved_retention == Retention.DELETE
    page = client.get(reverse("federation:resource_detail", args=[resource.pk])).content.decode()
    assert 'id="retention-pending"' not in page
    set_settings(resource, operator, retention=Retention.ORPHAN)
    set_settings(resource, operator, retention=Retention.DELETE)
    services.emergency_apply(FederatedResource.objects.get(pk=resource.pk), actor=admin_user, reason="outage")
    assert FederatedResource.objects.get(pk=resource.pk).approved_retention == Retention.DELETE
    event = AuditEvent.objects.filter(action="approvals.change.emergency_apply").latest("id")
    assert event.after["retention"] == Retention.DELETE


def test_retention_change_of_a_resource_on_the_cluster_voids_an_unjoin_approval(
    dev_resource, dev_cluster, operator, admin_user, approver, settings
):
    settings.FEDPORTAL_APPROVALS_AUTO_APPLY = False
    mark_present(dev_resource, dev_cluster)
    cr = services.create_change_request(kind=ChangeKind.UNJOIN, cluster=dev_cluster, actor=admin_user)
    cr = services.approve(services.submit(cr, actor=admin_user), actor=approver)
    assert cr.state == ChangeState.APPROVED
    set_settings(dev_resource, operator, retention=Retention.ORPHAN)
    cr.refresh_from_db()
    assert cr.state == ChangeState.SUBMITTED and services.approval_summary(cr).valid == 0
    # and the operator who flipped it cannot be the one to approve it again
    operator.groups.add(*type(approver.groups.first()).objects.filter(name=Role.APPROVER))
    operator = type(operator).objects.get(pk=operator.pk)
    with pytest.raises(PermissionDenied, match="retention/drift policy change"):
        services.approve(cr, actor=operator)


# --- upgrade: open requests move to the new hash, keeping their approvals -----------------------------


def test_migration_moves_open_requests_to_the_new_hash_and_keeps_their_approvals(
    prod_resource, prod_cluster, operator, approver
):
    from importlib import import_module

    from django.apps import apps

    from federation.approvals.content import request_content_hash

    migration = import_module("federation.approvals.migrations.0003_secgate_approved_hash")
    cr = submitted(prod_resource, operator)
    old = cr.proposed_revision.content_hash  # what the hash was before this change
    ChangeRequest.objects.filter(pk=cr.pk).update(proposed_hash=old)
    cr.approvals.create(approver=approver, approver_name="anna-approver", decision="approve", content_hash=old)
    finished = submitted(FederatedResource.objects.get(pk=prod_resource.pk), operator, kind=ChangeKind.DELETE)
    ChangeRequest.objects.filter(pk=finished.pk).update(state=ChangeState.CANCELLED, proposed_hash="old")

    migration.forward(apps, None)

    cr = ChangeRequest.objects.get(pk=cr.pk)
    assert cr.proposed_hash == request_content_hash(cr) != old
    assert services.approval_summary(cr).valid == 1
    assert ChangeRequest.objects.get(pk=finished.pk).proposed_hash == "old", "finished requests are left alone"


def test_the_inbox_leaves_out_requests_proposing_the_approvers_own_revisions(
    dev_resource, make_resource, operator, bob, carol
):
    from federation.approvals.selectors import inbox_for

    edit(dev_resource, bob, 5)  # B's revision 2 of web
    web = submitted(FederatedResource.objects.get(pk=dev_resource.pk), operator)
    api = submitted(make_resource("api", ("dev-a",)), operator)  # nothing of B's in it
    assert list(inbox_for(carol)) == [web, api]
    assert list(inbox_for(bob)) == [api]


def test_approving_content_that_changed_unseen_is_refused_and_the_diff_refreshed(
    dev_resource, dev_cluster, operator, approver
):
    resource = applied(dev_resource, operator, approver)
    mark_present(resource, dev_cluster)
    cr = submitted(resource, operator, kind=ChangeKind.DELETE)
    assert [d["action"] for d in cr.diffs] == ["delete"]
    FederatedResource.objects.filter(pk=resource.pk).update(retention=Retention.ORPHAN)  # around the service
    with pytest.raises(services.TransitionError, match="changed while you were reviewing it"):
        services.approve(cr, actor=approver)
    cr.refresh_from_db()
    assert cr.state == ChangeState.SUBMITTED and not cr.approvals.filter(decision="approve").exists()
    assert [d["action"] for d in cr.diffs] == ["orphan"]
    assert services.approve(cr, actor=approver).state == ChangeState.APPLYING


def test_a_revisions_author_cannot_approve_the_reconcile_that_spreads_it_unreviewed(
    dev_resource, operator, bob, carol, admin_user
):
    """An emergency apply sends bob's revision out with no approver; a cluster joining its placement
    then opens a reconcile request (by the system) re-applying it there: bob wrote what it spreads.
    Once approvers approved that content, its author may approve a reconcile of it."""
    resource = applied(dev_resource, operator, carol)
    edit(resource, bob, 7)
    services.emergency_apply(FederatedResource.objects.get(pk=resource.pk), actor=admin_user, reason="outage")
    resource = FederatedResource.objects.get(pk=resource.pk)
    cr = services.submit(
        services.create_change_request(resource, actor=None, kind=ChangeKind.RECONCILE, snapshot=False),
        actor=operator,
    )
    with pytest.raises(PermissionDenied, match=r"You wrote part of what CR-\d+ would apply \(revision 2\)"):
        services.approve(cr, actor=bob)
    assert services.approve(cr, actor=carol).state == ChangeState.APPLYING
    services.sync_change_request(cr)
    # reviewed content: bob's next revision goes out through carol's approval; a reconcile of it is his to approve
    edit(resource, bob, 8)
    resource = applied(resource, bob, carol)
    cr = services.submit(
        services.create_change_request(resource, actor=None, kind=ChangeKind.RECONCILE, snapshot=False),
        actor=operator,
    )
    assert services.approve(cr, actor=bob).state == ChangeState.APPLYING


def test_only_fedportal_opens_a_reconcile_request(dev_resource, operator, admin_user):
    """An operator's reconcile request re-applied the propagated revision to every cluster at once,
    past an aborted rollout's remaining waves (a reviewer's finding): people cannot open one."""
    resource = applied(dev_resource, operator, admin_user)
    for actor in (operator, admin_user):
        with pytest.raises(services.TransitionError, match="opened by FedPortal"):
            services.create_change_request(resource, actor=actor, kind=ChangeKind.RECONCILE)
    assert not ChangeRequest.objects.filter(kind=ChangeKind.RECONCILE).exists()
    assert services.create_change_request(resource, actor=None, kind=ChangeKind.RECONCILE, snapshot=False).pk


def test_a_request_for_the_propagated_revision_is_allowed_while_a_cluster_lacks_it(
    dev_resource, prod_cluster, operator, admin_user
):
    """An aborted staged rollout leaves its later waves' clusters on the old revision while the
    resource says it propagated the new one: "already what the clusters have" refused the request
    that would finish it (a reviewer's finding)."""
    resource = applied(dev_resource, operator, admin_user)
    revision = resource.propagated_revision
    with pytest.raises(services.TransitionError, match="already what the clusters have"):
        services.create_change_request(resource, actor=operator)
    older = edit(resource, operator, 9)  # a revision no cluster has: stand-in for the one prod kept
    FederatedResource.objects.filter(pk=resource.pk).update(current_revision=revision)
    PropagatedVersion.objects.create(
        resource=resource, cluster=prod_cluster, revision=older, status="OK", applied_manifest={"kind": "Deployment"}
    )
    resource = FederatedResource.objects.get(pk=resource.pk)
    cr = services.create_change_request(resource, actor=operator)
    assert cr.proposed_revision == revision
    PropagatedVersion.objects.filter(cluster=prod_cluster).update(status="Removed", applied_manifest=None)
    with pytest.raises(services.TransitionError, match="already what the clusters have"):
        services.create_change_request(FederatedResource.objects.get(pk=resource.pk), actor=operator)


def test_the_request_page_shows_approvers_the_settings_changed_since_they_were_last_approved(
    client, dev_resource, operator, approver
):
    """A drift policy switched to Enforce showed "No change" to the approver, who approved FedPortal
    writing to clusters on its own (a reviewer's finding); a strategy dropping its waves likewise."""
    resource = applied(dev_resource, operator, approver)
    set_settings(resource, operator, drift_policy=DriftPolicy.ENFORCE)
    federation_services.set_rollout_strategy(
        FederatedResource.objects.get(pk=resource.pk),
        {"waves": [{"name": "canary", "clusters": ["dev-a"]}]},
        actor=operator,
    )
    cr = submitted(FederatedResource.objects.get(pk=resource.pk), operator)
    client.force_login(approver)
    page = client.get(reverse("approvals:change_detail", args=[cr.pk])).content.decode()
    section = page.split('id="cr-settings-changes"', 1)[1].split("</section>", 1)[0]
    assert "<td>Drift policy</td><td>Report</td><td><strong>Enforce</strong></td><td>otto-operator" in section
    assert "<td>Rollout strategy</td><td>no waves: every placed cluster at once" in section
    assert "<strong>1 wave(s): canary</strong>" in section
    # once approved and applied, the next request has nothing new to show
    services.sync_change_request(services.approve(cr, actor=approver))
    resource = FederatedResource.objects.get(pk=resource.pk)
    later = submitted(FederatedResource.objects.get(pk=edit(resource, operator, 5).resource_id), operator)
    assert (
        'id="cr-settings-changes"'
        not in client.get(reverse("approvals:change_detail", args=[later.pk])).content.decode()
    )
