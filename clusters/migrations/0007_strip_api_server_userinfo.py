"""Clusters registered before 0006 may hold a user name or password in their API server URL
(``https://user:password@host``), which every viewer of the cluster saw. The userinfo is removed
from those URLs here. It is not kept as a credential: the Kubernetes API dropped basic
authentication in 1.19, and a token or client certificate goes in the credential fields. Audit
events written before this keep what they recorded (the chain is tamper-evident and not rewritten)."""

from urllib.parse import urlsplit, urlunsplit

from django.db import migrations


def without_userinfo(url: str) -> str:
    """``url`` with any ``user:password@`` removed from its authority (the rest as it was)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def strip_userinfo(apps, schema_editor):
    Cluster = apps.get_model("clusters", "Cluster")
    for pk, url in Cluster.objects.filter(api_server__contains="@").values_list("pk", "api_server"):
        cleaned = without_userinfo(url)
        if cleaned != url:
            Cluster.objects.filter(pk=pk).update(api_server=cleaned)


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0006_api_server_without_userinfo"),
    ]

    operations = [migrations.RunPython(strip_userinfo, migrations.RunPython.noop)]
