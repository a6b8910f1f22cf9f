"""clusters.kube against the fleet simulator (a real HTTP API server; nothing mocked)."""

import copy
import json
import re

import pytest

from clusters import kube


def conn(fleet, name, *, token=None, cache_key=None, **kwargs):
    return kube.ClusterConnection(
        name=name,
        api_server=fleet.url(name),
        token=token if token is not None else fleet.token(name),
        ca_data=open(fleet.ca_path).read() if fleet.ca_path else None,
        cache_key=cache_key,
        **kwargs,
    )


def test_get_version_returns_the_clusters_git_version(fleet):
    info = kube.get_version(conn(fleet, "m127"), timeout=3)
    assert info.git_version == "v1.27.3"
    assert (info.major, info.minor) == (1, 27)
    assert info.minor_version == "1.27"
    assert info.platform


def test_check_ready_and_list_nodes_read_kubelets_and_topology(fleet):
    c = conn(fleet, "host")
    assert kube.check_ready(c, timeout=3).ok
    nodes = kube.list_nodes(c, timeout=3)
    assert len(nodes) == 3
    assert {n.kubelet_version for n in nodes} <= {"v1.29.4", "v1.28.9"}
    assert all(n.region == "eu-west-1" for n in nodes)
    assert all(n.ready for n in nodes)


def test_wrong_token_is_a_permanent_unauthorized_error_without_the_token(fleet):
    with pytest.raises(kube.KubePermanentError) as info:
        kube.get_version(conn(fleet, "m128", token="not-the-token"), timeout=3)
    assert info.value.kind == kube.KIND_UNAUTHORIZED
    assert info.value.status == 401
    assert "not-the-token" not in str(info.value)


def test_connection_dropped_by_a_down_cluster_is_transient_and_unreachable(fleet):
    fleet.set_down("m130", mode="refused")  # the simulator drops the connection without an answer
    with pytest.raises(kube.KubeTransientError) as info:
        kube.get_version(conn(fleet, "m130"), timeout=2)
    assert info.value.kind in kube.UNREACHABLE_KINDS
    assert fleet.token("m130") not in info.value.message


def test_refused_port_is_a_transient_refused_error():
    from tests.fleet_fixtures import free_port

    c = kube.ClusterConnection(name="x", api_server=f"http://127.0.0.1:{free_port()}", token="t")
    with pytest.raises(kube.KubeTransientError) as info:
        kube.get_version(c, timeout=2)
    assert info.value.kind == kube.KIND_REFUSED
    assert "refused" in info.value.message.lower()


def test_a_server_without_readyz_is_checked_through_healthz(fleet):
    fleet.admin("POST", "/clusters/m128/faults", {"noReadyz": True})  # before 1.16, or a /healthz-only proxy
    result = kube.check_ready(conn(fleet, "m128"), timeout=3)
    assert result.ok and result.detail == "ok"


def test_a_bad_no_readyz_fault_is_refused(fleet):
    from tests.fleet_fixtures import FleetError

    with pytest.raises(FleetError, match="noReadyz must be true or false"):
        fleet.admin("POST", "/clusters/m128/faults", {"noReadyz": "yes"})


def test_503_makes_the_cluster_not_ready_but_reachable(fleet):
    fleet.set_down("m130", mode="503")
    result = kube.check_ready(conn(fleet, "m130"), timeout=2)
    assert not result.ok
    with pytest.raises(kube.KubeTransientError) as info:
        kube.get_version(conn(fleet, "m130"), timeout=2)
    assert info.value.kind == kube.KIND_SERVER_ERROR


def test_slow_cluster_times_out_within_the_timeout(fleet):
    import time

    fleet.set_latency("m131", 3000)
    started = time.monotonic()
    with pytest.raises(kube.KubeTransientError) as info:
        kube.get_version(conn(fleet, "m131"), timeout=0.5)
    assert info.value.kind == kube.KIND_TIMEOUT
    assert time.monotonic() - started < 2.5


def test_unresolvable_host_is_a_dns_error():
    c = kube.ClusterConnection(name="x", api_server="https://no-such-host.invalid:6443", token="t")
    with pytest.raises(kube.KubeTransientError) as info:
        kube.get_version(c, timeout=2)
    assert info.value.kind == kube.KIND_DNS


def test_clients_are_cached_per_cluster_and_credential_version(fleet):
    kube.clear_client_cache()
    kube.get_version(conn(fleet, "m127", cache_key=(1, 1)), timeout=3)
    kube.get_version(conn(fleet, "m127", cache_key=(1, 1)), timeout=3)
    assert kube.cached_client_count() == 1
    kube.get_version(conn(fleet, "m127", cache_key=(1, 2)), timeout=3)
    assert kube.cached_client_count() == 1  # the old version's client was dropped
    kube.get_version(conn(fleet, "m128", cache_key=(2, 1)), timeout=3)
    assert kube.cached_client_count() == 2
    kube.forget_client((1, 2))
    assert kube.cached_client_count() == 1
    kube.clear_client_cache()


