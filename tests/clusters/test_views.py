"""Cluster views: every view per role, full page and htmx fragment, bad input, fixed query counts."""

import csv
import io
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from clusters.choices import ClusterRole, ClusterState
from clusters.models import Cluster, PollRequest
from clusters.views import IMPORT_SESSION_KEY
from fedportal.models import AuditEvent
from fedportal.tables import records
from tests.clusters.factories import ClusterFactory, ClusterStateChangeFactory, VersionSampleFactory
from tests.clusters.test_kubeconfig import alias_bomb

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def login(client):
    def as_user(user):
        if user is not None:
            client.force_login(user)
        return client

    return as_user


@pytest.fixture
def cluster():
    return ClusterFactory(name="m127", server_version="v1.27.3", version_minor=27, labels={"env": "prod"})


READ_URLS = [
    ("clusters:cluster_list", False),
    ("clusters:cluster_detail", True),
    ("clusters:summary", False),
]
ADMIN_GET_URLS = [
    ("clusters:cluster_create", False),
    ("clusters:cluster_import", False),
    ("clusters:cluster_edit", True),
    ("clusters:cluster_rotate_credentials", True),
    ("clusters:cluster_unjoin", True),
]


def url_for(name, needs_pk, cluster):
    return reverse(name, args=[cluster.pk]) if needs_pk else reverse(name)


# --- permissions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name, needs_pk", READ_URLS + ADMIN_GET_URLS)
def test_anonymous_is_sent_to_login(client, cluster, name, needs_pk):
    response = client.get(url_for(name, needs_pk, cluster))
    assert response.status_code == 302 and reverse("login") in response["Location"]


@pytest.mark.parametrize("name, needs_pk", READ_URLS + ADMIN_GET_URLS)
def test_user_without_a_role_gets_403(login, nobody, cluster, name, needs_pk):
    assert login(nobody).get(url_for(name, needs_pk, cluster)).status_code == 403


@pytest.mark.parametrize("name, needs_pk", READ_URLS)
@pytest.mark.parametrize("role", ["viewer", "operator", "admin_user"])
def test_every_role_reads_pages_and_fragments(request, login, cluster, name, needs_pk, role):
    client = login(request.getfixturevalue(role))
    url = url_for(name, needs_pk, cluster)
    page = client.get(url)
    assert page.status_code == 200
    assert b"<html" in page.content
    fragment = client.get(url, **HX)
    assert fragment.status_code == 200
    assert b"<html" not in fragment.content
    assert fragment["Vary"] and "HX-Request" in fragment["Vary"]


@pytest.mark.parametrize("name, needs_pk", ADMIN_GET_URLS)
@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_viewers_and_operators_cannot_open_admin_forms(request, login, cluster, name, needs_pk, role):
    assert login(request.getfixturevalue(role)).get(url_for(name, needs_pk, cluster)).status_code == 403


@pytest.mark.parametrize("name, needs_pk", ADMIN_GET_URLS)
def test_admin_opens_every_admin_form_as_page_and_fragment(login, admin_user, cluster, name, needs_pk):
    client = login(admin_user)
    url = url_for(name, needs_pk, cluster)
    assert b"<html" in client.get(url).content
    fragment = client.get(url, **HX)
    assert fragment.status_code == 200 and b"<html" not in fragment.content


def test_viewer_cannot_poll_and_operator_can(login, viewer, operator, cluster):
    url = reverse("clusters:cluster_poll", args=[cluster.pk])
    assert login(viewer).post(url).status_code == 403
    assert not PollRequest.objects.exists()
    response = login(operator).post(url)
    poll = PollRequest.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("clusters:poll_status", args=[poll.pk])


def test_operator_polls_the_fleet_and_sees_progress_fragment(login, operator, cluster):
    client = login(operator)
    response = client.post(reverse("clusters:fleet_poll"), **HX)
    assert response.status_code == 200
    assert b"0 of 1 probed" in response.content
    assert b'hx-trigger="every 1s"' in response.content
    poll = PollRequest.objects.get()
    assert poll.cluster is None and poll.total == 1
    page = client.get(reverse("clusters:poll_status", args=[poll.pk]))
    assert page.status_code == 200 and b'http-equiv="refresh"' in page.content


