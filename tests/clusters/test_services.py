"""clusters.services against the fleet simulator (no mocks): registration, import, edit, rotation,
unjoin, probing with KubeFed thresholds, poll progress."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from clusters import probing, services
from clusters.choices import AuthMethod, ClusterRole, ClusterState
from clusters.kubeconfig import KubeconfigError, parse_kubeconfig
from clusters.models import Cluster, ClusterStateChange, PollRequest, VersionSample
from fedportal.models import AuditEvent
from tests.clusters.factories import ClusterFactory

pytestmark = pytest.mark.django_db


def register(fleet, fleet_name, **kwargs):
    """Register the fleet's cluster ``fleet_name`` (keyword arguments override the form values)."""
    params = {
        "name": fleet_name,
        "api_server": fleet.url(fleet_name),
        "token": fleet.token(fleet_name),
        "labels": {"env": "prod"},
    }
    params.update(kwargs)
    return services.register_cluster(**params)


# --- register ----------------------------------------------------------------------------------


def test_register_tests_the_connection_and_stores_the_version(fleet, admin_user):
    cluster = register(fleet, "m127", actor=admin_user)
    assert cluster.server_version == "v1.27.3"
    assert cluster.minor_version == "1.27"
    assert cluster.state == ClusterState.UNKNOWN  # until the first probe
    event = AuditEvent.objects.get(action="cluster.register")
    assert event.actor == admin_user and event.cluster == "m127"


def test_credentials_are_encrypted_at_rest_and_never_in_the_audit_log(fleet):
    token = fleet.token("m128")
    cluster = register(fleet, "m128")
    raw = Cluster.objects.values_list("credentials_encrypted", flat=True).get(pk=cluster.pk)
    assert token not in raw
    assert cluster.get_credentials() == {"token": token}
    assert services.connection_for(cluster).token == token
    assert token not in repr(services.connection_for(cluster))
    for event in AuditEvent.objects.all():
        assert token not in f"{event.summary}{event.before}{event.after}"


@pytest.mark.parametrize(
    "override, field",
    [
        ({"name": "Not_A_Label"}, "name"),
        ({"name": "a" * 64}, "name"),
        ({"api_server": "not a url"}, "api_server"),
        ({"api_server": "ftp://example.com"}, "api_server"),
        ({"labels": {"bad key!": "x"}}, "labels"),
        ({"labels": {"env": "-bad-"}}, "labels"),
    ],
)
def test_register_rejects_invalid_fields_and_saves_nothing(fleet, override, field):
    with pytest.raises(ValidationError) as info:
        register(fleet, "m127", **override)
    assert field in info.value.message_dict
    assert not Cluster.objects.exists()
    assert not AuditEvent.objects.filter(action="cluster.register").exists()


def test_register_rejects_a_duplicate_name(fleet):
    register(fleet, "m127")
    with pytest.raises(ValidationError) as info:
        register(fleet, "m128", name="m127")
    assert "already registered" in str(info.value.message_dict["name"])
    assert Cluster.objects.count() == 1


def test_register_rejects_a_second_host(fleet):
    register(fleet, "host", role=ClusterRole.HOST)
    with pytest.raises(ValidationError) as info:
        register(fleet, "m127", role=ClusterRole.HOST)
    assert "at most one host" in str(info.value.message_dict["role"])
    assert Cluster.objects.filter(role=ClusterRole.HOST).count() == 1


def test_register_rejects_the_same_api_server_twice(fleet):
    register(fleet, "m127")
    with pytest.raises(ValidationError) as info:
        register(fleet, "m127", name="m127-again")
    assert "already registered as m127" in str(info.value.message_dict["api_server"])


def test_register_rejects_a_wrong_token_with_the_reason(fleet):
    with pytest.raises(ValidationError) as info:
        register(fleet, "m127", token="wrong-token")
    assert "401 Unauthorized" in info.value.messages[0]
    assert "wrong-token" not in info.value.messages[0]
    assert not Cluster.objects.exists()


