"""Whether a namespaced resource's namespace will be there on each target cluster: present already,
or federated to it (the worker then creates it first). What the preview and the change request's
preflight warn about before anyone approves, instead of every target failing NamespaceNotFederated."""

from concurrent.futures import ThreadPoolExecutor

from clusters import kube
from clusters.services import connection_for
from federation.choices import PropagationReason, TargetAction
from federation.models import FederatedResource, PropagatedVersion, Revision
from federation.propagation.common import kube_timeout, read_namespace
from federation.propagation.planning import ClusterPlan, plan_targets


def namespace_resource(namespace: str) -> FederatedResource | None:
    """The federated Namespace named ``namespace``, if any."""
    return (
        FederatedResource.objects.select_related("type", "current_revision", "propagated_revision")
        .filter(type__group="", type__kind="Namespace", name=namespace, namespace="")
        .first()
    )


def federated_to(namespace: str) -> set[str]:
    """Names of the clusters the federated Namespace ``namespace`` is placed on: where propagation
    creates it before the objects in it (its propagated revision, else its current one)."""
    ns_resource = namespace_resource(namespace)
    revision = ns_resource and (ns_resource.propagated_revision or ns_resource.current_revision)
    if revision is None:
        return set()
    return {p.cluster.name for p in plan_targets(ns_resource, revision) if p.action == TargetAction.APPLY}


def missing_message(namespace: str, cluster_name: str) -> str:
    return (
        f"Namespace {namespace} does not exist on {cluster_name} and is not federated to it: propagation "
        f"would fail with NamespaceNotFederated. Federate Namespace {namespace} with {cluster_name} in its "
        f"placement; waiting targets are retried once it is propagated."
    )


def missing_namespaces(
    resource: FederatedResource, revision: Revision | None = None, plans: list[ClusterPlan] | None = None
) -> dict[str, str]:
    """Per target cluster (by name) where ``resource``'s namespace would be missing: the message.
    Clusters where the namespace is federated, or where another of our objects in it is OK, are not
    read; the others are read (one GET each, in parallel). An unreachable cluster is not reported:
    the preview and the preflight say so elsewhere."""
    if not resource.type.namespaced or not resource.namespace:
        return {}
    revision = revision or resource.current_revision
    if plans is None:
        plans = plan_targets(resource, revision)
    clusters = [p.cluster for p in plans if p.action == TargetAction.APPLY]
    if not clusters:
        return {}
    holding = set(
        PropagatedVersion.objects.filter(
            resource__namespace=resource.namespace, status=PropagationReason.OK, cluster__in=clusters
        ).values_list("cluster__name", flat=True)
    )
    unknown = [c for c in clusters if c.name not in holding]
    if unknown:  # planning the Namespace's placement only when an object of ours there does not settle it
        placed = federated_to(resource.namespace)
        unknown = [c for c in unknown if c.name not in placed]

    def missing(cluster) -> bool:
        try:
            live = read_namespace(connection_for(cluster), resource.namespace, timeout=min(kube_timeout(), 5.0))
        except (kube.KubeError, ValueError):
            return False
        return live is None

    if not unknown:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(unknown)))) as pool:
        flags = list(pool.map(missing, unknown))
    return {c.name: missing_message(resource.namespace, c.name) for c, flag in zip(unknown, flags) if flag}