def test_finished_poll_stops_polling(login, viewer, cluster):
    poll = PollRequest.objects.create(total=1)
    Cluster.objects.filter(pk=cluster.pk).update(last_probe_at=poll.started_at)
    response = login(viewer).get(reverse("clusters:poll_status", args=[poll.pk]), **HX)
    assert b"Done:" in response.content and b"hx-trigger" not in response.content


def test_viewer_cannot_post_to_admin_views(login, viewer, cluster):
    client = login(viewer)
    for name in ("clusters:cluster_edit", "clusters:cluster_rotate_credentials", "clusters:cluster_unjoin"):
        assert client.post(reverse(name, args=[cluster.pk]), {"confirm_name": cluster.name}).status_code == 403
    assert client.post(reverse("clusters:cluster_create"), {"name": "x"}).status_code == 403
    assert client.post(reverse("clusters:cluster_test_connection"), {}).status_code == 403
    assert Cluster.objects.filter(pk=cluster.pk).exists()


# --- list ----------------------------------------------------------------------------------------


def test_list_filters_by_label_role_state_and_version(login, viewer):
    ClusterFactory(
        name="a",
        labels={"env": "prod", "topology.kubernetes.io/region": "eu"},
        version_minor=27,
        server_version="v1.27.3",
    )
    ClusterFactory(
        name="b", labels={"env": "dev"}, state=ClusterState.OFFLINE, version_minor=28, server_version="v1.28.2"
    )
    ClusterFactory(name="h", host=True, labels={}, version_minor=29, server_version="v1.29.4")
    client = login(viewer)

    def names(**params):
        response = client.get(reverse("clusters:cluster_list"), params)
        assert response.status_code == 200
        fragment = client.get(reverse("clusters:cluster_list"), params, **HX).content.decode()
        found = [c.name for c in records(response.context["table"])]
        assert all(f">{name}</a>" in fragment for name in found)
        return found

    assert names() == ["a", "b", "h"]
    assert names(label="env=prod") == ["a"]
    assert names(label="env") == ["a", "b"]
    assert names(label="topology.kubernetes.io/region=eu") == ["a"]
    assert names(role="host") == ["h"]
    assert names(state="Offline") == ["b"]
    assert names(version="1.28") == ["b"]
    assert names(version="v1.29.4") == ["h"]
    assert names(sort="-name") == ["h", "b", "a"]
    assert names(q="b") == ["b"]


@pytest.mark.parametrize("version", ["١.٢٧", "1.²⁷"])
def test_a_version_filter_in_digits_other_than_ascii_is_refused(login, viewer, cluster, version):
    response = login(viewer).get(reverse("clusters:cluster_list"), {"version": version})
    assert response.status_code == 200
    assert list(response.context["form"].errors) == ["version"]


@pytest.mark.parametrize("member", ["²", "١", "x", "99999999999999999999"])
def test_linking_a_capi_cluster_to_a_member_that_is_not_an_id_is_an_error_message(login, admin_user, member):
    from django.contrib.messages import get_messages

    from clusters.models import ManagedCluster

    managed = ManagedCluster.objects.create(management=ClusterFactory(name="mgmt"), namespace="default", name="w1")
    response = login(admin_user).post(reverse("clusters:lifecycle_link", args=[managed.pk]), {"member": member})
    assert response.status_code == 302 and response["Location"] == reverse("clusters:lifecycle")
    messages = [str(m) for m in get_messages(response.wsgi_request)]
    assert messages == ["Choose a registered cluster (or none)."]
    managed.refresh_from_db()
    assert managed.member is None and not AuditEvent.objects.filter(action="cluster.lifecycle_link").exists()


def test_list_with_bad_filters_ignores_them_and_shows_why(login, viewer, cluster):
    response = login(viewer).get(reverse("clusters:cluster_list"), {"label": "bad key!=x", "state": "Sideways"})
    assert response.status_code == 200
    assert response.context["form"].errors
    assert b"label:" in response.content


