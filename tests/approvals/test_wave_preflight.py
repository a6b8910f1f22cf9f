"""A staged rollout's wave naming a cluster that is not registered (a typo) is a preflight warning:
otherwise the cluster meant silently lands in a later wave, or in ``rest``, with no approval of its own."""

import pytest

from federation import services as federation_services
from tests.approvals.factories import draft
from tests.clusters.factories import ClusterFactory

pytestmark = pytest.mark.django_db


def test_a_wave_naming_an_unregistered_cluster_is_a_warning(dev_cluster, make_resource, operator):
    ClusterFactory(name="prod-1", labels={"env": "dev"})
    ClusterFactory(name="prod-2", labels={"env": "dev"})
    resource = make_resource("web", ("dev-a", "prod-1", "prod-2"))
    strategy = {
        "waves": [
            {"name": "canary", "clusters": ["dev-a"]},
            {"name": "prod", "clusters": ["prod-1", "prdo-2"], "requireApproval": True},
        ]
    }
    federation_services.set_rollout_strategy(resource, strategy, actor=operator)
    resource.refresh_from_db()
    cr = draft(resource, operator)
    warnings = [p for p in cr.preflight if p["cluster_name"] == "prdo-2"]
    assert warnings == [
        {
            "cluster_name": "prdo-2",
            "severity": "warning",
            "message": "Wave prod names prdo-2, which is not a registered cluster (a typo?): the cluster meant goes "
            "to a later wave, or to 'rest', which runs without an approval of its own.",
        }
    ]
    assert not [
        p for p in cr.preflight if p["cluster_name"] in ("dev-a", "prod-1") and "not a registered" in p["message"]
    ]


def test_no_strategy_no_warning(dev_cluster, make_resource, operator):
    cr = draft(make_resource("web", ("dev-a",)), operator)
    assert not [p for p in cr.preflight if "not a registered cluster" in p["message"]]
