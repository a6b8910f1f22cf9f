"""Issue 23 item 5: pages refresh their live parts by themselves, keeping what the user typed and
ticked: the cluster list shows a recovered cluster, the resource page a new revision, the change
request page a new approval (keeping the typed comment), the cluster page and the dashboard a
recovered cluster, all without a reload."""

import pytest
from playwright.sync_api import expect

from clusters.models import Cluster
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import web_deployment

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_cluster_list_refreshes_by_itself_and_keeps_ticks(page, live_server, login, admin_user):
    ClusterFactory(name="east", state="Offline")
    ClusterFactory(name="west")
    login(page, admin_user)
    page.goto(f"{live_server.url}/clusters/")
    page.wait_for_selector("#cluster-rows >> text=Offline")
    page.fill("#id_bulk_add", "tier=gold")
    west = Cluster.objects.get(name="west").pk
    page.check(f"#sel-{west}")
    page.evaluate("window.notReloaded = true")
    Cluster.objects.filter(name="east").update(state="Ready")
    expect(page.locator("#cluster-rows")).not_to_contain_text("Offline", timeout=25_000)
    assert page.evaluate("window.notReloaded") is True
    assert page.is_checked(f"#sel-{west}") and page.input_value("#id_bulk_add") == "tier=gold"


def test_resource_page_shows_a_new_revision_without_a_reload(page, live_server, login, viewer, operator):
    ClusterFactory(name="east")
    resource = web_deployment(placement={"clusters": ["east"]})
    login(page, viewer)
    page.goto(f"{live_server.url}/federation/{resource.pk}/")
    page.wait_for_selector("#resource-status")
    page.evaluate("window.notReloaded = true")
    from federation import services

    services.update_resource(
        resource,
        template={**resource.current_revision.template, "spec": {"replicas": 3}},
        placement={"clusters": ["east"]},
        actor=operator,
    )
    page.wait_for_selector("#resource-status dd a:text-is('2')", timeout=25_000)
    assert page.evaluate("window.notReloaded") is True


def test_change_request_page_shows_another_approval_and_keeps_the_typed_comment(
    page, live_server, login, operator, approver, make_user
):
    from federation.approvals import services as approvals
    from tests.approvals.factories import submitted
    from tests.federation.factories import namespace_everywhere

    ClusterFactory(name="prod-a", labels={"env": "prod"}, state="NotReady")
    namespace_everywhere("shop")
    resource = web_deployment(placement={"clusters": ["prod-a"]}, actor=operator)
    cr = submitted(resource, operator)
    assert cr.required_approvals == 2
    login(page, approver)
    page.goto(f"{live_server.url}/changes/{cr.pk}/")
    expect(page.locator("#cr-approvals h2")).to_contain_text("0 of 2")
    page.fill("#approve-comment", "checking the replicas first")
    page.evaluate("window.notReloaded = true")
    approvals.approve(cr, actor=make_user("bea-approver", "approver"), comment="fine by me")
    expect(page.locator("#cr-approvals h2")).to_contain_text("1 of 2", timeout=25_000)
    expect(page.locator("#cr-approvals")).to_contain_text("fine by me")
    assert page.evaluate("window.notReloaded") is True
    assert page.input_value("#approve-comment") == "checking the replicas first"


def test_cluster_page_and_dashboard_show_a_recovered_cluster_without_a_reload(page, live_server, login, viewer):
    east = ClusterFactory(name="east", state="Offline")
    login(page, viewer)
    expect(page.locator("#clusters-panel")).to_contain_text("Offline 1")
    page.evaluate("window.notReloaded = true")
    Cluster.objects.filter(pk=east.pk).update(state="Ready")
    expect(page.locator("#clusters-panel")).to_contain_text("Ready 1", timeout=30_000)
    expect(page.locator("#clusters-panel")).to_contain_text("Offline 0")
    assert page.evaluate("window.notReloaded") is True

    Cluster.objects.filter(pk=east.pk).update(state="Offline")
    page.goto(f"{live_server.url}/clusters/{east.pk}/")
    expect(page.locator("#cluster-status")).to_contain_text("Offline")
    page.evaluate("window.notReloaded = true")
    Cluster.objects.filter(pk=east.pk).update(state="Ready")
    expect(page.locator("#cluster-status")).not_to_contain_text("Offline", timeout=25_000)
    expect(page.locator("#cluster-status")).to_contain_text("Ready")
    assert page.evaluate("window.notReloaded") is True
