"""Issue 16, finding 14: values the kube-apiserver rejects outright (negative replicas, min above
max, impossible ports) are refused on save with an error naming the field: in the form, in the
service, and through fedctl apply. Nothing is saved."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from federation import services
from federation.apiserver_limits import spec_value_problems
from federation.models import FederatedResource, Revision
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import WEB_TEMPLATE, ftype
from tests.federation.test_views import TEMPLATE_YAML, form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def clusters():
    return [ClusterFactory(name=n) for n in ("east", "west")]


def web(**spec):
    return {**WEB_TEMPLATE, "spec": {**WEB_TEMPLATE["spec"], **spec}}


# Kubernetes' validation (pkg/apis/apps, autoscaling, core validation; Apache-2.0), as cases:
# (kind, manifest, the problems the apiserver would report, in our words)
CASES = [
    ("Deployment", {"spec": {"replicas": -1}}, ["spec.replicas must be at least 0, got -1."]),
    ("Deployment", {"spec": {"replicas": 0}}, []),
    ("Deployment", {"spec": {"replicas": 2**31}}, [f"spec.replicas must be at most {2**31 - 1}, got {2**31}."]),
    ("Deployment", {"spec": {"replicas": "3"}}, ["spec.replicas must be a whole number, got '3'."]),
    ("Deployment", {"spec": {"replicas": True}}, ["spec.replicas must be a whole number, got True."]),
    ("StatefulSet", {"spec": {"replicas": -5}}, ["spec.replicas must be at least 0, got -5."]),
    (
        "ReplicaSet",
        {"spec": {"replicas": 1, "minReadySeconds": -1}},
        ["spec.minReadySeconds must be at least 0, got -1."],
    ),
    ("Deployment", {"spec": {"revisionHistoryLimit": -2}}, ["spec.revisionHistoryLimit must be at least 0, got -2."]),
    (
        "Deployment",
        {"spec": {"minReadySeconds": 30, "progressDeadlineSeconds": 30}},
        ["spec.progressDeadlineSeconds (30) must be greater than spec.minReadySeconds (30)."],
    ),
    (
        "HorizontalPodAutoscaler",
        {"spec": {"minReplicas": 5, "maxReplicas": 2}},
        ["spec.maxReplicas (2) must be at least spec.minReplicas (5)."],
    ),
    (
        "HorizontalPodAutoscaler",
        {"spec": {"minReplicas": 0, "maxReplicas": 2}},
        ["spec.minReplicas must be at least 1, got 0."],
    ),
    (
        "Job",
        {"spec": {"parallelism": -1, "backoffLimit": -1}},
        ["spec.parallelism must be at least 0, got -1.", "spec.backoffLimit must be at least 0, got -1."],
    ),
    (
        "Deployment",
        {"spec": {"template": {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 0}]}]}}}},
        ["spec.template.spec.containers[0].ports[0].containerPort must be a port number between 1 and 65535, got 0."],
    ),
    (
        "Service",
        {"spec": {"ports": [{"port": 80}, {"port": 70000}]}},
        ["spec.ports[1].port must be a port number between 1 and 65535, got 70000."],
    ),
    ("ConfigMap", {"data": {"replicas": "-1"}}, []),
    # apps validation: a selector must select the pod template's own labels, and select something
    ("Deployment", WEB_TEMPLATE, []),
    (
        "Deployment",
        {"spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "api"}}}}},
        [
            'spec.template.metadata.labels ({"app":"api"}) do not match spec.selector ({"matchLabels":{"app":"web"}}): '
            "kube-apiserver refuses a Deployment whose selector does not select its own pod template."
        ],
    ),
    (
        "StatefulSet",
        {"spec": {"selector": {"matchLabels": {}}, "template": {"metadata": {"labels": {"app": "db"}}}}},
        [
            'spec.selector is empty ({"matchLabels":{}}): kube-apiserver refuses a StatefulSet whose selector '
            "selects nothing (give it matchLabels or matchExpressions)."
        ],
    ),
    (
        "DaemonSet",
        {
            "spec": {
                "selector": {
                    "matchLabels": {"app": "agent"},
                    "matchExpressions": [
                        {"key": "tier", "operator": "In", "values": ["node", "edge"]},
                        {"key": "legacy", "operator": "DoesNotExist"},
                    ],
                },
                "template": {"metadata": {"labels": {"app": "agent", "tier": "edge", "extra": "x"}}},
            }
        },
        [],
    ),
    (
        "ReplicaSet",
        {
            "spec": {
                "selector": {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["edge"]}]},
                "template": {"metadata": {"labels": {"tier": "edge"}}},
            }
        },
        [
            'spec.template.metadata.labels ({"tier":"edge"}) do not match spec.selector ({"matchExpressions":'
            '[{"key":"tier","operator":"NotIn","values":["edge"]}]}): kube-apiserver refuses a ReplicaSet whose '
            "selector does not select its own pod template."
        ],
    ),
    ("Job", {"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {}}}}}, []),
]


@pytest.mark.parametrize("kind, manifest, problems", CASES)
def test_spec_value_problems(kind, manifest, problems):
    assert spec_value_problems(kind, manifest) == problems


# --- the form -------------------------------------------------------------------------------------


def post(client, operator, **changes):
    client.force_login(operator)
    return client.post(reverse("federation:resource_create"), form_data(**changes))


def test_negative_template_replicas_is_an_error_on_the_template_field(client, operator, clusters):
    response = post(client, operator, template_yaml=TEMPLATE_YAML.replace("replicas: 1", "replicas: -1"))
    assert response.status_code == 400
    assert response.context["form"].errors["template_yaml"] == ["spec.replicas must be at least 0, got -1."]
    assert not FederatedResource.objects.exists() and not Revision.objects.exists()


def test_negative_replicas_in_an_override_names_the_cluster_and_the_field(client, operator, clusters):
    response = post(client, operator, **{"ov-0-op": "replace", "ov-0-path": "/spec/replicas", "ov-0-value": "-3"})
    assert response.status_code == 400
    assert response.context["overrides"].service_errors == [
        "Override for cluster 'west': spec.replicas must be at least 0, got -3."
    ]
    assert not FederatedResource.objects.exists()


def test_template_labels_the_selector_does_not_match_are_an_error_on_the_template(client, operator, clusters):
    response = post(client, operator, template_yaml=TEMPLATE_YAML.replace("labels: {app: web}}", "labels: {app: api}}"))
    assert response.status_code == 400
    (error,) = response.context["form"].errors["template_yaml"]
    assert error.startswith('spec.template.metadata.labels ({"app":"api"}) do not match spec.selector')
    assert not FederatedResource.objects.exists() and not Revision.objects.exists()


def test_an_override_relabelling_the_pod_template_names_the_cluster(client, operator, clusters):
    response = post(
        client,
        operator,
        **{"ov-0-op": "replace", "ov-0-path": "/spec/template/metadata/labels/app", "ov-0-value": "canary"},
    )
    assert response.status_code == 400
    (error,) = response.context["overrides"].service_errors
    assert error.startswith('Override for cluster \'west\': spec.template.metadata.labels ({"app":"canary"})')
    assert not FederatedResource.objects.exists()


def test_rsp_min_above_max_is_an_error_on_the_max_field(client, operator, clusters):
    response = post(
        client, operator, rsp_enabled="on", total_replicas="4", **{"rsp-0-min_replicas": "5", "rsp-0-max_replicas": "2"}
    )
    assert response.status_code == 400
    assert response.context["rsp"].forms[0].errors["max_replicas"] == [
        "Max replicas (2) cannot be below min replicas (5)."
    ]
    assert not FederatedResource.objects.exists()


@pytest.mark.parametrize(
    "field, value", [("rsp-0-weight", "-1"), ("rsp-0-min_replicas", "-1"), ("rsp-0-max_replicas", "-1")]
)
def test_negative_rsp_row_values_are_field_errors(client, operator, clusters, field, value):
    response = post(client, operator, rsp_enabled="on", total_replicas="4", **{field: value})
    assert response.status_code == 400
    assert "greater than or equal to 0" in response.context["rsp"].forms[0].errors[field.split("-")[-1]][0]


def test_negative_total_replicas_is_an_error_on_that_field(client, operator, clusters):
    response = post(client, operator, rsp_enabled="on", total_replicas="-1")
    assert response.status_code == 400
    assert "greater than or equal to 0" in response.context["form"].errors["total_replicas"][0]


def test_a_valid_form_still_saves(client, operator, clusters):
    response = post(client, operator, template_yaml=TEMPLATE_YAML.replace("replicas: 1", "replicas: 0"))
    assert response.status_code == 302
    assert FederatedResource.objects.get().current_revision.template["spec"]["replicas"] == 0


# --- the service and fedctl ---------------------------------------------------------------------------


def test_service_refuses_negative_replicas_on_update_and_keeps_the_revision(operator, clusters):
    resource = services.create_resource(
        ftype("Deployment"),
        namespace="shop",
        name="web",
        template=web(),
        placement={"clusters": ["east"]},
        actor=operator,
    )
    with pytest.raises(services.SpecError) as caught:
        services.update_resource(resource, template=web(replicas=-2), placement={"clusters": ["east"]}, actor=operator)
    assert caught.value.errors == {"template": ["spec.replicas must be at least 0, got -2."]}
    assert resource.revisions.count() == 1


FEDERATED = """apiVersion: types.kubefed.io/v1beta1
kind: FederatedDeployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      replicas: REPLICAS
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec: {containers: [{name: web, image: "nginx:1.25"}]}
  placement: {clusters: [{name: east}]}
