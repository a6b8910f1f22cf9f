"""0007 found a URL's userinfo with urlsplit, whose authority ends at a "?" or "#" too: a password
holding one (``https://admin:s3cr?et@host``) was left in the URL, and the validator let such URLs in.
Here the userinfo is what lies between "://" and the last "@" before the first "/" after it, as
clusters.validators.url_userinfo (the rule is repeated here: a migration does not follow later
changes of the code)."""

from django.db import migrations


def without_userinfo(url: str) -> str:
    """``url`` with any ``user:password@`` removed (the rest as it was)."""
    scheme_end = url.find("://")
    if scheme_end < 0:
        return url
    start = scheme_end + 3
    slash = url.find("/", start)
    authority = url[start:] if slash < 0 else url[start:slash]
    return url[:start] + url[start + authority.rfind("@") + 1 :]


def strip_userinfo(apps, schema_editor):
    Cluster = apps.get_model("clusters", "Cluster")
    for pk, url in Cluster.objects.filter(api_server__contains="@").values_list("pk", "api_server"):
        cleaned = without_userinfo(url)
        if cleaned != url:
            Cluster.objects.filter(pk=pk).update(api_server=cleaned)


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0007_strip_api_server_userinfo"),
    ]

    operations = [migrations.RunPython(strip_userinfo, migrations.RunPython.noop)]