def test_list_of_1000_clusters_uses_a_fixed_number_of_queries(login, viewer, django_assert_max_num_queries):
    Cluster.objects.bulk_create(
        [
            Cluster(
                name=f"c{i:04d}",
                api_server=f"https://c{i}.example:6443",
                labels={"env": "prod" if i % 2 else "dev"},
                state=ClusterState.READY,
                server_version=f"v1.{25 + i % 8}.0",
                version_major=1,
                version_minor=25 + i % 8,
            )
            for i in range(1000)
        ]
    )
    client = login(viewer)
    client.get(reverse("clusters:cluster_list"))  # warm the session
    with django_assert_max_num_queries(8):
        response = client.get(reverse("clusters:cluster_list"), {"label": "env=prod", "page": 3})
    assert response.status_code == 200
    assert response.context["table"].page.paginator.count == 500
    assert len(records(response.context["table"])) == 50
    with django_assert_max_num_queries(8):
        assert client.get(reverse("clusters:cluster_list"), {"page": 20}, **HX).status_code == 200


def test_csv_export_streams_every_filtered_cluster_and_no_credentials(login, viewer, django_assert_max_num_queries):
    for i in range(120):
        ClusterFactory(name=f"exp-{i:03d}", labels={"env": "prod" if i < 100 else "dev"}, token=f"tok-{i}")
    client = login(viewer)
    client.get(reverse("clusters:cluster_list"))
    with django_assert_max_num_queries(8):
        response = client.get(reverse("clusters:cluster_list"), {"label": "env=prod", "format": "csv"})
        body = b"".join(response.streaming_content).decode("utf-8-sig")
    rows = list(csv.reader(io.StringIO(body)))
    assert rows[0][:4] == ["Name", "Role", "State", "Version"]
    assert len(rows) == 101
    assert "tok-" not in body and "credentials" not in body.lower()


# --- detail --------------------------------------------------------------------------------------


def test_detail_shows_version_platform_history_kubelets_and_last_error(login, viewer):
    cluster = ClusterFactory(
        name="m128",
        server_version="v1.28.2",
        platform="linux/arm64",
        kubelet_versions={"m128-node-1": "v1.28.2", "m128-node-2": "v1.27.9"},
        last_error="Timed out after 3s waiting for https://m128",
        token="very-secret-token",
        inventory_at=timezone.now() - timedelta(minutes=2),
    )
    ClusterStateChangeFactory(cluster=cluster, from_state="Ready", to_state="NotReady", reason="Timed out")
    VersionSampleFactory(cluster=cluster, git_version="v1.28.2")
    content = login(viewer).get(reverse("clusters:cluster_detail", args=[cluster.pk])).content.decode()
    for text in (
        "v1.28.2",
        "linux/arm64",
        "m128-node-2",
        "v1.27.9",
        "Timed out after 3s",
        "NotReady",
        "node list and /readyz read 2\xa0minutes ago",
    ):
        assert text in content
    assert "very-secret-token" not in content


def test_detail_of_a_missing_cluster_is_404(login, viewer):
    assert login(viewer).get(reverse("clusters:cluster_detail", args=[999999])).status_code == 404


def test_summary_counts_states_and_versions(login, viewer):
    ClusterFactory(name="a", state=ClusterState.READY)
    ClusterFactory(name="b", state=ClusterState.OFFLINE, version_minor=27)
    response = login(viewer).get(reverse("clusters:summary"))
    summary = response.context["summary"]
    assert summary["total"] == 2 and summary["by_state"]["Offline"] == 1
    assert {row["version"] for row in summary["versions"]} == {"1.27", "1.29"}


# --- register / test connection -----------------------------------------------------------------


def form_data(fleet, fleet_name, **overrides):
    """The register form filled in for the fleet's cluster ``fleet_name``."""
    name = fleet_name
    data = {
        "name": name,
        "api_server": fleet.url(name),
        "role": ClusterRole.MEMBER,
        "labels": "env=prod, team=payments",
        "auth_method": "token",
        "token": fleet.token(name),
    }
    data.update(overrides)
    return data


def test_admin_registers_a_cluster_through_the_form(login, admin_user, fleet):
    response = login(admin_user).post(reverse("clusters:cluster_create"), form_data(fleet, "m127"))
    cluster = Cluster.objects.get(name="m127")
    assert response.status_code == 302 and response["Location"] == reverse("clusters:cluster_detail", args=[cluster.pk])
    assert cluster.labels == {"env": "prod", "team": "payments"}
    assert cluster.server_version == "v1.27.3"