"""
RSP = """---
apiVersion: scheduling.kubefed.io/v1alpha1
kind: ReplicaSchedulingPreference
metadata: {name: web, namespace: shop}
spec:
  targetKind: FederatedDeployment
  totalReplicas: 4
  clusters:
    east: {weight: 1, minReplicas: 3, maxReplicas: 1}
"""


@pytest.mark.parametrize(
    "text, message",
    [
        (FEDERATED.replace("REPLICAS", "-1"), "spec.replicas must be at least 0, got -1."),
        (FEDERATED.replace("REPLICAS", "1") + RSP, "east: maxReplicas (1) is below minReplicas (3)."),
    ],
)
def test_fedctl_apply_refuses_the_file_naming_the_field(tmp_path, clusters, text, message):
    path = tmp_path / "web.yaml"
    path.write_text(text)
    with pytest.raises(CommandError) as caught:
        call_command("fedctl", "apply", "-f", str(path), stdout=StringIO())
    assert message in str(caught.value) and "Nothing was changed." in str(caught.value)
    assert not FederatedResource.objects.exists()


def test_fedctl_apply_reads_no_more_than_the_limit_of_an_endless_file(clusters):
    """``-f /dev/zero`` was read to its end (6.6 GB in 6 s, a reviewer's finding): one byte past the
    limit is enough to refuse it."""
    with pytest.raises(CommandError, match="larger than 256 KiB"):
        call_command("fedctl", "apply", "-f", "/dev/zero", stdout=StringIO())
    assert not FederatedResource.objects.exists()


def test_a_label_kube_apiserver_refuses_is_refused_on_save_but_stored_content_stays_deletable(clusters, operator):
    """New content with a label key kube-apiserver refuses is a SpecError naming the template; a
    revision stored before the check existed can still be withdrawn (a delete re-saves its template)
    and get a placement-only edit (a reviewer found the check refusing both)."""
    bad = {**WEB_TEMPLATE, "metadata": {"labels": {"bad key!": "x"}}}
    with pytest.raises(services.SpecError) as caught:
        services.create_resource(
            ftype("Deployment"), namespace="shop", name="web", template=bad, placement={"clusters": ["east"]}
        )
    assert "metadata.labels: label key 'bad key!'" in str(caught.value.errors["template"])
    resource = services.create_resource(
        ftype("Deployment"), namespace="shop", name="web", template=WEB_TEMPLATE, placement={"clusters": ["east"]}
    )
    Revision.objects.filter(pk=resource.current_revision_id).update(template=bad)  # stored before the check
    resource.refresh_from_db()
    services.update_resource(resource, template=bad, placement={"clusters": ["east", "west"]}, actor=operator)
    resource.refresh_from_db()
    assert resource.current_revision.number == 2
    services.withdraw_resource(resource, actor=operator)
    assert resource.revisions.count() == 3


@pytest.mark.parametrize(
    "operation, message",
    [
        ({"op": "add", "path": "/metadata/labels", "value": {"bad key!": "x"}}, "label key 'bad key!'"),
        ({"op": "add", "path": "/metadata/labels", "value": {"tier": "-lead"}}, "label value '-lead'"),
        ({"op": "add", "path": "/metadata/labels", "value": {"tier": 3}}, "the value of 'tier' must be a string"),
        ({"op": "add", "path": "/metadata/labels", "value": ["x"]}, "metadata.labels must stay a mapping"),
        ({"op": "add", "path": "/metadata/annotations", "value": {"Bad Key": "y"}}, "key 'Bad Key'"),
    ],
)
def test_an_override_writing_metadata_kube_apiserver_refuses_is_refused_on_save(clusters, operation, message):
    """Overrides that wrote a label kube-apiserver refuses were saved, approved, and failed at apply on
    that cluster alone (CreationFailed): they are checked as the template's labels are."""
    with pytest.raises(services.SpecError) as caught:
        services.create_resource(
            ftype("Deployment"),
            namespace="shop",
            name="web",
            template=WEB_TEMPLATE,
            placement={"clusters": ["east"]},
            overrides=[{"clusterName": "east", "clusterOverrides": [operation]}],
        )
    (problem,) = caught.value.errors["overrides"]
    assert problem.startswith("Override for cluster 'east': metadata.") and message in problem, problem
    assert not FederatedResource.objects.exists()


def test_an_override_writing_valid_labels_is_taken_and_stored_overrides_stay_restorable(clusters, operator):
    good = [
        {"clusterName": "east", "clusterOverrides": [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]}
    ]
    resource = services.create_resource(
        ftype("Deployment"), namespace="shop", name="web", template=WEB_TEMPLATE, placement={"clusters": ["east"]}
    )
    services.update_resource(resource, template=WEB_TEMPLATE, placement={"clusters": ["east"]}, overrides=good)
    bad = [
        {"clusterName": "east", "clusterOverrides": [{"op": "add", "path": "/metadata/labels", "value": {"b c": "d"}}]}
    ]
    resource.refresh_from_db()
    Revision.objects.filter(pk=resource.current_revision_id).update(overrides=bad)  # stored before the check
    resource.refresh_from_db()
    services.update_resource(
        resource, template=WEB_TEMPLATE, placement={"clusters": ["east", "west"]}, overrides=bad, actor=operator
    )
    resource.refresh_from_db()
    assert resource.current_revision.number == 3 and resource.current_revision.overrides == bad


def test_a_new_override_is_not_blamed_for_the_stored_templates_own_labels(clusters, operator):
    """A template stored before the label check (its label key refused today) takes a new override
    that writes no metadata: the override is checked for what it brings, not for the template."""
    bad = {**WEB_TEMPLATE, "metadata": {"labels": {"bad key!": "x"}}}
    resource = services.create_resource(
        ftype("Deployment"), namespace="shop", name="web", template=WEB_TEMPLATE, placement={"clusters": ["east"]}
    )
    Revision.objects.filter(pk=resource.current_revision_id).update(template=bad)  # stored before the check
    resource.refresh_from_db()
    replicas = [{"clusterName": "east", "clusterOverrides": [{"op": "replace", "path": "/spec/replicas", "value": 5}]}]
    services.update_resource(
        resource, template=bad, placement={"clusters": ["east"]}, overrides=replicas, actor=operator
    )
    resource.refresh_from_db()
    assert resource.current_revision.overrides == replicas


# --- preflight: a revision stored before these checks existed ----------------------------------------


def test_a_stored_revision_with_negative_replicas_blocks_approval(make_user, operator, approver):
    from federation.approvals import services as approvals
    from federation.approvals.choices import Severity
    from federation.models import Revision

    ClusterFactory(name="east", state="NotReady")
    resource = services.create_resource(
        ftype("Deployment"),
        namespace="shop",
        name="web",
        template=web(),
        placement={"clusters": ["east"]},
        actor=operator,
        overrides=[{"clusterName": "east", "clusterOverrides": [{"path": "/spec/replicas", "value": 2}]}],
    )
    old = resource.current_revision
    stored = Revision.objects.create(
        resource=resource,
        number=2,
        template=old.template,
        placement=old.placement,
        overrides=[
            {"clusterName": "east", "clusterOverrides": [{"op": "replace", "path": "/spec/replicas", "value": -4}]}
        ],
        content_hash="stored-before-the-check",
        author=operator,
    )
    FederatedResource.objects.filter(pk=resource.pk).update(current_revision=stored)
    cr = approvals.submit(
        approvals.create_change_request(FederatedResource.objects.get(pk=resource.pk), actor=operator), actor=operator
    )
    assert [(p["severity"], p["message"]) for p in cr.preflight] == [
        (
            Severity.BLOCKING,
            (
                "The API server would reject this revision: Override for cluster 'east': "
                "spec.replicas must be at least 0, got -4."
            ),
        )
    ]
    with pytest.raises(approvals.TransitionError, match="Preflight found blocking problems"):
        approvals.approve(cr, actor=approver)


# --- a value no Kubernetes version of the fleet accepts (federation.schema_refusals) ---------------


def configmap(data):
    return {"metadata": {"labels": {"app": "cfg"}}, "data": data}


def test_a_template_every_version_of_the_fleet_refuses_is_not_saved():
    ClusterFactory(name="old", server_version="v1.27.3")
    ClusterFactory(name="new", server_version="v1.31.1")
    with pytest.raises(services.SpecError) as refused:
        services.create_resource(
            ftype("ConfigMap"), namespace="shop", name="cfg", template=configmap({"a": 1, "b": "ok"}), placement={}
        )
    [message] = refused.value.errors["template"]
    assert message == (
        "data.a: expected string, got integer (no cluster of the fleet would accept it: Kubernetes 1.27 to 1.31)"
    )
    assert not FederatedResource.objects.filter(name="cfg").exists() and not Revision.objects.exists()


def test_a_wrong_type_is_refused_and_the_form_says_so(client, admin_user, clusters):
    client.force_login(admin_user)
    bad = web(paused="yes")
    response = client.post(reverse("federation:resource_create"), form_data(template_yaml=_yaml(bad)))
    assert response.status_code == 400
    assert (
        "spec.paused: expected boolean, got string (no cluster of the fleet would accept it"
        in response.content.decode()
    )
    assert not FederatedResource.objects.exists()


def test_a_template_is_saved_when_the_fleet_is_empty_or_some_version_accepts_it():
    saved = services.create_resource(
        ftype("ConfigMap"), namespace="shop", name="early", template=configmap({"a": 1}), placement={}
    )
    assert saved.pk  # no cluster yet: nothing to check it against
    ClusterFactory(name="east", server_version="v1.29.4")
    services.create_resource(
        ftype("ConfigMap"), namespace="shop", name="fine", template=configmap({"a": "1"}), placement={}
    )


def _yaml(template) -> str:
    from federation.manifests import dump_yaml

    return dump_yaml(template)


@pytest.mark.parametrize(
    ("kind", "namespace", "metadata", "message"),
    [
        (
            "ConfigMap",
            "shop",
            {"name": "other"},
            "The template's metadata.name is 'other' but the resource's name is 'cfg'",
        ),
        (
            "ConfigMap",
            "shop",
            {"namespace": "prod"},
            "The template's metadata.namespace is 'prod' but the resource's namespace is 'shop'",
        ),
    ],
)
def test_a_template_naming_another_object_than_its_resource_is_refused(kind, namespace, metadata, message):
    """Rendering uses the resource's name and namespace: a different one in the template was ignored."""
    name = "cfg"
    with pytest.raises(services.SpecError) as refused:
        services.create_resource(
            ftype(kind), namespace=namespace, name=name, template={"metadata": metadata}, placement={}
        )
    assert any(m.startswith(message) for m in refused.value.errors["template"]), refused.value.errors
    assert not FederatedResource.objects.exists()


@pytest.mark.parametrize(
    ("kind", "namespace", "metadata"),
    [
        ("ConfigMap", "shop", {"name": "cfg", "namespace": "shop"}),
        ("ConfigMap", "shop", {"name": "", "namespace": ""}),  # empty: as if absent
        ("Namespace", "", {"namespace": "shop"}),  # cluster-scoped: the apiserver clears a namespace
    ],
)
def test_a_template_agreeing_with_its_resource_or_naming_nothing_is_fine(kind, namespace, metadata):
    services.create_resource(
        ftype(kind), namespace=namespace, name="cfg", template={"metadata": metadata}, placement={}
    )


def test_a_template_one_version_of_the_fleet_accepts_is_saved():
    """1.26 does not know containers[].resizePolicy (added in 1.27) and accepts any value there."""
    from clusters.models import Cluster

    ClusterFactory(name="old", server_version="v1.26.9")
    ClusterFactory(name="new", server_version="v1.31.1")
    pod = {**WEB_TEMPLATE["spec"]["template"]["spec"]}
    pod["containers"] = [{**pod["containers"][0], "resizePolicy": "restart"}]
    template = {
        **WEB_TEMPLATE,
        "spec": {**WEB_TEMPLATE["spec"], "template": {**WEB_TEMPLATE["spec"]["template"], "spec": pod}},
    }
    services.create_resource(ftype("Deployment"), namespace="shop", name="web", template=template, placement={})
    Cluster.objects.filter(name="old").delete()
    with pytest.raises(services.SpecError, match="resizePolicy: expected array, got string"):
        services.create_resource(ftype("Deployment"), namespace="shop", name="web2", template=template, placement={})


def test_content_saved_before_the_checks_can_still_be_deleted_and_rolled_back(admin_user):
    """An approved delete, a rollback and a placement-only edit save a stored template again: it is
    not refused now, while new content is."""
    resource = services.create_resource(
        ftype("ConfigMap"), namespace="shop", name="old", template=configmap({"a": "1"}), placement={}
    )
    first = resource.current_revision
    legacy = {**configmap({"a": 1}), "metadata": {"name": "other"}}  # as saved before the checks existed
    Revision.objects.filter(pk=first.pk).update(template=legacy)
    first.refresh_from_db()
    ClusterFactory(name="east", server_version="v1.29.4")  # a fleet that refuses data.a
    edited = services.update_resource(resource, template=legacy, placement={"clusters": ["east"]}, actor=admin_user)
    assert edited.number == 2 and edited.template == legacy  # a placement-only edit
    resource.refresh_from_db()
    withdrawn = services.withdraw_resource(resource, actor=admin_user)
    assert withdrawn.placement == {"clusters": []} and withdrawn.template == legacy
    resource.refresh_from_db()
    restored = services.rollback_resource(resource, to_revision=first, actor=admin_user)
    assert restored.template == legacy
    resource.refresh_from_db()
    with pytest.raises(services.SpecError, match="expected string, got integer"):
        services.update_resource(resource, template=configmap({"a": 2}), placement={}, actor=admin_user)


def test_a_template_repeating_its_resources_name_and_namespace_is_fine():
    services.create_resource(
        ftype("ConfigMap"),
        namespace="shop",
        name="cfg",
        template={"metadata": {"name": "cfg", "namespace": "shop"}},
        placement={},
    )
