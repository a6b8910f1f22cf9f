"""An approved unjoin is carried out on the approval's authority: its author leaving the admin role
(or FedPortal) meanwhile must not leave it Applying for ever, nor stop the periodic sweep of the
other Applying requests (a security review's finding)."""

import pytest
from django.contrib.auth.models import Group

from clusters.models import Cluster
from federation.approvals import services
from federation.approvals.choices import ChangeKind, ChangeState
from federation.approvals.models import ChangeRequest
from fedportal.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_an_approved_unjoin_finishes_after_its_author_left_the_admin_role(dev_cluster, approver, make_user):
    author = make_user("ada-admin", "admin")
    cr = services.create_change_request(kind=ChangeKind.UNJOIN, cluster=dev_cluster, actor=author)
    cr = services.approve(services.submit(cr, actor=author), actor=approver)
    author.groups.remove(Group.objects.get(name="admin"))

    cr = services.sync_change_request(cr)

    assert cr.state == ChangeState.APPLIED
    assert not Cluster.objects.filter(pk=dev_cluster.pk).exists()
    event = AuditEvent.objects.filter(action="cluster.unjoin").get()
    assert f"(CR-{cr.pk}, requested by ada-admin and approved)" in event.summary


def test_one_request_that_cannot_sync_does_not_stop_the_sweep(dev_cluster, approver, make_user, monkeypatch):
    author = make_user("ada-admin", "admin")
    cr = services.create_change_request(kind=ChangeKind.UNJOIN, cluster=dev_cluster, actor=author)
    cr = services.approve(services.submit(cr, actor=author), actor=approver)
    ChangeRequest.objects.filter(pk=cr.pk).update(state=ChangeState.APPLYING)
    real_sync = services.sync_change_request
    synced = []

    def sync_failing_first(pk):
        synced.append(pk)
        if len(synced) == 1:
            raise RuntimeError("a request that cannot finish")
        return real_sync(pk)

    other = services.create_change_request(kind=ChangeKind.UNJOIN, cluster=dev_cluster, actor=author)
    ChangeRequest.objects.filter(pk=other.pk).update(state=ChangeState.APPLYING)
    monkeypatch.setattr(services, "sync_change_request", sync_failing_first)

    services.sync_running_requests()

    assert len(synced) == 2


def test_an_unjoin_whose_author_left_the_admin_role_before_approval_is_not_approved(dev_cluster, approver, make_user):
    """Approving is what carries an unjoin out: it needs an admin's request at that moment."""
    from federation.approvals.services import TransitionError

    author = make_user("ada-admin", "admin")
    cr = services.submit(
        services.create_change_request(kind=ChangeKind.UNJOIN, cluster=dev_cluster, actor=author), actor=author
    )
    author.groups.remove(Group.objects.get(name="admin"))

    with pytest.raises(TransitionError, match="no longer holds the admin role"):
        services.approve(cr, actor=approver)

    assert ChangeRequest.objects.get(pk=cr.pk).state == ChangeState.SUBMITTED
    assert Cluster.objects.filter(pk=dev_cluster.pk).exists()
