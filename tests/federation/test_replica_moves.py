"""The change request's per-cluster diff shows replica moves (against the live objects)."""

import pytest

from federation import propagation, services
from tests.approvals.factories import draft
from tests.federation.factories import drain, federate_namespace, register_fleet, web_deployment

pytestmark = pytest.mark.django_db


def test_change_request_diff_shows_replicas_moving_per_cluster(fleet, operator):
    register_fleet(fleet, ["m128", "m130"])
    drain(propagation.propagate_revision(federate_namespace("shop", ["m128", "m130"])))
    resource = web_deployment(scheduling={"totalReplicas": 4, "rebalance": True, "clusters": {"*": {"weight": 1}}})
    drain(propagation.propagate_revision(resource))
    revision = services.update_resource(
        resource,
        template=resource.current_revision.template,
        placement={},
        overrides=[],
        actor=operator,
        scheduling={"totalReplicas": 4, "rebalance": True, "clusters": {"m128": {"weight": 3}, "*": {"weight": 1}}},
    )
    cr = draft(resource, operator, revision=revision)
    moves = {row["cluster"]: (row["replicas_before"], row["replicas"]) for row in cr.diffs}
    assert moves == {"m128": (2, 3), "m130": (2, 1)}
    from django.template.loader import render_to_string

    from federation.preview_groups import group_previews

    html = render_to_string("approvals/changerequest_detail.html", {"cr": cr, "diff_groups": group_previews(cr.diffs)})
    assert "(replicas 2 → 3)" in html and "(replicas 2 → 1)" in html
