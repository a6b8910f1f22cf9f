"""Browser journey for the cluster registry (owned by the clusters work): log in, import a
kubeconfig, see the clusters with their versions once the real worker has probed them."""

import pytest
from playwright.sync_api import expect

from clusters.models import Cluster
from tests.utils import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_admin_imports_a_kubeconfig_and_sees_versions(page, live_server, login, admin_user, celery_worker, fleet):
    login(page, admin_user)
    page.click("nav >> text=Clusters")
    page.click("text=Import kubeconfig")
    page.fill("#id_kubeconfig_text", fleet.kubeconfig_path.read_text())
    page.click("text=Read contexts")
    page.wait_for_selector("text=Import chosen contexts")
    assert fleet.token("m127") not in page.content()
    page.select_option("#id_host_context", "host")
    page.fill("#id_labels", "env=e2e")
    page.click("text=Import chosen contexts")
    page.wait_for_url(f"{live_server.url}/clusters/")
    page.wait_for_selector("text=Imported 5 cluster(s)")

    wait_for(lambda: Cluster.objects.filter(state="Ready").count() == 5, timeout=60, message="5 Ready clusters")
    page.goto(f"{live_server.url}/clusters/")
    table = page.locator("#cluster-rows table").inner_text()
    for version in ("v1.29.4", "v1.27.3", "v1.28.2", "v1.30.1", "v1.31.0"):
        assert version in table
    assert table.count("Ready") >= 5

    page.fill("#id_version", "1.27")
    page.locator("#id_version").press("Enter")
    page.wait_for_url("**version=1.27**")
    expect(page.locator("#cluster-rows tbody tr")).to_have_count(1)
    assert "m127" in page.locator("#cluster-rows tbody").inner_text()

    page.click("#cluster-rows >> text=m127")
    page.wait_for_selector("text=Kubelet versions")
    assert "v1.26.5" in page.content() or "v1.27.3" in page.content()
    page.click("text=Poll now")
    page.wait_for_selector("#poll-progress >> text=Done:", timeout=30_000)
