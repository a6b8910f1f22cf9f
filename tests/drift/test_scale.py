"""1,000 clusters × 200 federated resources: fixed queries, seconds not minutes, cached until inputs change."""

import time

import pytest
from django.urls import reverse

from clusters.models import Cluster
from drift import compat, selectors
from federation.services import create_resource
from tests.drift.conftest import deployment_type

pytestmark = pytest.mark.django_db


@pytest.fixture
def big_fleet():
    Cluster.objects.bulk_create(
        [Cluster(name="host", api_server="https://host.example:6443", role="host", server_version="v1.29.1")]
        + [
            Cluster(
                name=f"c{i:04d}",
                api_server=f"https://c{i}.example:6443",
                server_version=f"v1.{25 + i % 7}.{i % 5}",
                labels={"env": "prod" if i % 2 else "dev"},
                kubelet_versions={f"n{i}": f"v1.{24 + i % 7}.0"},
            )
            for i in range(999)
        ]
    )
    ftype = deployment_type()
    for i in range(200):
        pod = {"containers": [{"name": "app", "image": f"app:{i}"}]}
        if i % 4 == 0:
            pod["initContainers"] = [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]
        create_resource(
            ftype,
            namespace="default",
            name=f"app-{i}",
            template={
                "spec": {
                    "selector": {"matchLabels": {"app": f"a{i}"}},
                    "template": {"metadata": {"labels": {"app": f"a{i}"}}, "spec": pod},
                }
            },
            placement={"clusterSelector": {}},
        )


def test_pages_at_fleet_scale(viewer_client, big_fleet, django_assert_max_num_queries):
    compat.clear_cache()
    started = time.perf_counter()
    with django_assert_max_num_queries(10):
        report, _ = selectors.fleet_compliance()
    cold = time.perf_counter() - started
    assert report.total == 1000 and report.incompatible_cells > 0
    assert cold < 30, f"compliance over 1,000 × 200 took {cold:.1f}s"
    for name, limit in (("drift:skew_matrix", 8), ("drift:compat_matrix", 10), ("drift:compliance_report", 12)):
        with django_assert_max_num_queries(limit):
            started = time.perf_counter()
            response = viewer_client.get(reverse(name))
            elapsed = time.perf_counter() - started
        assert response.status_code == 200
        assert elapsed < 15, f"{name} took {elapsed:.1f}s"
    # cached: a second compliance read does no compute
    calls = []
    original = selectors.compat_counts_by_cluster
    selectors.compat_counts_by_cluster = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        selectors.fleet_compliance()
        assert calls == []
        Cluster.objects.filter(name="c0001").update(server_version="v1.31.0")
        selectors.fleet_compliance()
        assert calls == [1]  # an input changed: recomputed
    finally:
        selectors.compat_counts_by_cluster = original