def test_htmx_register_redirects_the_client(login, admin_user, fleet):
    response = login(admin_user).post(reverse("clusters:cluster_create"), form_data(fleet, "m128"), **HX)
    assert response.status_code == 200 and response["HX-Redirect"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"name": "Bad_Name"}, "not a valid name"),
        ({"api_server": "not-a-url"}, "https://"),
        ({"labels": "env=prod, oops"}, "is not key=value"),
        ({"labels": "bad key=x"}, "is not key=value"),
        ({"labels": "-env=x"}, "label key"),
        ({"token": "wrong-token"}, "401 Unauthorized"),
        ({"token": ""}, "Enter the bearer token"),
        ({"ca_bundle": "garbage"}, "PEM"),
    ],
)
def test_bad_register_input_is_a_form_error_and_changes_nothing(login, admin_user, fleet, overrides, message):
    response = login(admin_user).post(reverse("clusters:cluster_create"), form_data(fleet, "m127", **overrides), **HX)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Cluster.objects.exists()
    assert "wrong-token" not in response.content.decode()


def test_duplicate_name_and_second_host_are_form_errors(login, admin_user, fleet):
    ClusterFactory(name="m127")
    ClusterFactory(name="boss", host=True)
    client = login(admin_user)
    response = client.post(reverse("clusters:cluster_create"), form_data(fleet, "m127"))
    assert response.status_code == 400 and "already registered" in response.content.decode()
    response = client.post(reverse("clusters:cluster_create"), form_data(fleet, "m128", role="host"))
    assert response.status_code == 400 and "at most one host" in response.content.decode()
    assert Cluster.objects.count() == 2


def test_unreachable_server_is_a_form_error(login, admin_user, fleet):
    fleet.set_down("m130")
    response = login(admin_user).post(reverse("clusters:cluster_create"), form_data(fleet, "m130"))
    assert response.status_code == 400 and "Cannot connect" in response.content.decode()
    assert not Cluster.objects.exists()


def test_skip_tls_shows_a_visible_warning(login, admin_user):
    content = login(admin_user).get(reverse("clusters:cluster_create")).content.decode()
    assert 'id="skip-tls-warning"' in content and "impersonate" in content


def test_test_connection_shows_the_version_without_saving(login, admin_user, fleet):
    response = login(admin_user).post(reverse("clusters:cluster_test_connection"), form_data(fleet, "m131"), **HX)
    content = response.content.decode()
    assert response.status_code == 200 and "Connected: v1.31.0" in content
    assert "<html" not in content
    assert not Cluster.objects.exists()


@pytest.mark.parametrize(
    "overrides, setup, reason",
    [
        ({"token": "wrong"}, None, "401 Unauthorized"),
        ({}, "refused", "Connection"),
        ({"api_server": "https://nowhere.invalid:6443"}, None, "DNS lookup failed"),
        ({}, "latency", "Timed out"),
    ],
)
def test_test_connection_shows_the_exact_reason(login, admin_user, fleet, settings, overrides, setup, reason):
    settings.FEDPORTAL_HEALTH_TIMEOUT_SECONDS = 0.5
    if setup == "refused":
        fleet.set_down("m127")
    elif setup == "latency":
        fleet.set_latency("m127", 2000)
    response = login(admin_user).post(
        reverse("clusters:cluster_test_connection"), form_data(fleet, "m127", **overrides), **HX
    )
    assert response.status_code == 200
    assert reason in response.content.decode()
    assert "wrong" not in response.content.decode().replace("went wrong", "")


def test_test_connection_without_htmx_renders_the_whole_form(login, admin_user, fleet):
    response = login(admin_user).post(reverse("clusters:cluster_test_connection"), form_data(fleet, "m127"))
    content = response.content.decode()
    assert "<html" in content and "Connected: v1.27.3" in content
    assert fleet.token("m127") not in content  # the token is never rendered back


# --- kubeconfig import ------------------------------------------------------------------------------


def test_kubeconfig_import_lists_contexts_then_registers_the_chosen_ones(login, admin_user, fleet):
    client = login(admin_user)
    text = fleet.kubeconfig_path.read_text()
    response = client.post(reverse("clusters:cluster_import"), {"step": "upload", "kubeconfig_text": text}, **HX)
    content = response.content.decode()
    assert response.status_code == 200
    assert "m127-readonly" in content and fleet.token("m127") not in content
    import re

    checked = re.findall(r'name="contexts" value="([^"]+)"[^>]*checked', content)
    assert checked == ["host", "m127", "m128", "m130", "m131"]  # one context per API server
    assert fleet.token("m127") not in str(client.session[IMPORT_SESSION_KEY])
    response = client.post(
        reverse("clusters:cluster_import"),
        {"step": "choose", "contexts": ["host", "m127"], "host_context": "host", "labels": "env=lab"},
    )
    assert response.status_code == 302
    assert sorted(Cluster.objects.values_list("name", "role")) == [("host", "host"), ("m127", "member")]
    assert IMPORT_SESSION_KEY not in client.session


