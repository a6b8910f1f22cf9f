"""Seed the federated types every KubeFed install enabled by default."""

from django.db import migrations

SEED = [
    # group, version, kind, plural, scope, status collection
    ("", "v1", "Namespace", "namespaces", "Cluster", "Disabled"),
    ("apps", "v1", "Deployment", "deployments", "Namespaced", "Enabled"),
    ("", "v1", "Service", "services", "Namespaced", "Disabled"),
    ("", "v1", "ConfigMap", "configmaps", "Namespaced", "Disabled"),
    ("", "v1", "Secret", "secrets", "Namespaced", "Disabled"),
    ("", "v1", "ServiceAccount", "serviceaccounts", "Namespaced", "Disabled"),
]


def seed(apps, schema_editor):
    FederatedType = apps.get_model("federation", "FederatedType")
    for group, version, kind, plural, scope, status in SEED:
        FederatedType.objects.get_or_create(
            group=group,
            kind=kind,
            defaults={"version": version, "plural": plural, "scope": scope, "propagation": "Enabled", "status_collection": status},
        )


def unseed(apps, schema_editor):
    FederatedType = apps.get_model("federation", "FederatedType")
    for group, _version, kind, *_ in SEED:
        FederatedType.objects.filter(group=group, kind=kind, resources__isnull=True).delete()


class Migration(migrations.Migration):
    dependencies = [("federation", "0001_initial")]
    operations = [migrations.RunPython(seed, unseed)]
