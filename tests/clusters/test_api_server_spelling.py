"""One API server, one registration, however its URL is spelled: the scheme and host in any case, the
default port written out or not, a trailing slash or not (clusters.validators.normalize_api_server).
Checked through every way in: the register form, the REST API, a kubeconfig import, an edit, and
rows stored before the rule (migration 0009)."""

import importlib

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from api.tokens import create_token
from clusters import services
from clusters.models import Cluster
from clusters.services.kubeconfig import import_kubeconfig
from clusters.validators import normalize_api_server
from fedportal.models import AuditEvent
from tests.clusters.factories import ClusterFactory

migration = importlib.import_module("clusters.migrations.0009_normalize_api_server")

pytestmark = pytest.mark.django_db

STORED = "https://k8s.example.test/clusters/us-dev"
SPELLED_OTHERWISE = "HTTPS://K8S.Example.TEST:443/clusters/us-dev/"
DUPLICATE = "This API server is already registered as us-dev."

KUBECONFIG = """
kind: Config
clusters: [{name: c, cluster: {server: "%s"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: us-dev-again, context: {cluster: c, user: u}}]
"""


@pytest.mark.parametrize(
    "url, expected",
    [
        ("HTTPS://127.0.0.1:8600/clusters/us-dev", "https://127.0.0.1:8600/clusters/us-dev"),
        ("https://127.0.0.1:8600/clusters/us-dev/", "https://127.0.0.1:8600/clusters/us-dev"),
        (SPELLED_OTHERWISE, STORED),
        ("https://Host.Example:443", "https://host.example"),
        ("https://host.example:443/", "https://host.example"),
        ("http://127.0.0.1:80/", "http://127.0.0.1"),
        ("http://127.0.0.1:443", "http://127.0.0.1:443"),  # 443 is the default of https only
        ("https://host.example:6443/Clusters/US-Dev", "https://host.example:6443/Clusters/US-Dev"),  # path kept
        ("  https://host.example:6443//  ", "https://host.example:6443"),
        ("https://[FE80::1]:443/x", "https://[fe80::1]/x"),
        ("https://[::1]", "https://[::1]"),
        ("https://admin:S3cret@Host:443", "https://admin:S3cret@Host:443"),  # refused by the validators
        ("not a url", "not a url"),
        ("", ""),
    ],
)
def test_one_spelling_per_api_server(url, expected):
    assert normalize_api_server(url) == expected
    assert normalize_api_server(expected) == expected, "not idempotent"
    assert migration.normalize(url) == expected, "the migration's copy of the rule differs"


def test_a_new_registration_stores_the_normalised_url():
    cluster = services.register_cluster(
        name="us-dev", api_server="HTTPS://K8S.Example.test:443/Clusters/US-Dev/", token="t", verify=False, probe=False
    )
    assert Cluster.objects.get(pk=cluster.pk).api_server == "https://k8s.example.test/Clusters/US-Dev"
    assert AuditEvent.objects.get(action="cluster.register").after["api_server"] == (
        "https://k8s.example.test/Clusters/US-Dev"
    )


@pytest.mark.parametrize(
    "spelling",
    [
        SPELLED_OTHERWISE,
        STORED + "/",
        "HTTPS://K8S.EXAMPLE.TEST/clusters/us-dev",
        "https://k8s.example.test:443/clusters/us-dev",
    ],
)
def test_the_service_refuses_a_registered_server_spelled_otherwise(spelling):
    ClusterFactory(name="us-dev", api_server=STORED)
    with pytest.raises(ValidationError) as info:
        services.register_cluster(name="us-dev-again", api_server=spelling, token="t", verify=False)
    assert info.value.message_dict["api_server"] == [DUPLICATE]
    assert Cluster.objects.count() == 1


def test_a_path_in_another_case_is_another_server():
    ClusterFactory(name="us-dev", api_server=STORED)
    cluster = services.register_cluster(
        name="us-dev-2", api_server="https://k8s.example.test/clusters/US-DEV", token="t", verify=False, probe=False
    )
    assert cluster.api_server == "https://k8s.example.test/clusters/US-DEV"


