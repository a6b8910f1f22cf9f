"""Editing services: validation, immutable revisions, rollback, diffs, KubeFed import."""

from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from federation import services
from federation.choices import Toggle
from federation.models import FederatedResource, FederatedType, Revision
from fedportal.models import AuditEvent
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import WEB_TEMPLATE, ftype, web_deployment

pytestmark = pytest.mark.django_db
EXAMPLES = Path("/work/shared/kubefed-examples")


@pytest.fixture
def clusters():
    return [ClusterFactory(name=n) for n in ("east", "west", "lab")]


def test_seeded_types_are_kubefeds_defaults():
    names = set(FederatedType.objects.values_list("kind", flat=True))
    assert {"Namespace", "Deployment", "Service", "ConfigMap", "Secret", "ServiceAccount"} <= names
    assert ftype("Deployment").name == "deployments.apps" and ftype("Namespace").namespaced is False


def test_create_makes_revision_one_and_audits(clusters, operator):
    resource = web_deployment(placement={"clusters": ["east"]}, actor=operator)
    assert resource.current_revision.number == 1
    assert resource.current_revision.content_hash
    assert AuditEvent.objects.filter(action="federation.resource.create", actor=operator).exists()


def test_every_changed_save_is_a_new_immutable_revision(clusters):
    resource = web_deployment(placement={"clusters": ["east"]})
    same = services.update_resource(resource, template=WEB_TEMPLATE, placement={"clusters": ["east"]})
    assert same.number == 1, "saving identical content makes no new revision"
    second = services.update_resource(resource, template=WEB_TEMPLATE, placement={"clusters": ["east", "west"]})
    assert second.number == 2 and second.parent.number == 1
    with pytest.raises(ValidationError):
        second.save()
    with pytest.raises(ValidationError):
        second.delete()


def test_rollback_creates_a_new_revision_with_old_content(clusters, operator):
    resource = web_deployment(placement={"clusters": ["east"]})
    services.update_resource(resource, template=WEB_TEMPLATE, placement={"clusters": ["west"]})
    first = resource.revisions.get(number=1)
    rolled = services.rollback_resource(resource, to_revision=first, actor=operator)
    assert rolled.number == 3 and rolled.placement == {"clusters": ["east"]} and rolled.parent == first
    assert rolled.content_hash == first.content_hash
    assert AuditEvent.objects.filter(action="federation.resource.rollback").exists()


def test_withdraw_makes_the_empty_placement_revision_in_the_appliers_name(clusters, approver, viewer):
    resource = web_deployment(placement={"clusters": ["east", "west"]})
    with pytest.raises(PermissionDenied):
        services.withdraw_resource(resource, actor=viewer)
    assert resource.revisions.count() == 1, "a refused withdraw writes nothing"
    revision = services.withdraw_resource(resource, actor=approver, message="Delete (CR-7)")
    assert (revision.number, revision.placement, revision.template) == (2, {"clusters": []}, WEB_TEMPLATE)
    assert revision.author == approver and revision.message == "Delete (CR-7)"
    assert (
        AuditEvent.objects.get(action="federation.resource.update", summary__startswith="Revision 2").actor == approver
    )


def test_diff_between_revisions_names_fields(clusters):
    resource = web_deployment(placement={"clusters": ["east"]})
    new = services.update_resource(
        resource,
        template=WEB_TEMPLATE,
        placement={"clusters": ["east"]},
        overrides=[{"clusterName": "east", "clusterOverrides": [{"path": "/spec/replicas", "value": 3}]}],
    )
    diff = services.diff_revisions(resource.revisions.get(number=1), new)
    assert [c.path for c in diff.changes] == ["/overrides"]
    assert "+overrides:" in diff.text or "+- clusterName" in diff.text


