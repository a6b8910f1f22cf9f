"""Migration 0007 removes a user name or password from API server URLs registered before 0006
refused them: every viewer of the cluster saw it."""

import importlib

import pytest
from django.apps import apps

from clusters.models import Cluster
from tests.clusters.factories import ClusterFactory

migration = importlib.import_module("clusters.migrations.0007_strip_api_server_userinfo")


@pytest.mark.parametrize(
    "url,expected",
    [
        ("https://admin:s3cret@k8s.example.com:6443", "https://k8s.example.com:6443"),
        ("https://admin@k8s.example.com/prefix?x=1", "https://k8s.example.com/prefix?x=1"),
        ("https://a:b@c@10.0.0.1:6443", "https://10.0.0.1:6443"),  # the last @ ends the userinfo
        ("https://k8s.example.com:6443/path@v1", "https://k8s.example.com:6443/path@v1"),  # not in the authority
        ("https://[::1]:6443", "https://[::1]:6443"),
    ],
)
def test_only_the_userinfo_is_removed(url, expected):
    assert migration.without_userinfo(url) == expected


@pytest.mark.django_db
def test_registered_urls_lose_their_userinfo_and_nothing_else_changes(client, viewer):
    leaky = ClusterFactory(name="leaky")
    clean = ClusterFactory(name="clean", api_server="https://clean.example.com:6443/path@v1")
    Cluster.objects.filter(pk=leaky.pk).update(api_server="https://admin:hunter2-pw@leaky.example.com:6443")
    migration.strip_userinfo(apps, None)
    assert Cluster.objects.get(pk=leaky.pk).api_server == "https://leaky.example.com:6443"
    assert Cluster.objects.get(pk=clean.pk).api_server == "https://clean.example.com:6443/path@v1"
    client.force_login(viewer)
    page = client.get(f"/clusters/{leaky.pk}/")
    assert page.status_code == 200 and b"hunter2-pw" not in page.content
