"""Where credentials may go (issue 16, findings 6 and 13): a new API server needs new credentials,
tokens and client keys only over https:// (or http:// to loopback), "Test connection" shows status
and reason only and refuses link-local and cloud-metadata addresses."""

import base64
import json
from ipaddress import ip_network

import aiohttp
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from clusters import addresses, kube, services
from clusters.forms import ClusterEditForm
from clusters.kubeconfig import parse_kubeconfig
from clusters.models import Cluster
from fedportal.models import AuditEvent
from tests.clusters.factories import ClusterFactory
from tests.clusters.hostile_server import HostileServer
from tests.utils import run_async

NEW_SERVER_NEEDS_CREDENTIALS = (
    "A new API server needs its credentials: enter the bearer token or client certificate and key for it "
    "(the stored ones are not sent to another host)."
)
PLAIN_HTTP = (
    "Bearer tokens and client keys are sent only over https:// (plain http:// is allowed to loopback addresses only)."
)
CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----"


@pytest.fixture
def hostile():
    server = HostileServer()
    yield server
    server.close()


def register(fleet, name, **kwargs):
    params = {"name": name, "api_server": fleet.url(name), "token": fleet.token(name), "labels": {"env": "prod"}}
    return services.register_cluster(**{**params, **kwargs})


# --- a new API server needs new credentials (finding 6) ---------------------------------------------------------


@pytest.mark.django_db
def test_a_new_api_server_without_credentials_is_refused_and_nothing_is_sent_to_it(hostile):
    cluster = ClusterFactory(api_server="https://old.example.test:6443", token="stored-token")
    hostile.mode = "endless_list"
    with pytest.raises(ValidationError) as info:
        services.update_cluster(cluster, api_server=hostile.url)
    assert info.value.message_dict == {"api_server": [NEW_SERVER_NEEDS_CREDENTIALS]}
    assert hostile.requests == []
    cluster.refresh_from_db()
    assert cluster.api_server == "https://old.example.test:6443"
    assert cluster.get_credentials() == {"token": "stored-token"}


@pytest.mark.django_db
def test_a_new_api_server_is_tested_with_the_new_credentials_only(hostile, settings):
    settings.FEDPORTAL_KUBE_MAX_LIST_PAGES = 2  # the hostile server never finishes its node list
    cluster = ClusterFactory(api_server="https://old.example.test:6443", token="stored-token")
    hostile.mode = "endless_list"
    with pytest.raises(ValidationError):
        services.update_cluster(cluster, api_server=hostile.url, token="new-token")
    assert hostile.authorizations and set(hostile.authorizations) == {"Bearer new-token"}
    cluster.refresh_from_db()
    assert cluster.get_credentials() == {"token": "stored-token"}


@pytest.mark.django_db
def test_moving_to_a_new_api_server_with_its_credentials_saves_both_and_audits(fleet, admin_user):
    cluster = register(fleet, "m127")
    services.update_cluster(cluster, api_server=fleet.url("m128"), token=fleet.token("m128"), actor=admin_user)
    cluster.refresh_from_db()
    assert (cluster.api_server, cluster.get_credentials()) == (fleet.url("m128"), {"token": fleet.token("m128")})
    assert cluster.credential_version == 2 and cluster.credentials_rotated_at is not None
    event = AuditEvent.objects.get(action="cluster.edit")
    assert event.summary == "Edited m127: api_server and credentials"
    assert event.after["api_server"] == fleet.url("m128") and fleet.token("m128") not in str(event.after)


