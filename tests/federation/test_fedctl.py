"""fedctl: apply KubeFed examples, get, propagate, status, enable; errors change nothing."""

import json
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

from federation.models import FederatedResource, Revision
from fedportal.roles import Role
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import drain, register_fleet

pytestmark = pytest.mark.django_db
EXAMPLES = Path("/work/shared/kubefed-examples")
MAP = "cluster1=east,cluster2=west"


def fedctl(*args) -> str:
    out = StringIO()
    call_command("fedctl", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def clusters():
    return [ClusterFactory(name=n) for n in ("east", "west")]


def test_apply_every_enabled_kubefed_example(clusters):
    for name in (
        "federatednamespace",
        "federateddeployment",
        "federatedconfigmap",
        "federatedsecret",
        "federatedservice",
        "federatedserviceaccount",
        "federateddeployment-rsp",
    ):
        out = fedctl("apply", "-f", str(EXAMPLES / f"{name}.yaml"), "--cluster-map", MAP)
        assert "created" in out or "configured" in out, out
    assert FederatedResource.objects.count() == 6
    table = fedctl("get")
    assert "test-deployment" in table and "NotPropagated" in table
    rows = json.loads(fedctl("get", "-o", "json"))
    assert {r["kind"] for r in rows} == {"Namespace", "Deployment", "ConfigMap", "Secret", "Service", "ServiceAccount"}


def test_apply_plain_objects_like_kubefedctl_federate(clusters):
    out = fedctl("apply", "-f", str(EXAMPLES / "deployment.yaml"))
    assert "deployment/default/nginx created" in out


INGRESS_REFUSAL = (
    r"spec.rules\[0\].http.paths\[0\].backend uses serviceName/servicePort, the extensions/v1beta1 "
    r"Ingress .* removed it in 1.22 .* backend.service.name"
)
# Every file of the KubeFed examples, in the order KubeFed's docs apply them, and what FedPortal makes of it:
# (file, outcome printed, or the reason it is refused).
EXAMPLE_OUTCOMES = [
    ("namespace", "namespace/test-namespace created (revision 1)"),
    ("federatednamespace", "namespace/test-namespace configured (revision 2)"),
    ("configmap", "configmap/default/web-file created (revision 1)"),
    ("deployment", "deployment/default/nginx created (revision 1)"),
    ("service", "service/default/nginx created (revision 1)"),
    ("federatedclusterrole", "clusterrole/test-clusterrole created (revision 1)"),
    (
        "federatedclusterrolebinding",
        CommandError("ClusterRoleBinding is not enabled.*fedctl enable ClusterRoleBinding"),
    ),
    ("federatedconfigmap", "configmap/test-namespace/test-configmap created (revision 1)"),
    (
        "federateddeployment-rsp",
        CommandError("no FederatedDeployment test-namespace/test-deployment in this file or already"),
    ),
    ("federateddeployment", "deployment/test-namespace/test-deployment created (revision 1)"),
    ("federateddeployment-rsp", "deployment/test-namespace/test-deployment configured (revision 2)"),
    ("federatedingress", CommandError(INGRESS_REFUSAL)),
    ("federatedjob", "job/test-namespace/test-job created (revision 1)"),
    ("federatedsecret", "secret/test-namespace/test-secret created (revision 1)"),
    ("federatedservice", "service/test-namespace/test-service created (revision 1)"),
    ("federatedserviceaccount", "serviceaccount/test-namespace/test-serviceaccount created (revision 1)"),
]


def test_every_kubefed_example_file_is_applied_or_refused_with_a_reason(clusters):
    assert {name for name, _ in EXAMPLE_OUTCOMES} == {p.stem for p in EXAMPLES.glob("*.yaml")}
    for name, expected in EXAMPLE_OUTCOMES:
        if isinstance(expected, CommandError):
            before = Revision.objects.count()
            with pytest.raises(CommandError, match=str(expected)):
                fedctl("apply", "-f", str(EXAMPLES / f"{name}.yaml"), "--cluster-map", MAP)
            assert Revision.objects.count() == before, f"{name}: a refused file changes nothing"
        else:
            assert fedctl("apply", "-f", str(EXAMPLES / f"{name}.yaml"), "--cluster-map", MAP).strip() == expected
    deployment = FederatedResource.objects.get(name="test-deployment").current_revision
    assert deployment.scheduling["totalReplicas"] == 10 and deployment.placement == {"clusters": ["east", "west"]}
    # kubefedctl federate places a plain object with an empty clusterSelector (every cluster)
    assert FederatedResource.objects.get(name="nginx", type__kind="Deployment").current_revision.placement == {
        "clusterSelector": {}
    }


def test_plain_namespace_over_a_federated_namespace_changes_nothing(clusters):
    # KubeFed's example namespace.yaml (a plain Namespace) over federatednamespace.yaml: placement, overrides and
    # scheduling of the existing federated resource are never touched.
    fedctl("apply", "-f", str(EXAMPLES / "federatednamespace.yaml"), "--cluster-map", MAP)
    namespace = FederatedResource.objects.get(name="test-namespace")
    assert namespace.current_revision.placement == {"clusters": ["east", "west"]}
    assert (
        fedctl("apply", "-f", str(EXAMPLES / "namespace.yaml")).strip()
        == "namespace/test-namespace unchanged (revision 1)"
    )
    namespace.refresh_from_db()
    assert namespace.current_revision.number == 1 and namespace.current_revision.placement == {
        "clusters": ["east", "west"]
    }


def test_plain_deployment_over_a_scheduled_one_keeps_placement_overrides_and_scheduling(clusters, tmp_path):
    fedctl("apply", "-f", str(EXAMPLES / "federatednamespace.yaml"), "--cluster-map", MAP)
    fedctl("apply", "-f", str(EXAMPLES / "federateddeployment.yaml"), "--cluster-map", MAP)
    fedctl("apply", "-f", str(EXAMPLES / "federateddeployment-rsp.yaml"), "--cluster-map", MAP)
    before = FederatedResource.objects.get(name="test-deployment").current_revision
    plain = yaml.safe_load((EXAMPLES / "deployment.yaml").read_text())
    plain["metadata"] = {"name": "test-deployment", "namespace": "test-namespace"}
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump(plain))
    assert "configured (revision 3)" in fedctl("apply", "-f", str(path))
    after = FederatedResource.objects.get(name="test-deployment").current_revision
    assert after.template["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx"
    assert (after.placement, after.overrides, after.scheduling) == (
        before.placement,
        before.overrides,
        before.scheduling,
    )
    # and a Federated<Kind> without an RSP keeps the scheduling too (in KubeFed the RSP is its own object)
    fedctl("apply", "-f", str(EXAMPLES / "federateddeployment.yaml"), "--cluster-map", MAP)
    assert FederatedResource.objects.get(name="test-deployment").current_revision.scheduling == before.scheduling


def test_enable_then_apply(clusters):
    from federation.models import FederatedType

    FederatedType.objects.filter(kind__in=["Job", "ClusterRoleBinding"]).delete()
    with pytest.raises(CommandError, match="not enabled.*fedctl enable"):
        fedctl("apply", "-f", str(EXAMPLES / "federatedjob.yaml"), "--cluster-map", MAP)
    assert "jobs.batch" in fedctl("enable", "Job", "--group", "batch", "--version", "v1")
    assert "created" in fedctl("apply", "-f", str(EXAMPLES / "federatedjob.yaml"), "--cluster-map", MAP)
    assert "clusterrolebindings.rbac.authorization.k8s.io" in fedctl(
        "enable", "ClusterRoleBinding", "--group", "rbac.authorization.k8s.io", "--version", "v1", "--cluster-scoped"
    )
    assert "created" in fedctl("apply", "-f", str(EXAMPLES / "federatedclusterrolebinding.yaml"), "--cluster-map", MAP)


@pytest.mark.parametrize(
    "content, message",
    [
        ("apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nspec: {}\n", "no metadata.name"),
        ("a: [1", "Invalid YAML"),
        ("a: &x 1\nb: *x\n", "aliases"),
        (
            "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: c, namespace: s}\n"
            "spec: {template: {data: {a: b}}, overrides: [{clusterName: east, clusterOverrides: [{path: /data/zz, op: remove}]}]}\n",
            "/data/zz does not exist",
        ),
    ],
)
def test_malformed_files_are_rejected_and_nothing_changes(clusters, tmp_path, content, message):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(CommandError, match=message):
        fedctl("apply", "-f", str(path))
    assert not FederatedResource.objects.exists() and not Revision.objects.exists()


def test_apply_reports_unknown_clusters_and_bad_maps(clusters):
    with pytest.raises(CommandError, match="'cluster1' is not registered"):
        fedctl("apply", "-f", str(EXAMPLES / "federatedconfigmap.yaml"))
    with pytest.raises(CommandError, match="--cluster-map"):
        fedctl("apply", "-f", str(EXAMPLES / "federatedconfigmap.yaml"), "--cluster-map", "cluster1")
    with pytest.raises(CommandError, match="Cannot read"):
        fedctl("apply", "-f", "/nonexistent.yaml")


def test_dry_run_saves_nothing(clusters):
    out = fedctl("apply", "-f", str(EXAMPLES / "federatedconfigmap.yaml"), "--cluster-map", MAP, "--dry-run")
    assert "(dry run)" in out and not FederatedResource.objects.exists()


def test_propagate_and_status(fleet, admin_user):
    register_fleet(fleet, ["m128", "m130"])
    fedctl("apply", "-f", str(EXAMPLES / "federatednamespace.yaml"), "--cluster-map", "cluster1=m128,cluster2=m130")
    fedctl("apply", "-f", str(EXAMPLES / "federatedconfigmap.yaml"), "--cluster-map", "cluster1=m128,cluster2=m130")
    out = fedctl("propagate", "test-namespace", "--kind", "Namespace", "--as", admin_user.username)
    assert "Propagating revision 1" in out
    drain(FederatedResource.objects.get(name="test-namespace").runs.first())
    fedctl("propagate", "test-namespace/test-configmap", "--as", admin_user.username, "--reason", "hotfix")
    drain(FederatedResource.objects.get(name="test-configmap").runs.first())
    status = yaml.safe_load(fedctl("status", "test-namespace/test-configmap"))
    assert status["condition"] == "Propagated"
    by_cluster = {c["cluster"]: c for c in status["clusters"]}
    assert by_cluster["m128"]["status"] == "OK" and by_cluster["m128"]["version"].startswith(("rv:", "gen:"))
    assert fleet.get_object("m130", "v1", "ConfigMap", "test-namespace", "test-configmap")["data"] == {"foo": "bar"}
    assert (
        json.loads(fedctl("status", "test-namespace/test-configmap", "-o", "json"))["clusters"][1]["cluster"] == "m130"
    )
    with pytest.raises(CommandError, match="No federated resource"):
        fedctl("status", "nope/nothing")


def test_propagate_is_the_admins_audited_emergency_path(fleet, operator, admin_user):
    from federation.approvals.models import ChangeRequest
    from fedportal.models import AuditEvent

    register_fleet(fleet, ["m128"])
    fedctl("apply", "-f", str(EXAMPLES / "federatednamespace.yaml"), "--cluster-map", "cluster1=m128,cluster2=m128")
    with pytest.raises(CommandError, match="Permission denied"):
        fedctl("propagate", "test-namespace", "--kind", "Namespace", "--as", operator.username)
    assert not ChangeRequest.objects.exists()
    fedctl("propagate", "test-namespace", "--kind", "Namespace", "--as", admin_user.username, "--reason", "outage")
    request = ChangeRequest.objects.get()
    assert request.emergency and request.emergency_reason == "outage"
    assert AuditEvent.objects.filter(action__contains="emergency", actor=admin_user).exists()


def test_submit_approve_and_list_requests_through_fedctl(clusters, make_user, approver):
    author = make_user("olga-operator-approver", Role.OPERATOR, Role.APPROVER)
    fedctl("apply", "-f", str(EXAMPLES / "federatedconfigmap.yaml"), "--cluster-map", MAP)
    request_id = fedctl("submit", "test-namespace/test-configmap", "--as", author.username).strip()
    with pytest.raises(CommandError, match="You wrote this request"):
        fedctl("approve", request_id, "--as", author.username)
    with pytest.raises(CommandError):
        fedctl("reject", request_id, "--as", approver.username)  # a rejection needs a comment
    listed = json.loads(fedctl("requests", "-o", "json"))
    assert [row["id"] for row in listed] == [int(request_id)] and listed[0]["state"] == "Submitted"


def test_plan_explains_every_cluster(clusters):
    ClusterFactory(name="lab")
    fedctl("apply", "-f", str(EXAMPLES / "federatednamespace.yaml"), "--cluster-map", MAP)
    fedctl("apply", "-f", str(EXAMPLES / "federateddeployment.yaml"), "--cluster-map", MAP)
    fedctl("apply", "-f", str(EXAMPLES / "federateddeployment-rsp.yaml"), "--cluster-map", MAP)
    data = json.loads(fedctl("plan", "test-namespace/test-deployment", "-o", "json"))
    assert data["targets"] == ["east", "west"]
    assert data["excluded"] == {"lab": "Namespace test-namespace is not placed on lab"}
    rows = {row["cluster"]: row for row in data["clusters"]}
    assert {n: (r["weight"], r["planned"], r["replicas"]) for n, r in rows.items()} == {
        "east": (2, 4, 4),
        "west": (3, 6, 6),
        "lab": (None, 0, 0),
    }
    assert rows["east"]["reason"] == "weight 2 of 5"
    assert rows["lab"]["reason"] == "not placed: Namespace test-namespace is not placed on lab"
    table = fedctl("plan", "test-namespace/test-deployment")
    assert table.splitlines()[0] == "Deployment test-namespace/test-deployment, revision 2: placed on east, west"
    assert "CLUSTER  WEIGHT  MIN  MAX  CURRENT  CAPACITY  PLANNED  OVERFLOW  REPLICAS  REASON" in table
    with pytest.raises(CommandError, match="No federated resource"):
        fedctl("plan", "nope/nothing")


def test_plan_of_a_resource_whose_namespace_is_not_federated_says_why(clusters):
    fedctl("apply", "-f", str(EXAMPLES / "federatedconfigmap.yaml"), "--cluster-map", MAP)
    out = fedctl("plan", "test-namespace/test-configmap")
    assert "placed on no cluster" in out and "NamespaceNotFederated" in out
    assert "No replica scheduling preference" in out