def test_kubeconfig_upload_as_a_file(login, admin_user, fleet):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("config", fleet.kubeconfig_path.read_bytes())
    response = login(admin_user).post(reverse("clusters:cluster_import"), {"step": "upload", "kubeconfig_file": upload})
    assert response.status_code == 200 and response.context["contexts"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("clusters: [oops", "not valid YAML"),
        ("", "Upload a kubeconfig file or paste one"),
        ("kind: Config\ncontexts: []\n", "no contexts"),
        (alias_bomb(), "YAML aliases (*a) are not allowed"),
    ],
)
def test_malformed_kubeconfig_is_a_form_error(login, admin_user, text, message):
    response = login(admin_user).post(reverse("clusters:cluster_import"), {"step": "upload", "kubeconfig_text": text})
    assert response.status_code == 400 and message in response.content.decode()
    assert not Cluster.objects.exists()


@pytest.mark.parametrize("htmx", [False, True])
@pytest.mark.parametrize(
    "text, message",
    [
        # broken YAML after a token: the error names the line, the form comes back empty
        (
            "apiVersion: v1\nusers:\n- name: u\n  user: {token: sentinel-token-0123456789}\ncontexts: [oops\n",
            "not valid YAML",
        ),
        # valid YAML that is not a kubeconfig
        ("users:\n- name: u\n  user: {token: sentinel-token-0123456789}\n", "no contexts"),
    ],
)
def test_refused_kubeconfig_is_not_echoed_back(login, admin_user, text, message, htmx):
    response = login(admin_user).post(
        reverse("clusters:cluster_import"), {"step": "upload", "kubeconfig_text": text}, **(HX if htmx else {})
    )
    content = response.content.decode()
    assert response.status_code == 400 and message in content
    assert "sentinel-token-0123456789" not in content
    textarea = re.search(r'<textarea name="kubeconfig_text"[^>]*>(.*?)</textarea>', content, re.DOTALL)
    assert textarea is not None and textarea.group(1).strip() == ""


def test_the_upload_step_never_shows_a_servers_password_and_offers_no_server_it_would_refuse(login, admin_user):
    """The contexts table showed ``https://user:PASSWORDX@host`` back, and offered file://, gopher://
    and plain http:// to another machine as importable (reviewers' findings)."""
    servers = {
        "userinfo": "https://user:PASSWORDX@127.0.0.1:8600/c",
        "gopher": "gopher://127.0.0.1:70/",
        "remote-http": "http://example.com:6443",
        "metadata-ip": "https://169.254.169.254",
        "metadata-name": "https://metadata.google.internal:443",
        "link-local-v6": "https://[fe80::1]:6443",
        "fine": "https://127.0.0.1:8601/c",
    }
    text = "kind: Config\nclusters:\n" + "".join(
        f"- {{name: {name}, cluster: {{server: '{url}'}}}}\n" for name, url in servers.items()
    )
    text += "users: [{name: u, user: {token: t}}]\ncontexts:\n" + "".join(
        f"- {{name: {name}, context: {{cluster: {name}, user: u}}}}\n" for name in servers
    )
    client = login(admin_user)
    response = client.post(reverse("clusters:cluster_import"), {"step": "upload", "kubeconfig_text": text})
    content = response.content.decode()
    assert response.status_code == 200 and "PASSWORDX" not in content
    unusable = {c.name: c.problem for c in response.context["contexts"] if c.problem}
    assert set(unusable) == {"userinfo", "gopher", "remote-http", "metadata-ip", "metadata-name", "link-local-v6"}
    assert "user name or password" in unusable["userinfo"] and "https://" in unusable["gopher"]
    assert unusable["metadata-ip"] == (
        "FedPortal does not connect to 169.254.169.254 is a link-local address (169.254.169.254) "
        "(FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS)"
    )
    assert "cloud metadata service" in unusable["metadata-name"] and "link-local" in unusable["link-local-v6"]
    offered = re.findall(r'name="contexts" value="([^"]+)"', content)
    assert "fine" in offered and not set(offered) & set(unusable)
    response = client.post(reverse("clusters:cluster_import"), {"step": "choose", "contexts": ["userinfo"]})
    assert response.status_code == 400 and not Cluster.objects.exists()


