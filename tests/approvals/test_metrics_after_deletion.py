"""/metrics' propagation counter and duration histogram never go down: the finished targets of a
resource deleted by an approved change request, and of an unjoined cluster, go with their rows but
stay counted (federation.outcome_totals). A drop would read as a counter reset to Prometheus, whose
``rate()`` then spikes."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from clusters.services import unjoin_cluster
from federation.approvals import services
from federation.approvals.choices import ChangeKind, ChangeState
from federation.choices import PropagationReason, RunState, TargetState
from federation.models import PropagationRun, PropagationTarget, RetiredTargetTotal
from tests.api.test_metrics import TOKEN, scrape
from tests.approvals.factories import draft
from tests.clusters.factories import ClusterFactory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("metrics_token"),
]

OUTCOME = "fedportal_propagation_outcomes_total"
HISTOGRAM = "fedportal_propagation_duration_seconds"


@pytest.fixture
def metrics_token():
    with override_settings(FEDPORTAL_METRICS_TOKEN=TOKEN, FEDPORTAL_METRICS_ALLOWED_NETWORKS=[]):
        yield


def finished_run(resource, clusters, *, seconds: float, reason=PropagationReason.OK, state=TargetState.DONE):
    started = timezone.now() - timedelta(minutes=5)
    run = PropagationRun.objects.create(
        resource=resource,
        revision=resource.current_revision,
        state=RunState.SUCCEEDED,
        started_at=started,
        finished_at=started + timedelta(seconds=seconds),
    )
    for cluster in clusters:
        PropagationTarget.objects.create(
            run=run, cluster=cluster, state=state, reason=reason, finished_at=started + timedelta(seconds=seconds)
        )
    return run


def propagation_samples(values: dict) -> dict:
    return {key: value for key, value in values.items() if key[0] == OUTCOME or key[0].startswith(HISTOGRAM)}


def assert_none_went_down(before: dict, after: dict) -> None:
    for key, value in before.items():
        assert after.get(key, 0) >= value, (key, value, after.get(key))


def test_deleting_a_resource_and_unjoining_a_cluster_keep_every_count(
    client, dev_resource, dev_cluster, operator, approver, admin_user
):
    other = ClusterFactory(name="dev-b", labels={"env": "dev"})
    finished_run(dev_resource, [dev_cluster, other], seconds=0.4)
    finished_run(dev_resource, [other], seconds=90, reason=PropagationReason.UPDATE_FAILED, state=TargetState.FAILED)
    before = propagation_samples(scrape(client))
    assert before[(OUTCOME, (("reason", "OK"), ("state", "done")))] == 2
    assert before[(OUTCOME, (("reason", "UpdateFailed"), ("state", "failed")))] == 1
    assert before[(f"{HISTOGRAM}_count", ())] == 3
    assert before[(f"{HISTOGRAM}_bucket", (("le", "0.5"),))] == 2
    assert before[(f"{HISTOGRAM}_bucket", (("le", "120.0"),))] == 3
    assert before[(f"{HISTOGRAM}_sum", ())] == pytest.approx(90.8)

    cr = services.approve(
        services.submit(draft(dev_resource, operator, kind=ChangeKind.DELETE), actor=operator), actor=approver
    )
    assert services.sync_change_request(cr).state == ChangeState.APPLIED
    assert not PropagationTarget.objects.exists()  # every target went with the resource
    after_delete = propagation_samples(scrape(client))
    assert_none_went_down(before, after_delete)
    assert after_delete[(f"{HISTOGRAM}_sum", ())] >= 90.8 - 1e-6

    # a cluster unjoined takes its targets (of another resource) with it
    again = draft_resource_on(other, operator)
    finished_run(again, [other], seconds=2)
    before_unjoin = propagation_samples(scrape(client))
    unjoin_cluster(other, actor=admin_user)
    assert not PropagationTarget.objects.exists()
    after_unjoin = propagation_samples(scrape(client))
    assert after_unjoin == before_unjoin
    assert RetiredTargetTotal.objects.filter(state=TargetState.FAILED, reason="UpdateFailed").get().count == 1


def draft_resource_on(cluster, operator):
    from federation import services as federation_services
    from tests.federation.factories import WEB_TEMPLATE, ftype

    return federation_services.create_resource(
        ftype("Deployment"), namespace="shop", name="api", template=WEB_TEMPLATE, placement={"clusters": [cluster.name]}
    )
