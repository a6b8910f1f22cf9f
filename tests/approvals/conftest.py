"""Fixtures for change-request tests: clusters that are not Ready (so planning and diffs never
touch the network in unit tests), a federated Deployment on them, and one user per role."""

import pytest

from clusters import kube
from clusters.choices import ClusterState
from fedportal.roles import Role
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import WEB_TEMPLATE, ftype, namespace_everywhere


@pytest.fixture(autouse=True)
def _fresh_kube_clients():
    kube.clear_client_cache()
    yield
    kube.clear_client_cache()


@pytest.fixture
def second_approver(make_user):
    return make_user("bert-approver", Role.APPROVER)


@pytest.fixture
def prod_cluster(db):
    return ClusterFactory(name="prod-a", labels={"env": "prod"}, state=ClusterState.NOT_READY)


@pytest.fixture
def dev_cluster(db):
    return ClusterFactory(name="dev-a", labels={"env": "dev"}, state=ClusterState.NOT_READY)


@pytest.fixture
def make_resource(db, operator):
    from federation import services

    def make(name="web", clusters=("dev-a",), **kw):
        namespace_everywhere("shop")
        return services.create_resource(
            ftype("Deployment"),
            namespace="shop",
            name=name,
            template=WEB_TEMPLATE,
            placement={"clusters": list(clusters)},
            actor=operator,
            **kw,
        )

    return make


@pytest.fixture
def dev_resource(dev_cluster, make_resource):
    return make_resource("web", ("dev-a",))


@pytest.fixture
def prod_resource(prod_cluster, dev_cluster, make_resource):
    return make_resource("api", ("prod-a", "dev-a"))
