"""deploy/grafana/fedportal.json only queries metrics that /metrics serves."""

import json
import re
from pathlib import Path

import pytest
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "fedportal.json"


@pytest.mark.django_db
@override_settings(FEDPORTAL_METRICS_TOKEN="t")
def test_every_dashboard_query_names_a_served_metric(client):
    from tests.clusters.factories import ClusterFactory

    ClusterFactory(name="east")
    text = client.get("/metrics", headers={"Authorization": "Bearer t"}).content.decode()
    served = set()
    for family in text_string_to_metric_families(text):  # families without samples yet count too
        suffixes = {"histogram": ("_bucket", "_count", "_sum"), "counter": ("_total",)}.get(family.type, ("",))
        served |= {family.name + suffix for suffix in suffixes}
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "fedportal" and len(dashboard["panels"]) >= 10
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\bfedportal_[a-z_]+", target["expr"])
    }
    assert used and used <= served, sorted(used - served)