def test_the_upload_step_offers_a_link_local_server_when_the_setting_allows_it(login, admin_user, settings):
    settings.FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS = True
    text = (
        "kind: Config\nclusters: [{name: c, cluster: {server: 'https://169.254.10.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
    )
    response = login(admin_user).post(reverse("clusters:cluster_import"), {"step": "upload", "kubeconfig_text": text})
    assert response.status_code == 200
    assert [c.problem for c in response.context["contexts"]] == [""]


def test_choosing_an_unknown_context_is_a_form_error(login, admin_user, fleet):
    client = login(admin_user)
    client.post(
        reverse("clusters:cluster_import"), {"step": "upload", "kubeconfig_text": fleet.kubeconfig_path.read_text()}
    )
    response = client.post(reverse("clusters:cluster_import"), {"step": "choose", "contexts": ["nope"]})
    assert response.status_code == 400 and "nope is not one of the available choices" in response.content.decode()
    assert not Cluster.objects.exists()


def test_choosing_without_an_upload_asks_to_upload_again(login, admin_user):
    response = login(admin_user).post(reverse("clusters:cluster_import"), {"step": "choose", "contexts": ["a"]})
    assert response.status_code == 400 and "upload it again" in response.content.decode()


# --- edit / rotate / unjoin ---------------------------------------------------------------------------


def test_admin_edits_labels(login, admin_user, cluster):
    response = login(admin_user).post(
        reverse("clusters:cluster_edit", args=[cluster.pk]),
        {"api_server": cluster.api_server, "role": "member", "labels": "env=staging"},
    )
    assert response.status_code == 302
    cluster.refresh_from_db()
    assert cluster.labels == {"env": "staging"}


def test_edit_with_bad_labels_changes_nothing(login, admin_user, cluster):
    response = login(admin_user).post(
        reverse("clusters:cluster_edit", args=[cluster.pk]),
        {"api_server": cluster.api_server, "role": "member", "labels": "env=a b=c d"},
        **HX,
    )
    assert response.status_code == 400
    cluster.refresh_from_db()
    assert cluster.labels == {"env": "prod"}


def test_rotate_with_a_wrong_token_changes_nothing(login, admin_user, fleet):
    from clusters import services

    cluster = services.register_cluster(name="m127", api_server=fleet.url("m127"), token=fleet.token("m127"))
    response = login(admin_user).post(
        reverse("clusters:cluster_rotate_credentials", args=[cluster.pk]), {"auth_method": "token", "token": "wrong"}
    )
    assert response.status_code == 400 and "401" in response.content.decode()
    cluster.refresh_from_db()
    assert cluster.credential_version == 1 and cluster.get_credentials()["token"] == fleet.token("m127")
    response = login(admin_user).post(
        reverse("clusters:cluster_rotate_credentials", args=[cluster.pk]),
        {"auth_method": "token", "token": fleet.readonly_token("m127")},
    )
    assert response.status_code == 302
    cluster.refresh_from_db()
    assert cluster.credential_version == 2


def test_rotate_page_never_shows_the_current_token(login, admin_user):
    cluster = ClusterFactory(token="the-current-token")
    content = login(admin_user).get(reverse("clusters:cluster_rotate_credentials", args=[cluster.pk])).content
    assert b"the-current-token" not in content


def test_unjoin_needs_the_name_typed(login, admin_user, cluster):
    client = login(admin_user)
    url = reverse("clusters:cluster_unjoin", args=[cluster.pk])
    response = client.post(url, {"confirm_name": "wrong"}, **HX)
    assert response.status_code == 400 and Cluster.objects.filter(pk=cluster.pk).exists()
    response = client.post(url, {"confirm_name": cluster.name})
    assert response.status_code == 302 and not Cluster.objects.filter(pk=cluster.pk).exists()
    assert AuditEvent.objects.filter(action="cluster.unjoin", cluster=cluster.name).exists()
    list_page = client.get(reverse("clusters:cluster_list"))
    assert cluster.name not in [c.name for c in records(list_page.context["table"])]