def test_the_edit_form_asks_for_credentials_only_when_the_server_changes():
    cluster = ClusterFactory.build(api_server="https://old.example.test:6443")
    base = {"role": "member", "labels": "env=prod"}
    same = ClusterEditForm.for_cluster(cluster, {**base, "api_server": cluster.api_server})
    assert same.is_valid(), same.errors
    assert same.changes()["token"] is None
    moved = ClusterEditForm.for_cluster(cluster, {**base, "api_server": "https://new.example.test:6443"})
    assert not moved.is_valid() and moved.errors == {"token": ["Enter the bearer token."]}
    with_token = ClusterEditForm.for_cluster(
        cluster, {**base, "api_server": "https://new.example.test:6443", "token": "new-token"}
    )
    assert with_token.is_valid() and with_token.changes()["token"] == "new-token"
    with_cert = ClusterEditForm.for_cluster(
        cluster,
        {
            **base,
            "api_server": "https://new.example.test:6443",
            "auth_method": "client_certificate",
            "client_certificate": CERT,
        },
    )
    assert not with_cert.is_valid() and with_cert.errors == {"client_key": ["Paste the client key."]}


@pytest.mark.django_db
def test_the_edit_page_refuses_a_new_server_without_credentials(client, admin_user, hostile):
    cluster = ClusterFactory(api_server="https://old.example.test:6443", token="stored-token")
    client.force_login(admin_user)
    response = client.post(
        reverse("clusters:cluster_edit", args=[cluster.pk]),
        {"api_server": hostile.url, "role": "member", "labels": "env=prod"},
    )
    assert response.status_code == 400 and "Enter the bearer token." in response.content.decode()
    assert hostile.requests == []
    assert Cluster.objects.get(pk=cluster.pk).api_server == "https://old.example.test:6443"


# --- credentials only over https:// or to loopback (finding 6) ----------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url, credentials",
    [
        ("http://10.0.0.5:6443", {"token": "t"}),
        ("http://cluster.example.test", {"token": "t"}),
        ("http://10.0.0.5:6443", {"client_certificate": CERT, "client_key": KEY}),
    ],
)
def test_credentials_over_plain_http_to_a_remote_host_are_refused(url, credentials):
    with pytest.raises(ValidationError) as info:
        services.register_cluster(name="plain", api_server=url, verify=False, **credentials)
    assert info.value.message_dict == {"api_server": [PLAIN_HTTP]}
    assert not Cluster.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8001", "http://localhost:8001", "http://[::1]:8001", "https://10.0.0.5:6443"]
)
def test_loopback_http_and_any_https_are_allowed(url):
    cluster = services.register_cluster(name="ok", api_server=url, token="t", verify=False, probe=False)
    assert cluster.api_server == url


@pytest.mark.django_db
def test_rotating_or_editing_onto_plain_http_is_refused():
    cluster = ClusterFactory(api_server="http://10.0.0.5:6443", token="old")  # as stored before this rule
    with pytest.raises(ValidationError) as info:
        services.rotate_credentials(cluster, token="new", verify=False)
    assert info.value.message_dict == {"api_server": [PLAIN_HTTP]}
    https = ClusterFactory(api_server="https://10.0.0.6:6443", token="old")
    with pytest.raises(ValidationError) as info:
        services.update_cluster(https, api_server="http://10.0.0.6:6443", token="new", verify=False)
    assert info.value.message_dict == {"api_server": [PLAIN_HTTP]}


@pytest.mark.django_db
def test_a_kubeconfig_with_a_plain_http_server_is_refused():
    text = """
kind: Config
clusters: [{name: c, cluster: {server: "http://10.0.0.5:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: a, context: {cluster: c, user: u}}]
"""
    with pytest.raises(ValidationError) as info:
        services.import_kubeconfig_contexts(text, verify=False)
    # refused as the file is read, so the upload page never offers the context
    assert info.value.messages == [f"The kubeconfig has no usable context (a: {PLAIN_HTTP.rstrip('.')})."]


def test_the_kubernetes_client_itself_never_sends_a_token_over_plain_http():
    conn = kube.ClusterConnection(name="x", api_server="http://192.0.2.1:6443", token="t")
    with pytest.raises(kube.KubePermanentError) as info:
        kube.get_version(conn, timeout=30)
    assert info.value.kind == kube.KIND_NOT_ALLOWED
    assert info.value.message == (
        "Refusing to send credentials to http://192.0.2.1:6443 over plain http:// "
        "(only loopback addresses may use http://)."
    )