# What the apiserver's YAML reader (go-yaml: scannerc.go, readerc.go) does with what an apply body
# holds: a surrogate escape is refused ("found invalid Unicode character escape code"), a raw DEL, C1
# control or U+FFFE is refused ("control characters are not allowed"), a raw NEL becomes a space;
# raw characters above U+FFFF and \u escapes of the others are read back unchanged.
@pytest.mark.parametrize(
    "text, raw, escaped",
    [
        ("grüß 你好", "grüß 你好".encode(), None),
        ("emoji 😀 𝟙", "😀 𝟙".encode(), None),  # not \ud83d\ude00: a surrogate escape is refused
        ("del \x7f", None, b"\\u007f"),
        ("nel \x85 c1 \x9f", None, b"\\u0085 c1 \\u009f"),
        ("bom-like \ufffe", None, b"\\ufffe"),
        ('quote " backslash \\ tab \t', None, b'quote \\" backslash \\\\ tab \\t'),
    ],
)
def test_an_apply_body_holds_only_what_the_apiservers_yaml_reader_accepts(text, raw, escaped):
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": text}}
    body = kube.apply_body(manifest)
    assert json.loads(body) == manifest
    assert not re.search(rb"\\u[dD][89abAB]", body), "no surrogate escape"
    assert not re.search(rb"[\x7f]|\xc2[\x80-\x9f]|\xef\xbf\xbe", body), "no raw DEL, C1 control or U+FFFE"
    if raw is not None:
        assert raw in body
    if escaped is not None:
        assert escaped in body


@pytest.mark.parametrize(
    "manifest",
    [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": "v"}},
        # a uid already there is replaced; keys named uid elsewhere are left as they are
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "x", "namespace": "n", "uid": "old", "labels": {"uid": "uid"}},
            "spec": {"template": {"metadata": {"annotations": {"uid": '"uid":"x"'}}}},
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": None, "data": {"k": 'grüß 😀 \x7f "q"'}},
        {"apiVersion": "v1", "kind": "ConfigMap"},
    ],
)
@pytest.mark.parametrize("uid", ["0b7c5f0e-5d0a-4a53-9a38-9f1b8d3b2c11", 'odd "uid" \\ 😀'])
def test_uid_apply_bodies_are_the_body_of_the_manifest_naming_that_uid(manifest, uid):
    before = copy.deepcopy(manifest)
    bodies = kube.UidApplyBodies(manifest)
    named = {**manifest, "metadata": {**(manifest.get("metadata") or {}), "uid": uid}}
    assert bodies.naming(uid) == kube.apply_body(named)
    assert bodies.manifest is manifest and manifest == before  # the shared manifest is left as it was


def test_uid_apply_bodies_serialise_whole_when_the_marker_is_not_alone(monkeypatch):
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": "ab" * 16}}
    monkeypatch.setattr(kube.os, "urandom", lambda n: bytes.fromhex("ab" * n))  # the marker: "abab...ab"
    bodies = kube.UidApplyBodies(manifest)
    assert bodies.naming("u-1") == kube.apply_body({**manifest, "metadata": {"name": "x", "uid": "u-1"}})


def test_server_side_apply_get_list_delete_round_trip(fleet):
    c = conn(fleet, "m128")
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "fp-test", "namespace": "default", "labels": {"app": "fp"}},
        "data": {"a": "1", "greeting": 'grüß dich — 你好 😀 "quoted"\n'},
    }
    # the manifest is sent as FedPortal serialised it (apply_object), every character intact
    result = kube.apply_object(c, manifest, plural="configmaps", namespaced=True, timeout=3)
    assert result.object["data"] == manifest["data"]
    assert kube.get_object(c, api_version="v1", plural="configmaps", namespace="default", name="fp-test", timeout=3)
    listed = kube.list_objects(
        c, api_version="v1", plural="configmaps", namespace="default", label_selector="app=fp", timeout=3
    )
    assert [o["metadata"]["name"] for o in listed] == ["fp-test"]
    assert kube.delete_object(c, api_version="v1", plural="configmaps", namespace="default", name="fp-test", timeout=3)
    assert not kube.delete_object(
        c, api_version="v1", plural="configmaps", namespace="default", name="fp-test", timeout=3
    )
    assert (
        kube.get_object(c, api_version="v1", plural="configmaps", namespace="default", name="fp-test", timeout=3)
        is None
    )


def test_strict_field_validation_rejects_unknown_fields_and_warn_returns_warnings(fleet):
    c = conn(fleet, "m127")
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            },
            "notAField": True,
        },
    }
    with pytest.raises(kube.KubePermanentError) as info:
        kube.apply_object(c, manifest, plural="deployments", namespaced=True, timeout=3)
    assert info.value.kind == kube.KIND_BAD_REQUEST
    assert "notAField" in info.value.message
    result = kube.apply_object(c, manifest, plural="deployments", namespaced=True, field_validation="Warn", timeout=3)
    assert any("notAField" in w for w in result.warnings)


