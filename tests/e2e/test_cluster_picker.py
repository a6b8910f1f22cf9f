"""Issue 23 item 11: the placement picker is searchable by name or label, ticks every match in one
click and counts the ticked clusters live; the override row's cluster is a searchable text box."""

import pytest

from tests.clusters.factories import ClusterFactory

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_placement_picker_searches_ticks_all_matching_and_counts(page, live_server, login, operator):
    for n in range(30):
        ClusterFactory(name=f"eu-prod-{n:02}", labels={"env": "prod", "region": "eu"})
    for n in range(10):
        ClusterFactory(name=f"us-dev-{n:02}", labels={"env": "dev", "region": "us"})
    login(page, operator)
    page.goto(f"{live_server.url}/federation/new/")
    count = page.locator(".picker-count")
    assert count.inner_text() == "0 of 40 clusters ticked"
    page.fill(".picker-search", "env=dev")
    assert count.inner_text() == "0 of 40 clusters ticked · 10 match"
    assert page.locator("#id_clusters input:visible").count() == 10
    page.click("text=Tick all matching")
    assert count.inner_text() == "10 of 40 clusters ticked · 10 match"
    page.fill(".picker-search", "eu-prod-0")
    page.click("text=Tick all matching")
    assert count.inner_text() == "20 of 40 clusters ticked · 10 match"
    page.fill(".picker-search", "")
    checked = page.eval_on_selector_all("#id_clusters input:checked", "boxes => boxes.map(b => b.value)")
    assert sorted(checked) == sorted([f"us-dev-{n:02}" for n in range(10)] + [f"eu-prod-{n:02}" for n in range(10)])
    options = page.eval_on_selector_all("#override-clusters option", "os => os.map(o => o.value)")
    assert len(options) == 40 and page.get_attribute("#id_ov-0-cluster", "list") == "override-clusters"