# --- "Test connection": status and reason only, no link-local or metadata (finding 13) --------------------------


def test_the_connection_test_shows_status_and_reason_never_the_body(hostile):
    hostile.mode, hostile.body = "status", b'{"kind":"Status","reason":"Unauthorized","message":"SENTINEL-BODY"}'
    result = services.test_connection(kube.ClusterConnection(name="x", api_server=hostile.url, token="t"))
    assert (result.ok, result.error_kind) == (False, kube.KIND_UNAUTHORIZED)
    assert result.message == f"{hostile.url} answered HTTP 401 Unauthorized."
    hostile.status, hostile.body = b"500 Internal Server Error", b"<html>SENTINEL-BODY " + b"x" * 5000 + b"</html>"
    result = services.test_connection(kube.ClusterConnection(name="x", api_server=hostile.url, token="t"))
    assert result.message == f"{hostile.url} answered HTTP 500 Internal Server Error."


@pytest.mark.django_db
def test_the_test_connection_page_never_shows_the_targets_body(client, admin_user, hostile):
    hostile.mode, hostile.body = "status", b"SENTINEL-BODY"
    hostile.status = b"403 Forbidden"
    client.force_login(admin_user)
    response = client.post(
        reverse("clusters:cluster_test_connection"),
        {"name": "x", "api_server": hostile.url, "auth_method": "token", "token": "t"},
        HTTP_HX_REQUEST="true",
    )
    page = response.content.decode()
    assert "answered HTTP 403 Forbidden." in page and "SENTINEL-BODY" not in page


@pytest.mark.parametrize(
    "url, reason",
    [
        ("https://169.254.169.254", "169.254.169.254 is a link-local address (169.254.169.254)"),
        ("https://169.254.10.1:6443", "169.254.10.1 is a link-local address (169.254.10.1)"),
        ("https://[fe80::1]:6443", "fe80::1 is a link-local address (fe80::1)"),
        ("https://[::ffff:169.254.169.254]", "::ffff:169.254.169.254 is a link-local address (169.254.169.254)"),
        ("https://[fd00:ec2::254]", "fd00:ec2::254 is a cloud metadata address (fd00:ec2::254)"),
        ("http://metadata.google.internal", "metadata.google.internal is a cloud metadata service"),
        ("http://METADATA.google.internal.", "metadata.google.internal is a cloud metadata service"),
        ("https://instance-data", "instance-data is a cloud metadata service"),
    ],
)
def test_link_local_and_metadata_addresses_are_refused(url, reason):
    assert addresses.blocked_reason(url) == reason
    result = services.test_connection(kube.ClusterConnection(name="x", api_server=url), timeout=30)
    assert (result.ok, result.error_kind) == (False, kube.KIND_NOT_ALLOWED)
    assert result.message == f"Refusing to connect to {url}: {reason} (FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS)."


@pytest.mark.parametrize("url", ["https://10.0.0.1", "https://127.0.0.1:6443", "https://[::1]", "https://example.test"])
def test_ordinary_addresses_are_not_blocked(url):
    assert addresses.blocked_reason(url, resolve=False) == ""


def test_a_setting_allows_link_local_api_servers(settings):
    settings.FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS = True
    result = services.test_connection(kube.ClusterConnection(name="x", api_server="https://169.254.0.1:9"), timeout=0.5)
    assert not result.ok and result.error_kind != kube.KIND_NOT_ALLOWED


# --- DNS rebinding: each new connection's peer is checked, not only the name when the client is built ------------


@pytest.fixture
def loopback_blocked(monkeypatch):
    """The test's servers (127.0.0.1) now count as a blocked address: what a name that resolved to an
    ordinary address when its client was built resolving to the metadata service later looks like."""

    def block():
        loopback = (ip_network("127.0.0.0/8"), ip_network("::1/128"))
        monkeypatch.setattr(addresses, "BLOCKED_NETWORKS", (*addresses.BLOCKED_NETWORKS, *loopback))

    return block