def test_register_rejects_an_unreachable_server(fleet):
    fleet.set_down("m130")
    with pytest.raises(ValidationError) as info:
        register(fleet, "m130")
    assert info.value.messages[0].startswith("Cannot connect (")
    assert not Cluster.objects.exists()


def test_register_rejects_an_unresolvable_host():
    with pytest.raises(ValidationError) as info:
        services.register_cluster(name="ghost", api_server="https://ghost.invalid:6443", token="t")
    assert "DNS" in info.value.messages[0]


def test_register_rejects_a_ca_that_is_not_pem(fleet):
    with pytest.raises(ValidationError) as info:
        register(fleet, "m127", ca_bundle="not a certificate")
    assert "ca_bundle" in info.value.message_dict


def test_register_rejects_a_wrong_ca_on_a_tls_cluster(fleet_factory):
    from tests.fleet_fixtures import DEFAULT_FLEET

    tls_fleet = fleet_factory({"clusters": DEFAULT_FLEET["clusters"][1:2]}, tls=True)
    other_ca = _self_signed_ca_pem()
    with pytest.raises(ValidationError) as info:
        register(tls_fleet, "m127", ca_bundle=other_ca)
    assert "TLS" in info.value.messages[0]
    assert not Cluster.objects.exists()
    cluster = register(tls_fleet, "m127", ca_bundle=open(tls_fleet.ca_path).read())
    assert cluster.server_version == "v1.27.3"


def test_register_needs_exactly_one_kind_of_credential(fleet):
    with pytest.raises(ValidationError):
        register(fleet, "m127", token="")
    with pytest.raises(ValidationError):
        register(fleet, "m127", client_certificate="-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----")
    assert not Cluster.objects.exists()


def _self_signed_ca_pem() -> str:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "someone-else-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


# --- kubeconfig import ---------------------------------------------------------------------------


def test_import_registers_the_chosen_contexts_with_their_own_credentials(fleet, admin_user):
    text = fleet.kubeconfig_path.read_text()
    created = services.import_kubeconfig_contexts(
        text, contexts=["host", "m127", "m128"], host_context="host", labels={"env": "test"}, actor=admin_user
    )
    assert sorted(c.name for c in created) == ["host", "m127", "m128"]
    by_name = {c.name: c for c in Cluster.objects.all()}
    assert by_name["host"].role == ClusterRole.HOST and by_name["m127"].role == ClusterRole.MEMBER
    assert by_name["m128"].get_credentials() == {"token": fleet.token("m128")}
    assert by_name["m127"].server_version == "v1.27.3"
    assert all(c.labels == {"env": "test"} for c in by_name.values())
    assert AuditEvent.objects.filter(action="cluster.register").count() == 3


def test_import_of_an_unknown_context_changes_nothing(fleet):
    with pytest.raises(ValidationError) as info:
        services.import_kubeconfig_contexts(fleet.kubeconfig_path.read_text(), contexts=["m127", "nope"])
    assert "Unknown context(s): nope" in info.value.messages[0]
    assert not Cluster.objects.exists()


@pytest.mark.parametrize(
    "text, reason",
    [
        ("clusters: [oops", "not valid YAML"),
        ("- just\n- a list\n", "YAML mapping"),
        ("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n", "no contexts"),
        (
            "kind: Config\ncontexts:\n- name: a\n  context: {cluster: missing, user: u}\nclusters: []\nusers: []\n",
            "not defined",
        ),
        ("kind: Pod\n", "kind: Config"),
    ],
)
def test_malformed_kubeconfig_is_rejected_with_a_reason(text, reason):
    with pytest.raises(ValidationError) as info:
        services.import_kubeconfig_contexts(text)
    assert reason in info.value.messages[0]
    assert not Cluster.objects.exists()


