"""factory_boy factories for the cluster registry."""

import factory
from django.utils import timezone

from clusters.choices import AuthMethod, ClusterRole, ClusterState
from clusters.models import Cluster, ClusterStateChange, VersionSample


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Cluster
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"member-{n}")
    api_server = factory.LazyAttribute(lambda o: f"https://{o.name}.example.test:6443")
    role = ClusterRole.MEMBER
    labels = factory.LazyFunction(lambda: {"env": "prod"})
    auth_method = AuthMethod.TOKEN
    state = ClusterState.READY
    server_version = "v1.29.4"
    version_major = 1
    version_minor = 29
    platform = "linux/amd64"
    region = "eu-west-1"
    zones = factory.LazyFunction(lambda: ["eu-west-1a"])
    node_count = 1
    kubelet_versions = factory.LazyAttribute(lambda o: {f"{o.name}-node-1": o.server_version})
    last_probe_at = factory.LazyFunction(timezone.now)
    token = "secret-token-for-tests"  # not a model field: stored encrypted by set_credentials

    class Params:
        host = factory.Trait(role=ClusterRole.HOST, name="host")
        unknown = factory.Trait(
            state=ClusterState.UNKNOWN, server_version="", version_major=None, version_minor=None, last_probe_at=None
        )

    @classmethod
    def _create(cls, model_class, *args, token=None, **kwargs):
        cluster = model_class(*args, **kwargs)
        cluster.set_credentials({"token": token})
        cluster.save()
        return cluster

    @classmethod
    def _build(cls, model_class, *args, token=None, **kwargs):
        cluster = model_class(*args, **kwargs)
        cluster.set_credentials({"token": token})
        return cluster


class VersionSampleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = VersionSample

    cluster = factory.SubFactory(ClusterFactory)
    git_version = "v1.29.4"
    version_major = 1
    version_minor = 29
    platform = "linux/amd64"


class ClusterStateChangeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ClusterStateChange

    cluster = factory.SubFactory(ClusterFactory)
    from_state = ClusterState.UNKNOWN
    to_state = ClusterState.READY
    reason = "Probe succeeded"