def test_a_server_whose_address_turns_blocked_gets_no_new_connection_and_no_token(hostile, loopback_blocked):
    hostile.mode, hostile.status, hostile.keep_alive = "status", b"200 OK", False
    hostile.body = json.dumps({"gitVersion": "v1.30.0", "major": "1", "minor": "30"}).encode()
    conn = kube.ClusterConnection(name="r", api_server=hostile.url, token="rebind-token", cache_key=(987654, 1))
    try:
        assert kube.get_version(conn, timeout=10).git_version == "v1.30.0"  # the client is built and used
        assert hostile.authorizations == ["Bearer rebind-token"]
        loopback_blocked()
        with pytest.raises(kube.KubeError) as refused:
            kube.get_version(conn, timeout=10)  # the cached client's next connection
        assert (refused.value.kind, refused.value.reason) == (kube.KIND_NOT_ALLOWED, "BlockedAddress")
        assert f"Refusing to connect to {hostile.url}: it now resolves to" in str(refused.value)
        assert "(127.0.0.1)" in str(refused.value) and "nothing was sent" in str(refused.value)
        assert hostile.authorizations == ["Bearer rebind-token"]  # not a byte of the second request
    finally:
        kube.forget_client(conn.cache_key)


def test_an_https_server_whose_address_turns_blocked_is_refused_before_the_tls_handshake(hostile, loopback_blocked):
    # the hostile server speaks no TLS: the first request's handshake fails (the client is built and
    # cached); the second's new connection is refused before its handshake, not failed by it
    url = hostile.url.replace("http://", "https://")
    conn = kube.ClusterConnection(
        name="r", api_server=url, token="rebind-token", insecure_skip_tls_verify=True, cache_key=(987656, 1)
    )
    try:
        with pytest.raises(kube.KubeError) as first:
            kube.get_version(conn, timeout=1)
        assert first.value.reason != "BlockedAddress"
        loopback_blocked()
        with pytest.raises(kube.KubeError) as refused:
            kube.get_version(conn, timeout=5)
        assert (refused.value.kind, refused.value.reason) == (kube.KIND_NOT_ALLOWED, "BlockedAddress")
        assert hostile.authorizations == []
    finally:
        kube.forget_client(conn.cache_key)


def test_the_setting_that_allows_link_local_servers_allows_the_connection_too(hostile, loopback_blocked, settings):
    hostile.mode, hostile.status, hostile.keep_alive = "status", b"200 OK", False
    hostile.body = json.dumps({"gitVersion": "v1.30.0", "major": "1", "minor": "30"}).encode()
    conn = kube.ClusterConnection(name="r", api_server=hostile.url, token="t", cache_key=(987655, 1))
    try:
        kube.get_version(conn, timeout=10)
        loopback_blocked()
        settings.FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS = True
        assert kube.get_version(conn, timeout=10).git_version == "v1.30.0"
        assert len(hostile.requests) == 2
    finally:
        kube.forget_client(conn.cache_key)


async def resolved_by_the_watchers_resolver(name: str):
    resolver = kube.checked_resolver()  # made in the event loop, as the watch session makes it
    try:
        return await resolver.resolve(name, 443)
    finally:
        await resolver.close()


def test_the_watchers_resolver_refuses_a_name_that_resolves_to_a_blocked_address(loopback_blocked, settings):
    assert run_async(resolved_by_the_watchers_resolver("localhost"))  # an ordinary address: as before
    loopback_blocked()
    with pytest.raises(kube.BlockedAddress, match=r"Refusing to connect to localhost: it now resolves to .*\("):
        run_async(resolved_by_the_watchers_resolver("localhost"))
    settings.FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS = True
    assert run_async(resolved_by_the_watchers_resolver("localhost"))


