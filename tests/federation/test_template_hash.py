"""propagation._template_hash: one render per revision for most kinds; per live object where KubeFed
retains fields (a Service's clusterIP)."""

from federation.models import FederatedType, Revision
from federation.propagation.network import hash_template
from federation.rendering import content_hash, render_manifest


def common(ftype, revision, cluster, live=None):
    return dict(
        target=ftype.target,
        template=revision.template,
        namespace="shop",
        name="web",
        cluster=cluster,
        revision=revision.number,
        live=live,
    )


def expected(ftype, revision, cluster, live=None):
    return content_hash(render_manifest(overrides=[], replicas=None, **common(ftype, revision, cluster, live)))


def test_a_deployment_hash_is_the_full_render_and_shared_by_every_cluster():
    ftype = FederatedType(group="apps", version="v1", kind="Deployment", plural="deployments", scope="Namespaced")
    revision = Revision(number=3, template={"spec": {"replicas": 2, "template": {"spec": {"containers": []}}}})
    first = hash_template(revision, ftype, common(ftype, revision, "eu-1"))
    assert first == expected(ftype, revision, "eu-1")
    assert hash_template(revision, ftype, common(ftype, revision, "us-1", live={"spec": {"replicas": 9}})) == first
    other = Revision(number=4, template={"spec": {"replicas": 3}})
    assert hash_template(other, ftype, common(ftype, other, "eu-1")) != first  # per revision, not global


def test_a_service_hash_follows_each_live_object():
    ftype = FederatedType(group="", version="v1", kind="Service", plural="services", scope="Namespaced")
    revision = Revision(number=1, template={"spec": {"ports": [{"port": 80}]}})
    live_a = {"spec": {"clusterIP": "10.0.0.1"}}
    live_b = {"spec": {"clusterIP": "10.0.0.2"}}
    a = hash_template(revision, ftype, common(ftype, revision, "eu-1", live_a))
    b = hash_template(revision, ftype, common(ftype, revision, "us-1", live_b))
    assert a == expected(ftype, revision, "eu-1", live_a) and b == expected(ftype, revision, "us-1", live_b)
    assert a != b
