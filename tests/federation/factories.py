"""Helpers for federation tests: clusters registered from a running fleet, resources, runs."""

import importlib

from clusters.choices import ClusterRole, ClusterState
from clusters.models import Cluster
from federation import propagation, services
from federation.choices import TargetState
from federation.models import FederatedResource, FederatedType, PropagationTarget

WEB_TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]},
        },
    },
}

# a native sidecar (an init container with restartPolicy: Always): a field v1.28 added, unknown to v1.27
SIDECAR_TEMPLATE = {
    **WEB_TEMPLATE,
    "spec": {
        **WEB_TEMPLATE["spec"],
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}],
                "containers": [{"name": "web", "image": "nginx:1.25"}],
            },
        },
    },
}


def register_fleet(fleet, names=None) -> dict[str, Cluster]:
    """Cluster rows for a RunningFleet's clusters, Ready, with their real versions."""
    clusters = {}
    for name in names or fleet.names:
        version = fleet.version(name)
        minor = int(version.lstrip("v").split(".")[1])
        cluster = Cluster(
            name=name,
            api_server=fleet.url(name),
            labels=fleet.labels(name),
            role=ClusterRole.HOST if name == "host" else ClusterRole.MEMBER,
            state=ClusterState.READY,
            server_version=version,
            version_major=1,
            version_minor=minor,
        )
        cluster.set_credentials({"token": fleet.token(name)})
        cluster.save()
        clusters[name] = cluster
    return clusters


def ensure_seeded_types() -> None:
    """Transactional tests flush the rows the seed migration made; put them back."""
    from django.apps import apps

    for migration in ("0002_seed_types", "0006_sched_kubefed_default_types"):
        importlib.import_module(f"federation.migrations.{migration}").seed(apps, None)


def ftype(kind: str) -> FederatedType:
    found = FederatedType.objects.filter(kind=kind).first()
    if found is None:
        ensure_seeded_types()
        found = FederatedType.objects.get(kind=kind)
    return found


def federate_namespace(name: str, clusters, *, actor=None):
    return services.create_resource(
        ftype("Namespace"), namespace="", name=name, template={}, placement={"clusters": list(clusters)}, actor=actor
    )


def namespace_everywhere(name: str):
    """A FederatedNamespace placed on every cluster (an empty clusterSelector), unless one exists:
    KubeFed places a namespaced resource only where its namespace is federated."""
    from federation.models import FederatedResource

    found = FederatedResource.objects.filter(type=ftype("Namespace"), name=name).first()
    return found or services.create_resource(
        ftype("Namespace"), namespace="", name=name, template={}, placement={"clusterSelector": {}}
    )


def web_deployment(
    *, namespace="shop", name="web", placement=None, overrides=None, scheduling=None, template=None, **kw
):
    """A Deployment as if its creation had been approved (tests propagate it directly): its drift
    policy is the approved one (``as_approved``)."""
    return as_approved(
        services.create_resource(
            ftype("Deployment"),
            namespace=namespace,
            name=name,
            template=template or WEB_TEMPLATE,
            placement=placement,
            overrides=overrides,
            scheduling=scheduling,
            **kw,
        )
    )


def as_approved(resource):
    """What applying an approved change request records of ``resource``: drift checks act on its
    policy, and removals outside a change request on its retention."""
    FederatedResource.objects.filter(pk=resource.pk).update(
        approved_drift_policy=resource.drift_policy, approved_retention=resource.retention
    )
    resource.approved_drift_policy, resource.approved_retention = resource.drift_policy, resource.retention
    return resource


def drain(run, *, rounds: int = 3):
    """Run every pending/retrying target of a run in this process (what the worker would do)."""
    for _ in range(rounds):
        pending = list(
            PropagationTarget.objects.filter(
                run=run, state__in=[TargetState.PENDING, TargetState.RETRYING]
            ).values_list("cluster_id", flat=True)
        )
        if not pending:
            return
        for cluster_id in pending:
            propagation.propagate_to_cluster(run.pk, cluster_id)