def test_import_is_all_or_nothing_when_one_context_is_unreachable(fleet):
    fleet.set_down("m128")
    with pytest.raises(ValidationError) as info:
        services.import_kubeconfig_contexts(fleet.kubeconfig_path.read_text(), contexts=["m127", "m128"])
    assert "m128" in info.value.messages[0]
    assert not Cluster.objects.exists()


def test_import_refuses_two_contexts_for_one_api_server(fleet):
    with pytest.raises(ValidationError) as info:
        services.import_kubeconfig_contexts(fleet.kubeconfig_path.read_text(), contexts=["m127", "m127-readonly"])
    assert "same API server" in info.value.messages[0]


def test_exec_plugin_users_are_listed_with_a_problem():
    text = """
kind: Config
clusters: [{name: c, cluster: {server: "https://c.example:6443"}}]
users: [{name: u, user: {exec: {command: aws, apiVersion: client.authentication.k8s.io/v1beta1}}}]
contexts: [{name: eks, context: {cluster: c, user: u}}]
"""
    [context] = parse_kubeconfig(text)
    assert not context.usable and "exec plugin" in context.problem
    with pytest.raises(ValidationError) as info:
        services.import_kubeconfig_contexts(text)
    assert "exec plugin" in info.value.messages[0]


def test_uploaded_kubeconfig_may_not_reference_server_files():
    text = """
kind: Config
clusters: [{name: c, cluster: {server: "https://c.example:6443", certificate-authority: /etc/passwd}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: a, context: {cluster: c, user: u}}]
"""
    with pytest.raises(KubeconfigError) as info:
        parse_kubeconfig(text)
    assert "embed" in info.value.message


def test_context_names_become_dns_labels():
    assert services.cluster_name_for_context("arn:aws:eks:eu-west-1:123:cluster/Prod_EU") == "prod-eu"
    assert services.cluster_name_for_context("kind-member-1") == "kind-member-1"
    assert services.cluster_name_for_context("gke_proj_zone_My.Cluster") == "gke-proj-zone-my-cluster"


# --- edit / rotate / unjoin ---------------------------------------------------------------------


def test_edit_labels_is_audited_with_before_and_after(fleet, admin_user):
    cluster = register(fleet, "m127")
    services.update_cluster(cluster, labels={"env": "staging"}, actor=admin_user)
    cluster.refresh_from_db()
    assert cluster.labels == {"env": "staging"}
    assert cluster.credential_version == 1  # not a connection change
    event = AuditEvent.objects.get(action="cluster.edit")
    assert event.before["labels"] == {"env": "prod"} and event.after["labels"] == {"env": "staging"}


def test_edit_of_the_api_server_is_tested_and_bumps_the_credential_version(fleet):
    cluster = register(fleet, "m127")
    with pytest.raises(ValidationError):
        services.update_cluster(cluster, api_server="http://127.0.0.1:9/clusters/m127")
    cluster.refresh_from_db()
    assert cluster.api_server == fleet.url("m127")
    with pytest.raises(ValidationError):
        services.update_cluster(cluster, role=ClusterRole.HOST, api_server="nope")
    services.update_cluster(cluster, api_server=fleet.url("m127") + "/")  # same URL: no change
    cluster.refresh_from_db()
    assert cluster.credential_version == 1


def test_rotation_tests_the_new_credentials_first(fleet, admin_user):
    cluster = register(fleet, "m127")
    with pytest.raises(ValidationError):
        services.rotate_credentials(cluster, token="wrong", actor=admin_user)
    cluster.refresh_from_db()
    assert cluster.get_credentials() == {"token": fleet.token("m127")} and cluster.credential_version == 1
    services.rotate_credentials(cluster, token=fleet.readonly_token("m127"), actor=admin_user)
    cluster.refresh_from_db()
    assert cluster.get_credentials() == {"token": fleet.readonly_token("m127")}
    assert cluster.credential_version == 2 and cluster.credentials_rotated_at
    event = AuditEvent.objects.get(action="cluster.rotate_credentials")
    assert fleet.readonly_token("m127") not in f"{event.summary}{event.before}{event.after}"