def test_the_watch_session_connects_through_that_resolver(hostile, loopback_blocked):
    hostile.mode, hostile.status, hostile.keep_alive = "status", b"200 OK", False
    hostile.body = b"{}"
    url = hostile.url.replace("127.0.0.1", "localhost") + "/version"

    async def fetch():
        session = kube.WatchSession()
        try:
            async with session.session.get(url) as response:
                return response.status
        finally:
            await session.close()

    assert run_async(fetch()) == 200
    loopback_blocked()
    with pytest.raises(aiohttp.ClientConnectorError) as refused:
        run_async(fetch())
    assert isinstance(refused.value.os_error, kube.BlockedAddress)
    assert hostile.requests == ["/version"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "fields, field, message",
    [
        (
            {"api_server": "https://169.254.169.254"},
            "api_server",
            "FedPortal does not connect to 169.254.169.254 is a link-local address (169.254.169.254)",
        ),
        ({"api_server": "https://metadata.google.internal"}, "api_server", "is a cloud metadata service"),
        ({"api_server": "https://10.9.9.9:99999"}, "api_server", "must be between 1 and 65535"),
        ({"api_server": "https://10.9.9.9:0"}, "api_server", "must be between 1 and 65535"),
        (
            {
                "ca_bundle": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----",
                "insecure_skip_tls_verify": True,
            },
            "insecure_skip_tls_verify",
            "Give a CA bundle or skip verification, not both.",
        ),
    ],
)
def test_registration_without_a_connection_test_refuses_what_the_form_refuses(fields, field, message):
    """The API registers with ``verify: false``: it stored link-local and metadata servers, ports out
    of range and a CA bundle beside skipped verification, all of which the form refuses."""
    with pytest.raises(ValidationError) as info:
        services.register_cluster(
            **{"name": "rv", "api_server": "https://10.9.9.9:6443", "token": "t", "verify": False, **fields}
        )
    assert any(message in m for m in info.value.message_dict[field]), info.value.message_dict
    assert not Cluster.objects.filter(name="rv").exists()


@pytest.mark.django_db
def test_a_link_local_server_registers_when_the_setting_allows_it(settings):
    settings.FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS = True
    services.register_cluster(name="rv", api_server="https://169.254.10.1:6443", token="t", verify=False, probe=False)
    assert Cluster.objects.filter(name="rv").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "stored",
    [
        {"api_server": "https://169.254.10.1:6443"},
        {"api_server": "https://10.9.9.9:99999"},
        {"ca_bundle": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n", "insecure_skip_tls_verify": True},
    ],
)
def test_a_cluster_stored_before_the_checks_can_still_be_relabelled(admin_user, stored):
    cluster = ClusterFactory(token="old")
    Cluster.objects.filter(pk=cluster.pk).update(**stored)  # as stored before the checks
    services.update_cluster(Cluster.objects.get(pk=cluster.pk), labels={"env": "dev"}, verify=False, actor=admin_user)
    assert Cluster.objects.get(pk=cluster.pk).labels == {"env": "dev"}


@pytest.mark.django_db
def test_turning_on_skipped_verification_beside_a_ca_bundle_is_refused(admin_user):
    cluster = ClusterFactory(token="old", ca_bundle="-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
    with pytest.raises(ValidationError) as info:
        services.update_cluster(cluster, insecure_skip_tls_verify=True, verify=False, actor=admin_user)
    assert info.value.message_dict == {"insecure_skip_tls_verify": ["Give a CA bundle or skip verification, not both."]}


def test_a_kubeconfig_context_with_a_ca_and_skipped_verification_is_marked_unusable():
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n").decode()
    text = f"""
kind: Config
clusters:
- {{name: both, cluster: {{server: "https://127.0.0.1:6443", certificate-authority-data: {ca}, insecure-skip-tls-verify: true}}}}
- {{name: fine, cluster: {{server: "https://127.0.0.1:6444", insecure-skip-tls-verify: true}}}}
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: both, context: {{cluster: both, user: u}}}}, {{name: fine, context: {{cluster: fine, user: u}}}}]
"""
    problems = {c.name: c.problem for c in parse_kubeconfig(text)}
    assert problems == {
        "both": "it gives a certificate authority and insecure-skip-tls-verify: give one or the other",
        "fine": "",
    }
