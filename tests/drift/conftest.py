import pytest

from drift import compat


@pytest.fixture
def make_cluster(db):
    """make_cluster("m1", "v1.27.3", role="member", labels={...}, kubelets={...}) -> Cluster."""
    from clusters.models import Cluster

    def make(name, version="v1.29.0", *, role="member", labels=None, kubelets=None, isolated=False):
        return Cluster.objects.create(
            name=name,
            api_server=f"https://{name}.example:6443",
            role=role,
            server_version=version,
            labels=labels or {},
            kubelet_versions=kubelets or {},
            isolated=isolated,
        )

    return make


@pytest.fixture
def sim_fleet(make_cluster):
    """The issue's simulator fleet: host v1.29, members v1.25–v1.31 (env label by parity)."""
    host = make_cluster("host", "v1.29.2", role="host", kubelets={"h-n1": "v1.29.2"})
    members = [
        make_cluster(
            f"m{minor}",
            f"v1.{minor}.1",
            labels={"env": "prod" if minor % 2 else "dev"},
            kubelets={f"m{minor}-n1": f"v1.{minor}.1"},
        )
        for minor in range(25, 32)
    ]
    return host, members


def _client_for(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def viewer_client(viewer):
    return _client_for(viewer)


@pytest.fixture
def admin_client_(admin_user):
    return _client_for(admin_user)


@pytest.fixture
def nobody_client(nobody):
    return _client_for(nobody)


@pytest.fixture(autouse=True)
def _clean_caches(settings):
    from django.core.cache import cache

    cache.clear()
    compat.clear_cache()
    yield
    cache.clear()


def deployment_type():
    """The apps/v1 Deployment federated type (seeded by a migration; re-made after a transactional flush)."""
    from federation.models import FederatedType

    ftype, _ = FederatedType.objects.get_or_create(
        group="apps", kind="Deployment", defaults={"version": "v1", "plural": "deployments"}
    )
    return ftype
