"""End to end through the real Celery worker and the fleet simulator (issue 23, item 4): a cluster
registered later gets what an already propagated label placement selects, and loses it when its
labels move out of the placement."""

import pytest

from clusters import services as cluster_services
from federation import propagation, services
from federation.choices import PropagationReason
from federation.models import PropagatedVersion, PropagationRun
from fedportal.models import AuditEvent
from tests.federation.factories import ftype, register_fleet, web_deployment
from tests.utils import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
WEB = {"clusterSelector": {"matchLabels": {"tier": "web"}}}


def status(resource, cluster):
    return (
        PropagatedVersion.objects.filter(resource=resource, cluster__name=cluster)
        .values_list("status", flat=True)
        .first()
    )


def finished(resource):
    return (
        PropagationRun.objects.filter(resource=resource).exists()
        and not PropagationRun.objects.filter(resource=resource, finished_at__isnull=True).exists()
    )


def test_a_cluster_registered_later_gets_the_label_placed_resource_and_loses_it_when_relabelled(fleet, celery_worker):
    clusters = register_fleet(fleet, ["m128"])
    clusters["m128"].labels = {"tier": "web"}
    clusters["m128"].save()
    ns = services.create_resource(ftype("Namespace"), namespace="", name="shop", template={}, placement=WEB)
    web = web_deployment(placement=WEB)
    for resource in (ns, web):
        propagation.propagate_revision(resource)
        wait_for(lambda resource=resource: finished(resource), timeout=60, message=f"{resource} propagated")
    assert status(web, "m128") == PropagationReason.OK

    m130 = cluster_services.register_cluster(
        name="m130", api_server=fleet.url("m130"), token=fleet.token("m130"), labels={"tier": "web"}
    )  # the system (actor None), as a command would
    wait_for(
        lambda: fleet.get_object("m130", "apps/v1", "Deployment", "shop", "web"),
        timeout=120,
        message="web propagated to the cluster that joined",
    )
    wait_for(lambda: status(web, "m130") == PropagationReason.OK, timeout=60, message="m130 recorded OK")
    assert AuditEvent.objects.filter(
        action="federation.resource.membership", object_repr=str(web), cluster="m130"
    ).exists()

    cluster_services.update_cluster(m130, labels={"tier": "batch"}, verify=False)
    wait_for(lambda: status(web, "m130") == PropagationReason.REMOVED, timeout=120, message="web removed from m130")
    assert fleet.get_object("m130", "apps/v1", "Deployment", "shop", "web") is None
    assert status(web, "m128") == PropagationReason.OK
