"""Browser journey for federation: an operator creates a federated Deployment with per-cluster
overrides through the forms (adding the override row with htmx), previews it and requests the
change; approvers approve it in their own sessions; the real worker propagates it and every
cluster's status arrives on the resource page."""

import pytest

from federation import propagation
from federation.approvals.models import ChangeRequest
from federation.models import FederatedResource, PropagationRun
from tests.browser_fixtures import PASSWORD
from tests.federation.factories import federate_namespace, register_fleet
from tests.utils import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MEMBERS = ["m127", "m128", "m130", "m131"]
TEMPLATE = """metadata:
  labels: {app: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "nginx:1.25"}
"""


def test_operator_creates_overrides_propagates_and_sees_every_cluster(
    browser, page, live_server, login, operator, approver, make_user, celery_worker, fleet
):
    register_fleet(fleet, MEMBERS)
    ns = federate_namespace("shop", MEMBERS)
    run = propagation.propagate_revision(ns)
    wait_for(lambda: PropagationRun.objects.filter(pk=run.pk, finished_at__isnull=False).exists(), timeout=60)

    login(page, operator)
    page.click("nav >> text=Federation")
    page.click("text=New resource")
    page.select_option("#id_type", label="Deployment (apps/v1)")
    page.fill("#id_namespace", "shop")
    page.fill("#id_name", "web")
    page.fill("#id_template_yaml", TEMPLATE)
    for name in MEMBERS:
        page.check(f"input[name=clusters][value={name}]")
    # first override row is there already; add a second one with htmx (no reload)
    page.fill("#id_ov-0-cluster", "m130")  # a searchable text box with the cluster names as suggestions
    page.fill("#id_ov-0-path", "/spec/template/spec/containers/0/image")
    page.fill("#id_ov-0-value", "nginx:1.27-alpine")
    page.click("text=Add override")
    page.wait_for_selector("#id_ov-1-path")
    assert page.input_value("#id_ov-TOTAL_FORMS") == "2"
    page.fill("#id_ov-1-cluster", "m131")
    page.fill("#id_ov-1-path", "/spec/replicas")
    page.fill("#id_ov-1-value", "3")
    page.click("button:has-text('Create')")
    page.wait_for_selector("text=Created Deployment shop/web")
    resource = FederatedResource.objects.get(name="web")
    assert {o["clusterName"] for o in resource.current_revision.overrides} == {"m130", "m131"}

    page.click("a.button:has-text('Preview')")
    page.wait_for_selector("[data-cluster=m130][data-action=create]")
    assert "nginx:1.27-alpine" in page.locator("[data-cluster=m130]").inner_text()
    page.click("a.button:has-text('Request change')")
    page.fill("#id_title", "Ship web with per-cluster overrides")
    page.click("button:has-text('Open draft')")
    page.click("button:has-text('Submit for approval')")
    page.wait_for_selector("#cr-state:has-text('Submitted')")
    request = ChangeRequest.objects.get(title="Ship web with per-cluster overrides")
    approvers = [approver, make_user("bea-approver", "approver")][: request.required_approvals]
    for person in approvers:
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        try:
            other = context.new_page()
            login(other, person, PASSWORD)
            other.goto(f"{live_server.url}/changes/{request.pk}/")
            other.fill("#approve-comment", f"approved by {person.username}")
            other.click("#approve-form button")
            other.wait_for_selector(f"#cr-panel :text('approved by {person.username}')")
        finally:
            context.close()

    page.goto(f"{live_server.url}/federation/{resource.pk}/")
    page.wait_for_selector("[data-condition=Propagated]", timeout=60_000)
    table = page.locator("#cluster-status").inner_text()
    for name in MEMBERS:
        assert name in table
    assert page.locator("#cluster-status [data-status=OK]").count() == 4
    assert (
        fleet.get_object("m130", "apps/v1", "Deployment", "shop", "web")["spec"]["template"]["spec"]["containers"][0][
            "image"
        ]
        == "nginx:1.27-alpine"
    )
    assert fleet.get_object("m131", "apps/v1", "Deployment", "shop", "web")["spec"]["replicas"] == 3