def test_the_register_form_refuses_a_registered_server_spelled_otherwise(client, admin_user):
    ClusterFactory(name="us-dev", api_server=STORED)
    client.force_login(admin_user)
    data = {
        "name": "us-dev-again",
        "api_server": SPELLED_OTHERWISE,
        "role": "member",
        "auth_method": "token",
        "token": "t",
    }
    response = client.post(reverse("clusters:cluster_create"), data)
    assert response.status_code == 400
    assert DUPLICATE in response.content.decode()
    assert list(Cluster.objects.values_list("name", flat=True)) == ["us-dev"]


def test_the_api_refuses_a_registered_server_spelled_otherwise(admin_user):
    ClusterFactory(name="us-dev", api_server=STORED)
    bearer = {"Authorization": f"Bearer {create_token(admin_user, actor=admin_user).secret}"}
    body = {"name": "us-dev-again", "api_server": SPELLED_OTHERWISE, "token": "t", "verify": False}
    response = Client().post("/api/v1/clusters", body, content_type="application/json", headers=bearer)
    assert response.status_code == 400
    assert response.json()["fields"]["api_server"] == [DUPLICATE]
    assert Cluster.objects.count() == 1


def test_the_api_stores_the_normalised_url(admin_user):
    bearer = {"Authorization": f"Bearer {create_token(admin_user, actor=admin_user).secret}"}
    body = {"name": "us-dev", "api_server": SPELLED_OTHERWISE, "token": "t", "verify": False}
    response = Client().post("/api/v1/clusters", body, content_type="application/json", headers=bearer)
    assert response.status_code == 201, response.content
    assert Cluster.objects.get(name="us-dev").api_server == STORED


def test_a_kubeconfig_import_refuses_a_registered_server_spelled_otherwise(admin_user):
    ClusterFactory(name="us-dev", api_server=STORED)
    with pytest.raises(ValidationError) as info:
        import_kubeconfig(KUBECONFIG % SPELLED_OTHERWISE, actor=admin_user, verify=False)
    assert info.value.messages == [f"us-dev-again: {DUPLICATE}"]
    assert Cluster.objects.count() == 1


def test_a_kubeconfig_import_skips_a_registered_server_spelled_otherwise(admin_user):
    ClusterFactory(name="us-dev", api_server=STORED)
    report = import_kubeconfig(KUBECONFIG % SPELLED_OTHERWISE, actor=admin_user, verify=False, skip_existing=True)
    assert report.created == []
    assert report.skipped == [("us-dev-again", "its API server is already registered as us-dev")]


def test_a_kubeconfig_import_stores_the_normalised_url(admin_user):
    report = import_kubeconfig(KUBECONFIG % SPELLED_OTHERWISE, actor=admin_user, verify=False)
    assert [c.name for c in report.created] == ["us-dev-again"]
    assert Cluster.objects.get(name="us-dev-again").api_server == STORED


def test_an_edit_to_a_registered_server_spelled_otherwise_is_refused():
    ClusterFactory(name="us-dev", api_server=STORED)
    other = ClusterFactory(name="eu-prod")
    with pytest.raises(ValidationError) as info:
        services.update_cluster(other, api_server=SPELLED_OTHERWISE, token="t", verify=False)
    assert info.value.message_dict["api_server"] == [DUPLICATE]
    assert Cluster.objects.get(pk=other.pk).api_server == "https://eu-prod.example.test:6443"


def test_a_row_stored_before_normalisation_is_still_a_duplicate():
    legacy = ClusterFactory(name="us-dev")
    Cluster.objects.filter(pk=legacy.pk).update(api_server=SPELLED_OTHERWISE)
    with pytest.raises(ValidationError) as info:
        services.register_cluster(name="us-dev-again", api_server=STORED, token="t", verify=False)
    assert info.value.message_dict["api_server"] == [DUPLICATE]


def test_the_migration_normalises_stored_urls_and_nothing_else():
    legacy = ClusterFactory(name="us-dev")
    kept = ClusterFactory(name="eu-prod", api_server="https://eu.example.test:6443/Path")
    Cluster.objects.filter(pk=legacy.pk).update(api_server=SPELLED_OTHERWISE)
    migration.normalize_api_servers(apps, None)
    assert Cluster.objects.get(pk=legacy.pk).api_server == STORED
    assert Cluster.objects.get(pk=kept.pk).api_server == "https://eu.example.test:6443/Path"
