"""A run whose clusters a newer run of the same resource targets while it is in flight (a rollout
paused, then rolled back, as a batch was applying) does not record over the newer run: its targets
end Superseded and the PropagatedVersion keeps the newer run's record, so drift detection compares
the cluster with what was decided last."""

import pytest

from federation import propagation, services
from federation.models import PropagatedVersion, PropagationTarget
from federation.propagation import worker
from tests.federation.factories import drain, federate_namespace, register_fleet, web_deployment

pytestmark = pytest.mark.django_db


def test_a_run_superseded_while_applying_leaves_the_newer_runs_record(fleet, monkeypatch):
    register_fleet(fleet, ["m128"])
    drain(propagation.propagate_revision(federate_namespace("shop", ["m128"])))
    resource = web_deployment(placement={"clusters": ["m128"]})
    drain(propagation.propagate_revision(resource))
    first = resource.current_revision
    services.update_resource(
        resource,
        template={**resource.current_revision.template, "metadata": {"labels": {"v": "2"}}},
        placement={"clusters": ["m128"]},
    )
    resource.refresh_from_db()
    older = propagation.propagate_revision(resource)  # revision 2, about to be applied
    newer_runs = []
    record = worker.record_steps

    def rolled_back_meanwhile(run, steps, *, last=False):
        # the older run's apply has happened; before it records, a rollback sends revision 1 again
        if run.pk == older.pk and not newer_runs:
            newer_runs.append(propagation.propagate_revision(resource, revision=first))
        return record(run, steps, last=last)

    monkeypatch.setattr(worker, "record_steps", rolled_back_meanwhile)
    drain(older)
    target = PropagationTarget.objects.get(run=older)
    assert (target.state, target.message) == ("done", "Superseded by a newer propagation run.")
    pv = PropagatedVersion.objects.get(resource=resource)
    assert pv.revision_id != older.revision_id  # not recorded as holding what the rollback undoes
    drain(newer_runs[0])
    pv.refresh_from_db()
    assert pv.revision_id == first.pk and pv.status == "OK"
