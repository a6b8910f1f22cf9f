"""Enable the rest of KubeFed's default federated types (its Helm chart enables ten: the six of
0002 plus ClusterRoles, Ingresses, Jobs and ReplicaSets).

KubeFed's chart targets Ingress at extensions/v1beta1, which Kubernetes stopped serving in 1.22;
every version the fleet runs serves networking.k8s.io/v1, so that is the Ingress enabled here.
"""

from django.db import migrations

SEED = [
    # group, version, kind, plural, scope, status collection
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", "Cluster", "Disabled"),
    ("networking.k8s.io", "v1", "Ingress", "ingresses", "Namespaced", "Disabled"),
    ("batch", "v1", "Job", "jobs", "Namespaced", "Disabled"),
    ("apps", "v1", "ReplicaSet", "replicasets", "Namespaced", "Enabled"),
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
    dependencies = [("federation", "0005_secgate_settings_change")]
    operations = [migrations.RunPython(seed, unseed)]
