"""API server URLs were stored as typed, so ``HTTPS://Host:443/path/`` and ``https://host/path`` could
both be registered (as two clusters for one server). From now on they are stored in one spelling
(clusters.validators.normalize_api_server): the scheme and host in lower case, the scheme's default
port dropped, no trailing slash; the path keeps its case. Here the stored URLs get that spelling (the
rule is repeated: a migration does not follow later changes of the code). Two clusters that already
share a server keep their rows; an admin unjoins one of them. Audit events keep what they recorded."""

from django.db import migrations

DEFAULT_PORTS = {"https": "443", "http": "80"}


def normalize(url: str) -> str:
    url = (url or "").strip().rstrip("/")
    scheme_end = url.find("://")
    if scheme_end < 0:
        return url
    start = scheme_end + 3
    slash = url.find("/", start)
    if "@" in (url[start:] if slash < 0 else url[start:slash]):
        return url  # userinfo: 0008 removed it, the validators refuse it
    scheme = url[:scheme_end].lower()
    end = next((i for i in range(start, len(url)) if url[i] in "/?#"), len(url))
    authority = url[start:end].lower()
    host, colon, port = authority.rpartition(":")
    if colon and "]" not in port and port in ("", DEFAULT_PORTS.get(scheme)):
        authority = host
    return f"{scheme}://{authority}{url[end:]}".rstrip("/")


def normalize_api_servers(apps, schema_editor):
    Cluster = apps.get_model("clusters", "Cluster")
    for pk, url in Cluster.objects.values_list("pk", "api_server").iterator(chunk_size=500):
        normalized = normalize(url)
        if normalized != url:
            Cluster.objects.filter(pk=pk).update(api_server=normalized)


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0008_strip_api_server_userinfo_to_the_path"),
    ]

    operations = [migrations.RunPython(normalize_api_servers, migrations.RunPython.noop)]