def test_unjoin_removes_the_cluster_and_audits_it(fleet, admin_user):
    cluster = register(fleet, "m127")
    probing.probe_cluster(cluster)
    services.unjoin_cluster(cluster, actor=admin_user)
    assert not Cluster.objects.exists()
    assert not VersionSample.objects.exists()
    assert AuditEvent.objects.get(action="cluster.unjoin").before["name"] == "m127"
    assert probing.probe_cluster(cluster.pk).skipped == "gone"


# --- probing ----------------------------------------------------------------------------------------


def test_probe_reads_version_nodes_region_and_goes_ready(fleet):
    cluster = register(fleet, "host", role=ClusterRole.HOST)
    outcome = probing.probe_cluster(cluster)
    cluster.refresh_from_db()
    assert outcome.state == ClusterState.READY and outcome.changed_state
    assert cluster.state == ClusterState.READY
    assert cluster.server_version == "v1.29.4" and (cluster.version_major, cluster.version_minor) == (1, 29)
    assert cluster.node_count == 3
    assert set(cluster.kubelet_versions.values()) <= {"v1.29.4", "v1.28.9"}
    assert cluster.region == "eu-west-1"
    assert cluster.last_success_at and not cluster.last_error
    change = ClusterStateChange.objects.get(cluster=cluster)
    assert (change.from_state, change.to_state) == (ClusterState.UNKNOWN, ClusterState.READY)
    assert AuditEvent.objects.filter(action="cluster.state_change").count() == 1


def test_a_cluster_without_readyz_is_probed_through_healthz_and_goes_ready(fleet):
    fleet.admin("POST", "/clusters/m128/faults", {"noReadyz": True})
    cluster = register(fleet, "m128")
    outcome = probing.probe_cluster(cluster)
    cluster.refresh_from_db()
    assert outcome.state == ClusterState.READY and not cluster.last_error
    assert cluster.server_version.startswith("v1.28")


def test_version_sample_is_written_only_when_something_changed(fleet):
    cluster = register(fleet, "m128")
    probing.probe_cluster(cluster)
    probing.probe_cluster(cluster)
    assert VersionSample.objects.filter(cluster=cluster).count() == 1
    fleet.set_version("m128", "v1.28.5")
    probing.probe_cluster(cluster)
    samples = list(VersionSample.objects.filter(cluster=cluster).order_by("sampled_at", "id"))
    assert [s.git_version for s in samples] == ["v1.28.2", "v1.28.5"]
    cluster.refresh_from_db()
    assert cluster.server_version == "v1.28.5"


def test_unreachable_cluster_goes_not_ready_then_offline_after_the_threshold_then_ready(fleet, settings):
    settings.FEDPORTAL_HEALTH_FAILURE_THRESHOLD = 3
    settings.FEDPORTAL_HEALTH_TIMEOUT_SECONDS = 1.0
    cluster = register(fleet, "m130")
    probing.probe_cluster(cluster)
    fleet.set_down("m130", mode="refused")
    states = [probing.probe_cluster(cluster).state for _ in range(4)]
    assert states == [ClusterState.NOT_READY, ClusterState.NOT_READY, ClusterState.OFFLINE, ClusterState.OFFLINE]
    cluster.refresh_from_db()
    assert cluster.consecutive_failures == 4 and cluster.last_error
    fleet.set_up("m130")
    assert probing.probe_cluster(cluster).state == ClusterState.READY
    cluster.refresh_from_db()
    assert cluster.consecutive_failures == 0 and cluster.last_error == ""
    transitions = [
        (c.from_state, c.to_state) for c in ClusterStateChange.objects.filter(cluster=cluster).order_by("at", "id")
    ]
    assert transitions == [
        ("Unknown", "Ready"),
        ("Ready", "NotReady"),
        ("NotReady", "Offline"),
        ("Offline", "Ready"),
    ]