@pytest.mark.parametrize(
    "kwargs, field, message",
    [
        ({"template": {"kind": "Service"}}, "template", "kind is 'Service'"),
        ({"template": ["a"]}, "template", "mapping"),
        ({"placement": {"clusters": ["mars"]}}, "placement", "Unknown cluster: mars"),
        (
            {"placement": {"clusterSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}}},
            "placement",
            "operator 'Is'",
        ),
        (
            {"overrides": [{"clusterName": "east", "clusterOverrides": [{"op": "remove", "path": "/spec/paused"}]}]},
            "overrides",
            "/spec/paused",
        ),
        (
            {"overrides": [{"clusterName": "mars", "clusterOverrides": [{"path": "/spec/replicas", "value": 1}]}]},
            "overrides",
            "unknown cluster",
        ),
        ({"scheduling": {"totalReplicas": -1}}, "scheduling", "between 0"),
        ({"scheduling": {"totalReplicas": 3, "clusters": {"mars": {"weight": 1}}}}, "scheduling", "unknown cluster"),
        ({"namespace": "Bad_NS"}, "namespace", "not a valid name"),
        ({"name": "Web!"}, "name", "not a valid object name"),
    ],
)
def test_bad_input_is_rejected_per_field_and_nothing_is_saved(clusters, kwargs, field, message):
    args = {"namespace": "shop", "name": "web", "template": WEB_TEMPLATE, "placement": {"clusters": ["east"]}}
    args.update(kwargs)
    with pytest.raises(services.SpecError) as info:
        services.create_resource(ftype("Deployment"), **args)
    assert message in " ".join(info.value.errors[field])
    assert not FederatedResource.objects.exists() and not Revision.objects.exists()


def test_bad_override_names_path_and_cluster(clusters):
    with pytest.raises(services.SpecError) as info:
        web_deployment(
            overrides=[
                {"clusterName": "west", "clusterOverrides": [{"path": "/spec/strategy/type", "value": "Recreate"}]}
            ]
        )
    (message,) = info.value.errors["overrides"]
    assert "/spec/strategy/type" in message and "'west'" in message


def test_scheduling_only_for_replica_kinds(clusters):
    with pytest.raises(services.SpecError) as info:
        services.create_resource(
            ftype("ConfigMap"), namespace="shop", name="c", template={"data": {}}, scheduling={"totalReplicas": 2}
        )
    assert "Replica scheduling applies" in info.value.errors["scheduling"][0]


def test_duplicate_resource_is_a_name_error(clusters):
    web_deployment()
    with pytest.raises(services.SpecError) as info:
        web_deployment()
    assert "already exists" in info.value.errors["name"][0]


def test_cluster_scoped_type_refuses_a_namespace(clusters):
    with pytest.raises(services.SpecError) as info:
        services.create_resource(ftype("Namespace"), namespace="shop", name="shop", template={})
    assert "cluster-scoped" in info.value.errors["namespace"][0]


# --- fedctl apply / KubeFed import ---------------------------------------------------------------

CLUSTER_MAP = {"cluster1": "east", "cluster2": "west"}
ENABLED = [
    "federatednamespace.yaml",
    "federateddeployment.yaml",
    "federatedconfigmap.yaml",
    "federatedsecret.yaml",
    "federatedservice.yaml",
    "federatedserviceaccount.yaml",
]


@pytest.mark.parametrize("filename", ENABLED)
def test_kubefed_examples_of_enabled_types_import(clusters, filename):
    outcomes = services.apply_kubefed_file((EXAMPLES / filename).read_text(), cluster_map=CLUSTER_MAP)
    assert [o.action for o in outcomes] == ["created"]
    resource = FederatedResource.objects.get()
    assert resource.current_revision.placement == {"clusters": ["east", "west"]}


def test_kubefed_rsp_attaches_scheduling_to_the_deployment(clusters):
    services.apply_kubefed_file((EXAMPLES / "federateddeployment.yaml").read_text(), cluster_map=CLUSTER_MAP)
    outcomes = services.apply_kubefed_file(
        (EXAMPLES / "federateddeployment-rsp.yaml").read_text(), cluster_map=CLUSTER_MAP
    )
    assert outcomes[0].action == "configured"
    revision = FederatedResource.objects.get().current_revision
    assert revision.number == 2 and revision.scheduling["totalReplicas"] == 10
    assert revision.scheduling["clusters"] == {
        "east": {"weight": 2, "minReplicas": 0},
        "west": {"weight": 3, "minReplicas": 0},
    }


def test_reapplying_the_same_file_changes_nothing(clusters):
    text = (EXAMPLES / "federatedconfigmap.yaml").read_text()
    services.apply_kubefed_file(text, cluster_map=CLUSTER_MAP)
    outcomes = services.apply_kubefed_file(text, cluster_map=CLUSTER_MAP)
    assert outcomes[0].action == "unchanged" and Revision.objects.count() == 1


def test_kubefeds_ten_default_types_are_enabled():
    # KubeFed's Helm chart (charts/kubefed/templates/federatedtypeconfig.yaml) enables ten types; its Ingress is
    # extensions/v1beta1, gone since Kubernetes 1.22, so FedPortal's is networking.k8s.io/v1.
    enabled = {(t.group, t.kind) for t in FederatedType.objects.all() if t.propagation_enabled}
    assert {
        ("", "Namespace"),
        ("apps", "Deployment"),
        ("", "Service"),
        ("", "ConfigMap"),
        ("", "Secret"),
        ("", "ServiceAccount"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("networking.k8s.io", "Ingress"),
        ("batch", "Job"),
        ("apps", "ReplicaSet"),
    } <= enabled
    assert FederatedType.objects.get(kind="ClusterRole").namespaced is False


@pytest.mark.parametrize("filename, kind", [("federatedclusterrolebinding.yaml", "ClusterRoleBinding")])
def test_types_not_enabled_are_refused_with_a_hint(clusters, filename, kind):
    with pytest.raises(services.FederationError, match=rf"Federated type {kind} is not enabled.*fedctl enable"):
        services.apply_kubefed_file((EXAMPLES / filename).read_text(), cluster_map=CLUSTER_MAP)
    assert not FederatedResource.objects.exists()


def test_enabling_a_type_lets_its_example_import(clusters, admin_user):
    FederatedType.objects.filter(kind="Job").delete()
    services.enable_type(kind="Job", group="batch", version="v1", actor=admin_user)
    services.apply_kubefed_file((EXAMPLES / "federatedjob.yaml").read_text(), cluster_map=CLUSTER_MAP)
    assert FederatedResource.objects.get().type.plural == "jobs"


def test_disabled_propagation_is_refused(clusters):
    services.update_type(ftype("ConfigMap"), propagation=Toggle.DISABLED)
    with pytest.raises(services.FederationError, match="Disabled"):
        services.apply_kubefed_file((EXAMPLES / "federatedconfigmap.yaml").read_text(), cluster_map=CLUSTER_MAP)


def test_a_bad_document_changes_nothing_even_after_good_ones(clusters):
    good = (EXAMPLES / "federatedconfigmap.yaml").read_text()
    bad = "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedSecret\nmetadata: {name: s, namespace: shop}\nspec:\n  placement: {clusters: [{name: nowhere}]}\n"
    with pytest.raises(services.FederationError, match="'nowhere' is not registered"):
        services.apply_kubefed_file(good + "\n---\n" + bad, cluster_map=CLUSTER_MAP)
    assert not FederatedResource.objects.exists() and not Revision.objects.exists()


def test_unmapped_kubefed_cluster_names_are_refused(clusters):
    with pytest.raises(services.FederationError, match="cluster 'cluster1' is not registered"):
        services.apply_kubefed_file((EXAMPLES / "federatedconfigmap.yaml").read_text())


def test_drift_detection_is_scheduled_by_beat():
    from django_celery_beat.models import PeriodicTask

    task = PeriodicTask.objects.get(task="federation.tasks.detect_drift_task")
    assert task.enabled and task.interval.every == 60 and task.expire_seconds


def test_secret_values_never_reach_the_audit_log_or_revision_diffs(clusters):
    import json as _json

    secret = services.create_resource(
        ftype("Secret"),
        namespace="shop",
        name="db",
        template={"data": {"password": "czNjcjN0"}},
        placement={"clusters": ["east"]},
        overrides=[{"clusterName": "east", "clusterOverrides": [{"path": "/data/password", "value": "ZWFzdA=="}]}],
    )
    new = services.update_resource(secret, template={"data": {"password": "bjN3"}}, placement={"clusters": ["east"]})
    logged = _json.dumps(list(AuditEvent.objects.values("before", "after", "summary")))
    for value in ("czNjcjN0", "ZWFzdA==", "bjN3"):
        assert value not in logged
    diff = services.diff_revisions(secret.revisions.get(number=1), new)
    assert "bjN3" not in diff.text and "czNjcjN0" not in diff.text and "<secret hmac:" in diff.text
    assert [c.path for c in diff.changes] == ["/overrides", "/template/data/password"]
