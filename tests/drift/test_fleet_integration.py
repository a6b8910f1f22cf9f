"""Against the fleet simulator: polled versions drive the matrices; an upgrade changes them."""

import pytest

from clusters.probing import probe_cluster
from clusters.services import register_cluster
from drift import selectors
from drift.choices import Severity
from federation.services import create_resource
from tests.drift.conftest import deployment_type

pytestmark = pytest.mark.django_db(transaction=True)

SIDECAR_TEMPLATE = {
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "containers": [{"name": "web", "image": "nginx"}],
                "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}],
            },
        },
    }
}


def test_poll_detects_upgrade_and_matrices_follow(fleet):
    clusters = []
    for name in fleet.names:
        role = "host" if name == "host" else "member"
        clusters.append(
            register_cluster(
                name=name,
                api_server=fleet.url(name),
                role=role,
                labels=fleet.labels(name),
                token=fleet.token(name),
                insecure_skip_tls_verify=True,
                probe=False,
            )
        )
    for cluster in clusters:
        probe_cluster(cluster)
    severities = {r.name: r.severity for r in selectors.skew_overview().member_rows}
    assert severities["m127"] == Severity.P0  # v1.27 vs host v1.29
    ftype = deployment_type()
    resource = create_resource(
        ftype, namespace="default", name="web", template=SIDECAR_TEMPLATE, placement={"clusterSelector": {}}
    )
    cells = selectors.compat_row(resource, selectors.fleet_rows())
    assert cells["m127"].status == "incompatible" and cells["m128"].status == "compatible"

    fleet.set_version("m127", "v1.28.7")
    probe_cluster(next(c for c in clusters if c.name == "m127"))
    severities = {r.name: r.severity for r in selectors.skew_overview().member_rows}
    assert severities["m127"] != Severity.P0
    cells = selectors.compat_row(resource, selectors.fleet_rows())
    assert cells["m127"].status == "compatible"
    report, _ = selectors.fleet_compliance()
    assert "api_compat" not in {c.name: c for c in report.clusters}["m127"].failed_rules


@pytest.mark.worker
def test_fleetctl_upgrade_is_found_by_the_next_poll_and_the_report_follows(fleet, celery_worker):
    """The whole loop as an operator meets it: fleetctl upgrades a simulated cluster, the next
    poll (a real worker) records the new version, and the drift pages change accordingly."""
    from django.core.management import call_command

    from clusters.models import Cluster
    from clusters.services import request_poll
    from clusters.simulator.kubeconfig import state_path_for
    from tests.federation.factories import register_fleet
    from tests.utils import wait_for

    register_fleet(fleet)
    ftype = deployment_type()
    resource = create_resource(
        ftype, namespace="default", name="web", template=SIDECAR_TEMPLATE, placement={"clusterSelector": {}}
    )
    assert selectors.compat_row(resource, selectors.fleet_rows())["m127"].status == "incompatible"

    call_command("fleetctl", "--state", str(state_path_for(fleet.kubeconfig_path)), "version", "m127", "v1.28.7")
    request_poll()
    wait_for(lambda: Cluster.objects.get(name="m127").server_version == "v1.28.7", timeout=60, message="the poll")

    assert selectors.compat_row(resource, selectors.fleet_rows())["m127"].status == "compatible"
    severities = {r.name: r.severity for r in selectors.skew_overview().member_rows}
    assert severities["m127"] != Severity.P0
