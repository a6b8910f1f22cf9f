"""Issue 23 item 5: pages refresh their live parts by themselves, keeping what the user typed and
ticked: the cluster list shows a recovered cluster, the resource page a new revision, the change
request page its new state, all without a reload."""

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
