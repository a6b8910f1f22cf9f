"""Issue 21 item 3: the Lifecycle page shows Machines changing phase while an approved upgrade rolls
(real worker, simulator with a Cluster API management cluster), without a reload."""

import pytest
from playwright.sync_api import expect

from clusters.models import Cluster
from clusters.probing import probe_cluster
from clusters.services import register_cluster
from drift import upgrades
from federation.approvals import services as approvals
from federation.approvals.choices import ChangeState

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# A Machine stays Provisioning (and Deleting) for machineSeconds. The page shows what the upgrade's
# check recorded (sync_change_request_task, every RECHECK_SECONDS = 3 s) and polls every 2 s, so a
# phase must last longer than both for the page to be sure to show it: with 2 s, it was missed.
FLEET = {
    "defaults": {"machineSeconds": 7},
    "clusters": [
        {"name": "mgmt", "role": "host", "version": "v1.30.2", "capi": True},
        {
            "name": "w1",
            "version": "v1.29.4",
            "managedBy": "mgmt",
            "labels": {"env": "dev"},
            "machineDeployments": [{"name": "md-0", "replicas": 1}],
        },
    ],
}


def test_lifecycle_page_shows_machines_changing_phase(
    page, live_server, login, fleet_factory, celery_worker, viewer, operator, approver
):
    fleet = fleet_factory(FLEET)
    rows = [
        register_cluster(
            name=name,
            api_server=fleet.url(name),
            role="host" if name == "mgmt" else "member",
            labels=fleet.labels(name),
            token=fleet.token(name),
            verify=False,
            probe=False,
        )
        for name in ("mgmt", "w1")
    ]
    for row in rows:
        probe_cluster(row)
    login(page, viewer)
    page.goto(f"{live_server.url}/clusters/lifecycle/")
    machines = page.locator("section[data-cluster=w1] .machine-phase")
    expect(machines).to_have_count(2)
    expect(page.locator("section[data-cluster=w1] .lifecycle-machines")).not_to_contain_text("Provisioning")
    page.evaluate("window.notReloaded = true")
    cr = upgrades.request_upgrade(Cluster.objects.get(name="w1"), "v1.30.2", actor=operator)
    assert approvals.approve(cr, actor=approver).state == ChangeState.APPLYING
    table = page.locator("section[data-cluster=w1] .lifecycle-machines")
    expect(table).to_contain_text("Provisioning", timeout=30_000)
    expect(table).to_contain_text("Deleting", timeout=30_000)
    expect(table).not_to_contain_text("v1.29.4", timeout=60_000)
    expect(table).not_to_contain_text("Deleting", timeout=30_000)
    expect(page.locator("section[data-cluster=w1] .lifecycle-cp")).to_contain_text("v1.30.2")
    assert page.evaluate("window.notReloaded") is True
