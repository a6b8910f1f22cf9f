"""Cluster credentials and connections, after a security review: a member API server's redirect is
not followed by the watch; environment proxies get no token; a kubeconfig with a control character
is a form error; a labels edit works when the stored credentials cannot be decrypted; a rotation and
a change of API server made at once cannot pair one server with the other's token; credential
fields are starred in Django's error reports."""

import http.server
import json
import threading

import pytest
from cryptography.fernet import Fernet
from django.test import RequestFactory
from django.urls import reverse

from clusters import kube, services, views
from clusters.models import Cluster
from clusters.services import registry
from fedportal.models import AuditEvent
from fedportal.strict_yaml import StrictYAMLError, load_documents
from tests.clusters.factories import ClusterFactory
from tests.utils import run_async


class LocalServer:
    """A one-handler HTTP server on a free loopback port, recording the requests it answered."""

    def __init__(self, status: int, headers: dict | None = None, body: bytes = b""):
        self.requests = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests.append((self.path, self.headers.get("Authorization")))
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers():
    made = []

    def make(*args, **kwargs):
        made.append(LocalServer(*args, **kwargs))
        return made[-1]

    yield make
    for server in made:
        server.close()


def test_the_watch_follows_no_redirect(servers):
    """Only the registered API server passed the address policy: a 302 elsewhere is an error."""
    elsewhere = servers(200, body=b'{"kind": "Status", "secret": "elsewhere"}')
    member = servers(302, headers={"Location": f"{elsewhere.url}/computeMetadata/v1/"})
    conn = kube.ClusterConnection(name="evil", api_server=member.url, token="member-token")

    async def watch():
        session = kube.WatchSession()
        try:
            async for _ in kube.watch_objects(
                session, conn, api_version="v1", plural="configmaps", resource_version="1", timeout_seconds=1
            ):
                pass
        except kube.KubeError as exc:
            return exc
        finally:
            await session.close()

    error = run_async(watch())

    assert isinstance(error, kube.KubeError)
    assert member.requests and elsewhere.requests == []


def test_an_environment_proxy_gets_no_request(servers, monkeypatch):
    """The kubernetes client takes HTTP(S)_PROXY for every host (loopback included, NO_PROXY
    dropped); FedPortal connects straight to the API server, as its watch does."""
    proxy = servers(502)
    api = servers(200, body=b'{"major": "1", "minor": "30", "gitVersion": "v1.30.2"}')
    for name in ("HTTPS_PROXY", "https_proxy", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    conn = kube.ClusterConnection(name="lo", api_server=api.url, token="loopback-token")

    version = kube.get_version(conn, timeout=5)

    assert proxy.requests == [] and api.requests
    assert "30" in str(version)


@pytest.mark.parametrize("char", ["\x7f", "\x01", "\x0c", "\ufffe"])
def test_a_control_character_is_a_yaml_error(char):
    with pytest.raises(StrictYAMLError, match="Invalid YAML"):
        load_documents(f"kind: Config\n# {char}\n", max_bytes=1024)


KUBECONFIG = """kind: Config
clusters: [{name: c, cluster: {server: "https://c.example"}}]
users: [{name: u, user: {token: sentinel-token-0123456789}}]
contexts: [{name: a, context: {cluster: c, user: u}}]
# \x7f
"""


@pytest.mark.django_db
def test_a_kubeconfig_with_a_control_character_is_a_form_error(client, admin_user):
    client.force_login(admin_user)
    events = AuditEvent.objects.count()
    response = client.post(reverse("clusters:cluster_import"), {"step": "upload", "kubeconfig_text": KUBECONFIG})
    assert response.status_code == 400 and b"not valid YAML" in response.content
    assert b"sentinel-token" not in response.content
    assert not Cluster.objects.exists() and AuditEvent.objects.count() == events


@pytest.mark.django_db
def test_a_labels_edit_works_when_the_credentials_cannot_be_decrypted(client, admin_user, settings):
    cluster = ClusterFactory(name="m1", labels={"env": "prod"})
    settings.FEDPORTAL_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]  # the key that encrypted them is gone
    client.force_login(admin_user)
    url = reverse("clusters:cluster_edit", args=[cluster.pk])

    response = client.post(url, {"api_server": cluster.api_server, "role": "member", "labels": "env=staging"})

    assert response.status_code == 302
    assert Cluster.objects.get(pk=cluster.pk).labels == {"env": "staging"}
    # a connection change needs them: a form error that says what to do, nothing changed
    response = client.post(
        url,
        {"api_server": cluster.api_server, "role": "member", "labels": "env=staging", "insecure_skip_tls_verify": "on"},
    )
    assert response.status_code == 400 and b"cannot be decrypted" in response.content
    assert not Cluster.objects.get(pk=cluster.pk).insecure_skip_tls_verify


@pytest.mark.django_db
def test_a_rotation_racing_a_change_of_api_server_is_refused(monkeypatch, admin_user):
    cluster = ClusterFactory(name="a", api_server="https://a.example", token="token-for-a")

    def another_admin_moves_it_meanwhile(conn):
        services.update_cluster(
            Cluster.objects.get(pk=cluster.pk),
            actor=admin_user,
            verify=False,
            api_server="https://b.example",
            token="token-for-b",
        )

    monkeypatch.setattr(registry, "verify_connection", another_admin_moves_it_meanwhile)
    with pytest.raises(registry.ValidationError, match="changed by someone else meanwhile"):
        services.rotate_credentials(cluster, actor=admin_user, token="new-token-for-a")

    stored = Cluster.objects.get(pk=cluster.pk)
    assert (stored.api_server, stored.get_credentials()["token"]) == ("https://b.example", "token-for-b")


@pytest.mark.parametrize(
    "view", [views.cluster_create, views.cluster_import, views.cluster_edit, views.cluster_rotate_credentials]
)
def test_credential_fields_are_starred_in_error_reports(view):
    request = RequestFactory().post("/", {"token": "t"})
    request.user = None
    try:
        view(request) if view in (views.cluster_create, views.cluster_import) else view(request, 1)
    except Exception:  # noqa: BLE001 - only the marking matters here (an anonymous user is refused)
        pass
    assert set(request.sensitive_post_parameters) >= {"token", "client_key", "kubeconfig_text"}


@pytest.mark.django_db
@pytest.mark.parametrize("hostile", ["v1.28.2-" + "x" * 60, "v1.28.2\x00"])
def test_one_members_hostile_version_does_not_stop_the_probes_recorded_with_it(fleet, servers, hostile):
    """A gitVersion the version column cannot hold (over 64 characters, a NUL PostgreSQL refuses)
    failed the one transaction recording a chunk's probes: no cluster of it was ever recorded."""
    from clusters.probing import probe_clusters
    from tests.federation.factories import register_fleet

    honest = register_fleet(fleet, ["m128"])["m128"]
    body = json.dumps({"major": "1", "minor": "28", "gitVersion": hostile}).encode()
    member = servers(200, headers={"Content-Type": "application/json"}, body=body)
    rogue = ClusterFactory(name="rogue", api_server=member.url, token="rogue-token")
    Cluster.objects.update(last_probe_at=None)

    outcomes = {o.cluster_id: o for o in probe_clusters([honest.pk, rogue.pk], threads=2)}

    assert Cluster.objects.get(pk=honest.pk).last_probe_at is not None
    stored = Cluster.objects.get(pk=rogue.pk)
    assert stored.last_probe_at is not None and "\x00" not in stored.server_version
    assert "not a version" in str(outcomes[rogue.pk])
