"""Issue 23 item 10: bulk labels on the cluster list — the ticked clusters or every cluster the
filter matches, one audited action, admins only, bad input refused with nothing changed."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from clusters.models import Cluster
from clusters.services.bulk_labels import bulk_label_clusters
from fedportal.models import AuditEvent
from tests.clusters.factories import ClusterFactory

pytestmark = pytest.mark.django_db
URL = reverse("clusters:cluster_bulk_label")


@pytest.fixture
def fleet_of_five():
    return [ClusterFactory(name=f"eu-{n}", labels={"env": "prod", "old": "x"}) for n in range(3)] + [
        ClusterFactory(name=f"us-{n}", labels={"env": "dev"}) for n in range(2)
    ]


def labels() -> dict:
    return dict(Cluster.objects.order_by("name").values_list("name", "labels"))


def test_service_adds_and_removes_and_audits_each_changed_cluster(admin_user, fleet_of_five):
    changed = bulk_label_clusters(
        Cluster.objects.filter(name__startswith="eu-"), add={"tier": "gold"}, remove=["old"], actor=admin_user
    )
    assert changed == ["eu-0", "eu-1", "eu-2"]
    assert labels()["eu-1"] == {"env": "prod", "tier": "gold"} and labels()["us-0"] == {"env": "dev"}
    events = AuditEvent.objects.filter(action="cluster.labels").order_by("id")
    assert [e.cluster for e in events] == ["eu-0", "eu-1", "eu-2"]
    assert events[0].before == {"labels": {"env": "prod", "old": "x"}} and events[0].after == {
        "labels": {"env": "prod", "tier": "gold"}
    }
    assert bulk_label_clusters(Cluster.objects.filter(name="eu-0"), add={"tier": "gold"}, actor=admin_user) == []


def test_service_refuses_non_admins_and_bad_labels(operator, admin_user, fleet_of_five):
    with pytest.raises(PermissionDenied):
        bulk_label_clusters(Cluster.objects.all(), add={"a": "b"}, actor=operator)
    with pytest.raises(ValidationError):
        bulk_label_clusters(Cluster.objects.all(), add={"bad key!": "b"}, actor=admin_user)
    with pytest.raises(ValidationError):
        bulk_label_clusters(Cluster.objects.all(), add={"a": "b"}, remove=["a"], actor=admin_user)
    assert not AuditEvent.objects.filter(action="cluster.labels").exists()


def test_ticked_clusters_get_the_labels_and_the_list_keeps_its_filter(client, admin_user, fleet_of_five):
    client.force_login(admin_user)
    picked = [str(Cluster.objects.get(name=n).pk) for n in ("eu-0", "us-1")]
    response = client.post(URL, {"ids": picked, "add": "tier=gold", "q": "u"})
    assert response.status_code == 302 and response["Location"] == reverse("clusters:cluster_list") + "?q=u"
    assert {n for n, lab in labels().items() if lab.get("tier") == "gold"} == {"eu-0", "us-1"}


def test_every_cluster_matching_the_filter(client, admin_user, fleet_of_five):
    client.force_login(admin_user)
    response = client.post(URL, {"all_matching": "1", "label": "env=prod", "add": "region=eu", "remove": "old"})
    assert response.status_code == 302
    assert {n for n, lab in labels().items() if lab.get("region") == "eu"} == {"eu-0", "eu-1", "eu-2"}
    assert all("old" not in lab for lab in labels().values())


@pytest.mark.parametrize(
    "data",
    [
        {"add": "tier=gold"},  # nothing ticked, not "all matching"
        {"ids": ["1"], "add": "", "remove": ""},  # nothing to do
        {"ids": ["1"], "add": "no-equals-sign"},
        {"ids": ["²"], "add": "a=b"},  # not an id ("²" passes str.isdigit())
        {"ids": ["99999999999999999999999"], "add": "a=b"},  # past a 64-bit id: was a 500 (OverflowError)
        {"ids": ["9223372036854775808"], "add": "a=b"},  # 2**63
        {"ids": ["0"], "add": "a=b"},
        {"ids": ["9" * 5000], "add": "a=b"},  # past int()'s 4,300 digits: a ValueError, a 500
        {"all_matching": "1", "version": "banana", "add": "a=b"},
    ],
)
def test_bad_bulk_input_changes_nothing(client, admin_user, fleet_of_five, data):
    before = labels()
    client.force_login(admin_user)
    response = client.post(URL, data, follow=True)
    assert response.status_code == 200
    assert labels() == before
    assert any(m.level_tag == "error" for m in response.context["messages"])


def test_only_admins_see_and_use_the_bulk_form(client, operator, admin_user, fleet_of_five):
    client.force_login(operator)
    assert 'id="bulk-labels"' not in client.get(reverse("clusters:cluster_list")).content.decode()
    assert client.post(URL, {"all_matching": "1", "add": "a=b"}).status_code == 403
    client.force_login(admin_user)
    body = client.get(reverse("clusters:cluster_list")).content.decode()
    assert 'id="bulk-labels"' in body and body.count('name="ids"') == 5


def test_bulk_relabelled_clusters_are_reconciled_like_an_edited_one(admin_user, fleet_of_five):
    """Placement by label follows a bulk change as it follows one cluster's edit: the membership
    listeners (federation's reconcile of joined/relabelled clusters) hear of every changed cluster."""
    from clusters.services.registry import register_membership_listener, unregister_membership_listener

    heard = []
    listener = lambda cluster, reason: heard.append((cluster.name, reason))  # noqa: E731
    register_membership_listener(listener)
    try:
        bulk_label_clusters(Cluster.objects.filter(name__startswith="us-"), add={"tier": "gold"}, actor=admin_user)
        bulk_label_clusters(Cluster.objects.filter(name="us-0"), add={"tier": "gold"}, actor=admin_user)  # no change
    finally:
        unregister_membership_listener(listener)
    assert heard == [("us-0", "labels changed"), ("us-1", "labels changed")]
