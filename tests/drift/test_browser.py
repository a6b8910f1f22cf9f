"""Browser journey through the drift pages (Playwright + Debian chromium, the e2e harness's fixtures)."""

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_drift_matrix_heatmap_cell_opens_pair_and_csv_downloads(page, login, live_server, viewer, sim_fleet):  # noqa: F811
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    login(page, viewer)
    page.click("nav.mainnav >> text=Drift")
    page.wait_for_selector("#skew-heatmap .main-svg")  # plotly drew the heatmap (served locally)
    # a red cell of the clickable table: host vs m25 (P0)
    page.click("details.drift-grid-box summary")
    page.click("table.drift-grid a[title='host vs m25']")
    page.wait_for_selector("#pair-detail .drift-pair-detail")
    assert "P0" in page.inner_text("#pair-detail")
    assert page.url.rstrip("/").endswith("/drift")  # htmx swap, no navigation
    # clicking the plotly heatmap itself opens a pair too
    page.evaluate("document.getElementById('pair-detail').innerHTML = ''")
    box = page.locator("#skew-heatmap .nsewdrag").first.bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.6)
    page.wait_for_selector("#pair-detail .drift-pair-detail")
    with page.expect_download() as download:
        page.click("text=Export CSV")
    path = download.value.path()
    text = open(path, encoding="utf-8-sig").read()
    assert text.startswith("Cluster,Version") and "m25" in text
    page.click("text=Version history")
    page.wait_for_selector("#version-distribution .main-svg")
    assert errors == []


def test_compat_red_cell_and_compliance_report_csv(page, login, live_server, viewer, sim_fleet):  # noqa: F811
    from federation.services import create_resource
    from tests.drift.conftest import deployment_type

    pod = {
        "containers": [{"name": "app", "image": "nginx"}],
        "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}],
    }
    create_resource(
        deployment_type(),
        namespace="default",
        name="web",
        template={
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod},
            }
        },
        placement={"clusterSelector": {}},
    )
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    login(page, viewer)
    page.goto(f"{live_server.url}/drift/compat/")
    page.click("td.compat-incompatible a[title*='on m26']")
    page.wait_for_selector("#compat-detail .compat-detail")
    detail = page.inner_text("#compat-detail")
    assert "spec.template.spec.initContainers[0].restartPolicy" in detail and "v1.28" in detail
    from drift.services import take_compliance_snapshot

    take_compliance_snapshot()
    page.goto(f"{live_server.url}/drift/compliance/")
    page.wait_for_selector("#compliance-trend .main-svg")
    assert "api_compat" in page.inner_text("table.compliance-clusters")
    with page.expect_download() as download:
        page.click("text=Export CSV")
    text = open(download.value.path(), encoding="utf-8-sig").read()
    assert text.startswith("Cluster,Role,Version,Score")
    assert errors == []
