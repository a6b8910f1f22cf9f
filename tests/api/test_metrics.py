"""/metrics: access control, and after a real propagation (worker + simulator) the exact values."""

import io

import pytest
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

from clusters.models import Cluster
from clusters.probing import probe_cluster
from federation import propagation
from federation.approvals import services
from federation.approvals.choices import ChangeState
from federation.approvals.models import ChangeRequest
from federation.models import PropagationRun
from fedportal.models import AuditChainHead
from tests.federation.factories import (
    federate_namespace,
    register_fleet,
    web_deployment,
)
from tests.utils import wait_for

TOKEN = "metrics-s3cret"


def samples(text: str) -> dict[tuple, float]:
    """{(sample name, ((label, value), ...)): value} from the exposition text."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def scrape(client) -> dict[tuple, float]:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return samples(response.content.decode())


@pytest.mark.django_db
@override_settings(FEDPORTAL_METRICS_TOKEN=TOKEN, FEDPORTAL_METRICS_ALLOWED_NETWORKS=[])
@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", "Bearer"])
def test_metrics_without_the_token_is_401(client, header):
    response = client.get("/metrics", headers={"Authorization": header} if header else {})
    assert response.status_code == 401 and b"FEDPORTAL_METRICS_TOKEN" in response.content


@pytest.mark.django_db
@override_settings(FEDPORTAL_METRICS_TOKEN="", FEDPORTAL_METRICS_ALLOWED_NETWORKS=[])
def test_metrics_are_off_without_a_token_or_networks(client, admin_user):
    client.force_login(admin_user)  # a session does not open /metrics either
    assert client.get("/metrics").status_code == 403


@pytest.mark.django_db
@override_settings(FEDPORTAL_METRICS_TOKEN="", FEDPORTAL_METRICS_ALLOWED_NETWORKS=["10.0.0.0/8", "127.0.0.1/32"])
def test_metrics_from_an_allowed_network_need_no_token(client):
    assert client.get("/metrics").status_code == 200  # the test client is 127.0.0.1
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.5").status_code == 403


@pytest.mark.django_db
@override_settings(FEDPORTAL_METRICS_TOKEN="", FEDPORTAL_METRICS_ALLOWED_NETWORKS=["10.0.0.0/8"])
def test_behind_proxies_the_allow_list_never_takes_the_proxys_own_address(client, settings):
    """Two proxies, the inner one at 10.1.1.1 (inside the allow-list): a header naming one address
    does not say who the client is, and the fallback to REMOTE_ADDR (the proxy) is not believed
    (a review let it through)."""
    settings.FEDPORTAL_TRUSTED_PROXIES = 2
    proxied = {"REMOTE_ADDR": "10.1.1.1"}
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.9", **proxied).status_code == 403
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="not-an-ip, 10.9.9.9", **proxied).status_code == 403
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.9, 10.0.0.5, 10.2.2.2", **proxied).status_code == 200
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="10.0.0.5, 203.0.113.9, 10.2.2.2", **proxied).status_code == 403


@pytest.mark.django_db
@override_settings(FEDPORTAL_METRICS_TOKEN=TOKEN)
def test_an_empty_fleet_scrapes_zeros(client):
    values = scrape(client)
    assert values[("fedportal_change_requests", (("state", "Applied"),))] == 0
    assert values[("fedportal_propagation_duration_seconds_count", ())] == 0
    assert values[("fedportal_audit_last_verification_ok", ())] == -1
    assert values[("fedportal_fleet_compliance_score", ())] == 100


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@override_settings(FEDPORTAL_METRICS_TOKEN=TOKEN)
def test_metrics_after_a_propagation_show_the_exact_values(client, fleet, celery_worker, operator, approver):
    from django.core.management import call_command

    members = ["m128", "m131"]
    register_fleet(fleet, members)
    run = propagation.propagate_revision(federate_namespace("shop", members))
    wait_for(lambda: PropagationRun.objects.filter(pk=run.pk, finished_at__isnull=False).exists(), timeout=60)
    resource = web_deployment(name="web", placement={"clusters": members}, actor=operator)
    cr = services.approve(
        services.submit(services.create_change_request(resource, actor=operator), actor=operator), actor=approver
    )
    wait_for(
        lambda: ChangeRequest.objects.filter(pk=cr.pk, state=ChangeState.APPLIED).exists(),
        timeout=90,
        message="change request applied",
    )
    fleet.set_down("m131", mode="refused")
    before = scrape(client)
    probe_cluster(Cluster.objects.get(name="m128"))
    call_command("verify_audit", stdout=io.StringIO())
    values = scrape(client)

    # clusters (register_fleet makes them Ready; m128 was just probed and stays Ready)
    assert values[("fedportal_cluster_state", (("cluster", "m128"), ("state", "Ready")))] == 1
    assert values[("fedportal_cluster_state", (("cluster", "m128"), ("state", "Offline")))] == 0
    assert values[("fedportal_cluster_info", (("cluster", "m131"), ("role", "member"), ("version", "v1.31.0")))] == 1
    # propagation: the namespace and the deployment on two clusters each
    assert values[("fedportal_propagation_outcomes_total", (("reason", "OK"), ("state", "done")))] == 4
    assert values[("fedportal_propagation_duration_seconds_count", ())] == 4
    assert values[("fedportal_propagation_duration_seconds_bucket", (("le", "+Inf"),))] == 4
    assert values[("fedportal_propagation_duration_seconds_bucket", (("le", "120.0"),))] == 4  # each took < 2 min
    assert values[("fedportal_propagation_duration_seconds_bucket", (("le", "0.25"),))] <= 4
    assert 0 < values[("fedportal_propagation_duration_seconds_sum", ())] < 4 * 120
    assert (
        sum(
            v
            for (name, labels), v in values.items()
            if name == "fedportal_propagated_versions" and ("status", "OK") in labels
        )
        == 4
    )
    # change requests
    assert values[("fedportal_change_requests", (("state", "Applied"),))] == 1
    assert values[("fedportal_change_requests", (("state", "Draft"),))] == 0
    assert values[("fedportal_change_request_approval_latency_seconds_count", ())] == 1
    # the probe made in this process
    key = ("fedportal_probe_latency_seconds_count", (("reachable", "true"),))
    assert values[key] == before.get(key, 0) + 1
    # audit: the chain's length as the head says, and the verification just run
    assert values[("fedportal_audit_chain_length", ())] == AuditChainHead.objects.get(pk=1).length
    assert values[("fedportal_audit_last_verification_ok", ())] == 1
    # broker and compliance
    assert values[("fedportal_broker_up", ())] == 1
    assert {labels for (name, labels) in values if name == "fedportal_celery_queue_depth"} == {
        (("queue", "default"),),
        (("queue", "probes"),),
        (("queue", "propagation"),),
    }
    from drift.selectors import fleet_compliance

    report, _ = fleet_compliance()
    expected = {c.name: c.score for c in report.clusters}
    assert {
        dict(labels)["cluster"]: v for (name, labels), v in values.items() if name == "fedportal_compliance_score"
    } == expected


@pytest.mark.django_db
def test_probe_latency_from_other_processes_is_merged_in_multiprocess_mode(client, tmp_path):
    """A worker process observes probes into PROMETHEUS_MULTIPROC_DIR; the web process's /metrics
    merges those files (prometheus-client multiprocess mode)."""
    import os
    import subprocess
    import sys

    code = (
        "from fedportal.metrics import observe_probe; "
        "observe_probe(0.2, reachable=True); observe_probe(0.03, reachable=True); observe_probe(4.0, reachable=False)"
    )
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    subprocess.run(
        [sys.executable, "-c", code],
        cwd=str(tmp_path.parent),
        env={**env, "PYTHONPATH": os.getcwd()},
        check=True,
        timeout=60,
    )
    with override_settings(FEDPORTAL_METRICS_TOKEN=TOKEN, PROMETHEUS_MULTIPROC_DIR=str(tmp_path)):
        values = scrape(client)
    assert values[("fedportal_probe_latency_seconds_count", (("reachable", "true"),))] == 2
    assert values[("fedportal_probe_latency_seconds_bucket", (("le", "0.05"), ("reachable", "true")))] == 1
    assert values[("fedportal_probe_latency_seconds_count", (("reachable", "false"),))] == 1
    assert abs(values[("fedportal_probe_latency_seconds_sum", (("reachable", "true"),))] - 0.23) < 1e-9
    assert ("fedportal_fleet_compliance_score", ()) in values  # the database's series are there too
