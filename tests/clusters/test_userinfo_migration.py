"""Migrations 0007 and 0008 remove a user name or password from API server URLs registered before
0006 refused them: every viewer of the cluster saw it. The audit log keeps its events as recorded
(its chain is tamper-evident), and shows them without it."""

import importlib

import pytest
from django.apps import apps

from clusters.models import Cluster
from tests.clusters.factories import ClusterFactory

migration = importlib.import_module("clusters.migrations.0007_strip_api_server_userinfo")
to_the_path = importlib.import_module("clusters.migrations.0008_strip_api_server_userinfo_to_the_path")


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


@pytest.mark.parametrize(
    "url,expected",
    [
        ("https://admin:s3cret@k8s.example.com:6443", "https://k8s.example.com:6443"),
        ("https://admin@k8s.example.com/prefix?x=1", "https://k8s.example.com/prefix?x=1"),
        ("https://a:b@c@10.0.0.1:6443", "https://10.0.0.1:6443"),
        ("https://k8s.example.com:6443/path@v1", "https://k8s.example.com:6443/path@v1"),
        ("https://u:p@[::1]:6443", "https://[::1]:6443"),
        # what 0007 left: a "?" or "#" in the password ended urlsplit's authority before the "@"
        ("https://admin:s3cr?et@k8s.example.com:6443", "https://k8s.example.com:6443"),
        ("https://admin:s3cr#et@k8s.example.com:6443/x", "https://k8s.example.com:6443/x"),
        ("not a url@all", "not a url@all"),
    ],
)
def test_0008_removes_the_userinfo_up_to_the_path(url, expected):
    assert to_the_path.without_userinfo(url) == expected
    assert to_the_path.without_userinfo(expected) == expected, "not idempotent"


@pytest.mark.django_db
def test_0008_cleans_what_0007_left():
    leaky = ClusterFactory(name="leaky")
    Cluster.objects.filter(pk=leaky.pk).update(api_server="https://admin:s3cr?et@leaky.example.com:6443")
    migration.strip_userinfo(apps, None)
    assert "s3cr" in Cluster.objects.get(pk=leaky.pk).api_server
    to_the_path.strip_userinfo(apps, None)
    assert Cluster.objects.get(pk=leaky.pk).api_server == "https://leaky.example.com:6443"