def test_success_threshold_delays_ready(fleet, settings):
    settings.FEDPORTAL_HEALTH_SUCCESS_THRESHOLD = 2
    cluster = register(fleet, "m127")
    assert probing.probe_cluster(cluster).state == ClusterState.UNKNOWN
    assert probing.probe_cluster(cluster).state == ClusterState.READY


def test_a_503_cluster_is_not_ready_but_never_offline(fleet, settings):
    settings.FEDPORTAL_HEALTH_FAILURE_THRESHOLD = 2
    cluster = register(fleet, "m131")
    probing.probe_cluster(cluster)
    fleet.set_down("m131", mode="503")
    states = [probing.probe_cluster(cluster).state for _ in range(3)]
    assert states == [ClusterState.NOT_READY] * 3
    cluster.refresh_from_db()
    assert "503" in cluster.last_error


def test_a_revoked_token_makes_the_cluster_not_ready_with_the_reason(fleet):
    cluster = register(fleet, "m127")
    cluster.set_credentials({"token": "revoked"})
    cluster.save()
    outcome = probing.probe_cluster(cluster)
    assert outcome.state == ClusterState.NOT_READY
    assert "401" in outcome.error and "revoked" not in outcome.error


def test_probe_requested_before_the_last_probe_is_skipped(fleet):
    cluster = register(fleet, "m127")
    requested = timezone.now()
    probing.probe_cluster(cluster, requested_at=requested)
    assert probing.probe_cluster(cluster, requested_at=requested).skipped
    assert probing.probe_cluster(cluster, requested_at=timezone.now()).skipped == ""


def test_a_probe_in_flight_holds_a_lease_so_a_second_one_is_skipped():
    cluster = ClusterFactory()
    Cluster.objects.filter(pk=cluster.pk).update(probe_lease_until=timezone.now() + timedelta(seconds=30))
    assert probing.probe_cluster(cluster).skipped == "another probe is running"
    Cluster.objects.filter(pk=cluster.pk).update(probe_lease_until=timezone.now() - timedelta(seconds=1))
    outcome = probing.probe_cluster(cluster)  # expired lease: probes (and fails: no such host)
    assert outcome.skipped == "" and not outcome.ready


def test_poll_progress_counts_clusters_probed_since_the_request(fleet):
    clusters = [register(fleet, name) for name in ("m127", "m128")]
    poll = services.request_poll()
    assert (poll.total, services.poll_progress(poll).done) == (2, 0)
    probing.probe_cluster(clusters[0])
    progress = services.poll_progress(poll)
    assert (progress.done, progress.finished, progress.percent) == (1, False, 50)
    fleet.set_down("m128")
    probing.probe_cluster(clusters[1])
    progress = services.poll_progress(poll)
    assert progress.finished and progress.failed == 1 and progress.ok == 1
    assert PollRequest.objects.count() == 1
    assert AuditEvent.objects.filter(action="cluster.poll").exists()


def test_connection_for_uses_the_credential_version_in_the_cache_key():
    cluster = ClusterFactory(auth_method=AuthMethod.TOKEN)
    assert services.connection_for(cluster).cache_key == (cluster.pk, 1)


def test_choosing_an_exec_plugin_context_explicitly_is_refused():
    text = """
kind: Config
clusters: [{name: c, cluster: {server: "https://c.example:6443"}}]
users: [{name: u, user: {exec: {command: aws}}}]
contexts: [{name: eks, context: {cluster: c, user: u}}]
"""
    with pytest.raises(ValidationError) as info:
        services.import_kubeconfig_contexts(text, contexts=["eks"])
    assert "cannot be registered" in info.value.messages[0]