def test_finished_poll_fragment_tells_the_page_to_refresh_its_rows(login, viewer, cluster):
    poll = PollRequest.objects.create(total=1)
    client = login(viewer)
    running = client.get(reverse("clusters:poll_status", args=[poll.pk]), **HX)
    assert "HX-Trigger" not in running
    Cluster.objects.filter(pk=cluster.pk).update(last_probe_at=poll.started_at)
    done = client.get(reverse("clusters:poll_status", args=[poll.pk]), **HX)
    assert "clustersPolled" in done["HX-Trigger"]
    rows = client.get(reverse("clusters:cluster_list"), **HX).content.decode()
    assert 'hx-trigger="clustersPolled from:body, every 10s"' in rows


def test_an_unjoin_guard_sends_the_admin_elsewhere_and_blocks_the_post(login, admin_user, cluster):
    from clusters import services

    def guard(c):
        if c.pk == cluster.pk:
            return services.UnjoinBlock("It still holds propagated objects.", "/approvals/x/", "Request an unjoin")
        return None

    services.register_unjoin_guard(guard)
    try:
        client = login(admin_user)
        url = reverse("clusters:cluster_unjoin", args=[cluster.pk])
        page = client.get(url).content.decode()
        assert "still holds propagated objects" in page and 'href="/approvals/x/"' in page
        assert client.post(url, {"confirm_name": cluster.name}).status_code == 409
        assert Cluster.objects.filter(pk=cluster.pk).exists()
        services.unjoin_cluster(cluster, actor=admin_user)  # the approved path (no guards) still works
        assert not Cluster.objects.filter(pk=cluster.pk).exists()
    finally:
        services.unregister_unjoin_guard(guard)


def test_detail_summary_and_poll_pages_use_a_fixed_number_of_queries(login, viewer, django_assert_max_num_queries):
    cluster = ClusterFactory(name="busy")
    for _ in range(80):
        ClusterStateChangeFactory(cluster=cluster)
        VersionSampleFactory(cluster=cluster)
    ClusterFactory.create_batch(30)
    poll = PollRequest.objects.create(total=31)
    client = login(viewer)
    client.get(reverse("clusters:cluster_list"))
    with django_assert_max_num_queries(7):
        response = client.get(reverse("clusters:cluster_detail", args=[cluster.pk]))
    assert len(response.context["history"]) == 50 and len(response.context["samples"]) == 20
    with django_assert_max_num_queries(6):
        client.get(reverse("clusters:summary"), **HX)
    with django_assert_max_num_queries(6):
        client.get(reverse("clusters:poll_status", args=[poll.pk]), **HX)


# --- issue 23 item 9: the UI import skips registered clusters and says which; labels by pattern -----


def test_ui_import_skips_registered_clusters_and_derives_labels(client, admin_user, fleet):
    from clusters.services.kubeconfig import import_kubeconfig

    import_kubeconfig(fleet.kubeconfig_path.read_text(), contexts=["m127"], actor=admin_user)
    client.force_login(admin_user)
    url = reverse("clusters:cluster_import")
    page = client.post(url, {"step": "upload", "kubeconfig_text": fleet.kubeconfig_path.read_text()})
    body = page.content.decode()
    assert 'id="select-all-contexts"' in body and "js/select-all.js" in body
    assert '<option value="skip" selected>' in body
    response = client.post(
        url,
        {
            "step": "choose",
            "contexts": ["m127", "m128", "m130"],
            "existing": "skip",
            "labels": "team=fed",
            "label_pattern": r"m(?P<minor>\d+)",
        },
        follow=True,
    )
    assert response.status_code == 200
    texts = [str(m) for m in response.context["messages"]]
    assert "Imported 2 cluster(s): m128, m130." in texts
    assert "Skipped 1 already registered: m127 (a cluster named m127 is already registered)." in texts
    assert Cluster.objects.get(name="m130").labels == {"team": "fed", "minor": "130"}


def test_an_import_step_the_form_never_sends_is_a_400_that_starts_again(client, admin_user):
    """It was a 405 naming GET and POST as allowed, for a POST."""
    from clusters.models import Cluster

    client.force_login(admin_user)
    response = client.post(reverse("clusters:cluster_import"), {"step": "bogus"})
    assert response.status_code == 400
    assert "Unknown import step &#x27;bogus&#x27;: upload the kubeconfig again." in response.content.decode()
    assert not Cluster.objects.exists()