def test_tls_fleet_verifies_with_the_ca_and_rejects_without_it(fleet_factory):
    from tests.fleet_fixtures import DEFAULT_FLEET

    tls_fleet = fleet_factory({"clusters": DEFAULT_FLEET["clusters"][:2]}, tls=True)
    assert kube.get_version(conn(tls_fleet, "m127"), timeout=3).git_version == "v1.27.3"
    bad_ca = kube.ClusterConnection(
        name="m127",
        api_server=tls_fleet.url("m127"),
        token=tls_fleet.token("m127"),
    )
    with pytest.raises(kube.KubePermanentError) as info:
        kube.get_version(bad_ca, timeout=3)
    assert info.value.kind == kube.KIND_TLS
    insecure = kube.ClusterConnection(
        name="m127", api_server=tls_fleet.url("m127"), token=tls_fleet.token("m127"), insecure_skip_tls_verify=True
    )
    assert kube.get_version(insecure, timeout=3).git_version == "v1.27.3"


# --- client certificates (the simulator speaks tokens only: a small mutual-TLS server here) -----


def _pki(tmp_path):
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def key_pem(key):
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()

    def cert(subject, issuer_name, public_key, signer, *, ca=False, san=None):
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return builder.sign(signer, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = cert("test-ca", "test-ca", ca_key.public_key(), ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = cert(
        "127.0.0.1", "test-ca", server_key.public_key(), ca_key, san=[x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = cert("fedportal", "test-ca", client_key.public_key(), ca_key)
    for name, text in {"ca.crt": ca, "server.crt": server, "server.key": key_pem(server_key)}.items():
        (tmp_path / name).write_text(text)
    return ca, client, key_pem(client_key)


@pytest.fixture
def mtls_server(tmp_path):
    import http.server
    import json
    import ssl
    import threading

    ca, client_cert, client_key = _pki(tmp_path)

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            subject = dict(x[0] for x in self.connection.getpeercert()["subject"])
            body = json.dumps({"gitVersion": "v1.30.2", "major": "1", "minor": "30", "platform": subject["commonName"]})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    context.load_verify_locations(tmp_path / "ca.crt")
    context.verify_mode = ssl.CERT_REQUIRED
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_port}", ca, client_cert, client_key
    server.shutdown()
    server.server_close()


def test_client_certificate_authentication_over_mutual_tls(mtls_server):
    url, ca, client_cert, client_key = mtls_server
    c = kube.ClusterConnection(
        name="mtls", api_server=url, client_certificate=client_cert, client_key=client_key, ca_data=ca
    )
    info = kube.get_version(c, timeout=3)
    assert info.git_version == "v1.30.2" and info.platform == "fedportal"  # the server saw our certificate
    without_cert = kube.ClusterConnection(name="mtls", api_server=url, token="t", ca_data=ca)
    with pytest.raises(kube.KubeError) as error:
        kube.get_version(without_cert, timeout=3)
    assert error.value.kind in ({kube.KIND_TLS} | kube.UNREACHABLE_KINDS)


def test_a_watch_tls_context_keeps_no_private_key_on_disk(mtls_server):
    """The watcher's TLS context for a client certificate: the key was written to a file to load it,
    and the file stayed until the process exited, one more per credential rotation (a reviewer's
    finding). It is removed once loaded, and the context still authenticates."""
    import glob
    import ssl
    import tempfile
    import urllib.request

    from tests.utils import run_async

    url, ca, client_cert, client_key = mtls_server
    c = kube.ClusterConnection(
        name="mtls", api_server=url, client_certificate=client_cert, client_key=client_key, ca_data=ca
    )
    pattern = f"{tempfile.gettempdir()}/fedportal-kube-*/*"
    before = set(glob.glob(pattern))

    async def context():
        session = kube.WatchSession()
        try:
            return session.ssl_for(c), set(glob.glob(pattern))  # while the session is open
        finally:
            await session.close()

    made, files = run_async(context())  # not on the main thread: Playwright's loop may run there
    assert isinstance(made, ssl.SSLContext)
    assert files == before, "no certificate or key file kept while the watches run"
    with urllib.request.urlopen(url + "/version", context=made, timeout=5) as response:
        assert b'"platform": "fedportal"' in response.read()  # the server saw our certificate


@pytest.mark.django_db
def test_register_with_a_client_certificate_stores_it_encrypted(mtls_server):
    from clusters import services
    from clusters.choices import AuthMethod

    url, ca, client_cert, client_key = mtls_server
    cluster = services.register_cluster(
        name="mtls", api_server=url, client_certificate=client_cert, client_key=client_key, ca_bundle=ca
    )
    assert cluster.auth_method == AuthMethod.CLIENT_CERTIFICATE
    assert cluster.server_version == "v1.30.2"
    assert "PRIVATE KEY" not in cluster.credentials_encrypted
    assert services.connection_for(cluster).client_key.strip() == client_key.strip()
