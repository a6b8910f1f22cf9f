"""Where a rollout strategy comes in: fedctl apply YAML, the resource form, a change request's
override. Bad input is refused with the reason and nothing is half-written."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from federation.approvals import rollout as rollouts
from federation.approvals import services as approvals
from federation.models import FederatedResource
from fedportal.models import AuditEvent
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import namespace_everywhere
from tests.federation.test_views import form_data

pytestmark = pytest.mark.django_db

YAML = """apiVersion: types.kubefed.io/v1beta1
kind: FederatedDeployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      replicas: 1
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec: {containers: [{name: web, image: "nginx:1.25"}]}
  placement: {clusters: [east, west, north]}
  rolloutStrategy:
    autoRollback: true
    waves:
      - name: canary
        clusterSelector: {matchLabels: {canary: "true"}}
        maxParallel: 1
        bakeSeconds: 60
      - name: prod
        clusterSelector: {matchLabels: {env: prod}}
        maxParallel: "25%"
        requireApproval: true
"""


@pytest.fixture
def clusters():
    return [
        ClusterFactory(name="east", labels={"canary": "true"}),
        ClusterFactory(name="west", labels={"env": "prod"}),
        ClusterFactory(name="north", labels={}),
    ]


def fedctl_apply(tmp_path, text) -> str:
    path = tmp_path / "web.yaml"
    path.write_text(text)
    out = StringIO()
    call_command("fedctl", "apply", "-f", str(path), stdout=out)
    return out.getvalue()


def test_fedctl_apply_sets_the_strategy_audited(tmp_path, clusters):
    fedctl_apply(tmp_path, YAML)
    resource = FederatedResource.objects.get(name="web")
    assert resource.rollout_strategy["autoRollback"] is True
    assert [w["name"] for w in resource.rollout_strategy["waves"]] == ["canary", "prod"]
    assert resource.rollout_strategy["waves"][1]["maxParallel"] == "25%"
    assert AuditEvent.objects.filter(action="federation.resource.rollout_strategy").count() == 1


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("bakeSeconds: 60", "bakeSeconds: -1"),
        ('maxParallel: "25%"', 'maxParallel: "twenty"'),
        ("name: prod", "name: canary"),
        ("clusterSelector: {matchLabels: {env: prod}}", "clusterSelector: {matchLabels: {env: 'no way'}}"),
    ],
)
def test_fedctl_apply_refuses_a_bad_strategy_and_saves_nothing(tmp_path, clusters, bad, reason):
    with pytest.raises(CommandError, match="rolloutStrategy") as info:
        fedctl_apply(tmp_path, YAML.replace(bad, reason, 1))
    assert "Nothing was changed" in str(info.value)
    assert not FederatedResource.objects.filter(name="web").exists()


def test_resource_form_edits_the_strategy_and_refuses_a_bad_one(client, operator, clusters):
    client.force_login(operator)
    strategy = "waves:\n- name: canary\n  clusters: [east]\n  maxParallel: 0\n"
    response = client.post(reverse("federation:resource_create"), form_data(rollout_strategy_yaml=strategy))
    assert response.status_code == 400
    assert "maxParallel must be a count" in response.content.decode()
    assert not FederatedResource.objects.exists()
    good = strategy.replace("maxParallel: 0", "maxParallel: 1")
    response = client.post(reverse("federation:resource_create"), form_data(rollout_strategy_yaml=good))
    assert response.status_code == 302
    resource = FederatedResource.objects.get()
    assert resource.rollout_strategy["waves"][0]["clusters"] == ["east"]
    page = client.get(reverse("federation:resource_edit", args=[resource.pk])).content.decode()
    assert "name: canary" in page
    detail = client.get(reverse("federation:resource_detail", args=[resource.pk])).content.decode()
    assert "canary" in detail


def test_a_change_request_overrides_the_strategy_and_shows_its_plan(client, operator, clusters, tmp_path):
    namespace_everywhere("shop")  # KubeFed places a namespaced object only where its namespace is federated
    fedctl_apply(tmp_path, YAML)
    resource = FederatedResource.objects.get(name="web")
    client.force_login(operator)
    url = reverse("approvals:change_create", args=[resource.pk])
    bad = client.post(
        url, {"rollout_strategy_yaml": "waves: [{name: a, clusters: [east]}, {name: a, clusters: [west]}]"}
    )
    assert bad.status_code == 400 and "used twice" in bad.content.decode()
    assert not resource.change_requests.exists()
    response = client.post(url, {"rollout_strategy_yaml": "waves: [{name: west-first, clusters: [west]}]"})
    assert response.status_code == 302
    cr = resource.change_requests.get()
    assert cr.rollout_strategy["waves"][0]["name"] == "west-first"
    assert [(w.name, w.clusters) for w in rollouts.planned_waves(cr)] == [
        ("west-first", ["west"]),
        ("rest", ["east", "north"]),
    ]
    page = client.get(reverse("approvals:change_detail", args=[cr.pk])).content.decode()
    assert 'id="cr-planned-waves"' in page and "west-first" in page
    # {} sends to every cluster at once: not staged
    flat = approvals.create_change_request(resource, actor=operator, rollout_strategy={})
    assert flat.rollout_strategy == {} and not rollouts.is_staged(flat)


def test_the_demo_resource_file_ships_a_staged_strategy():
    from fedportal.management.commands.demo import DEMO_RESOURCES

    out = StringIO()
    call_command("fedctl", "apply", "-f", str(DEMO_RESOURCES), stdout=out)
    web = FederatedResource.objects.get(namespace="shop", name="web")
    assert [w["name"] for w in web.rollout_strategy["waves"]] == ["dev", "staging", "prod"]
    assert web.rollout_strategy["autoRollback"] and web.rollout_strategy["waves"][2]["requireApproval"]
    call_command("fedctl", "apply", "-f", str(DEMO_RESOURCES), stdout=out)  # a second demo start changes nothing
    assert "unchanged" in out.getvalue()


@pytest.mark.parametrize(
    "wave",
    [
        {"name": "canary", "clusters": ["dev-a"], "bakeSeconds": 2**63},
        {"name": "canary", "clusters": ["dev-a"], "maxFailures": 2**31},
        {"name": "canary", "clusters": ["dev-a"], "progressDeadlineSeconds": 2**40},
        {"name": "canary", "clusters": ["dev-a"], "maxParallel": 2**31},
        {"name": "a" * 40 + "\n", "clusters": ["dev-a"]},
    ],
)
def test_numbers_past_int32_and_names_with_a_newline_are_refused(wave):
    """They were stored, and starting the rollout failed writing its waves: a 500 on approval that
    left the request Approved (a review's finding)."""
    from federation.rollout_strategy import StrategyError, normalize_strategy

    with pytest.raises(StrategyError):
        normalize_strategy({"waves": [wave]})


def test_the_service_refuses_a_bad_strategy_with_a_spec_error_and_saves_nothing(operator, clusters):
    """Callers that skip the form's and the importer's checks got an AttributeError (the error was
    built from a string, not a field -> messages mapping): a 500, not a clear message."""
    from federation import services
    from tests.federation.factories import web_deployment

    resource = web_deployment(placement={"clusters": ["east"]}, actor=operator)
    bad = {"waves": [{"name": "rest", "clusters": ["east"]}]}
    with pytest.raises(services.SpecError) as info:
        services.set_rollout_strategy(resource, bad, actor=operator)
    assert info.value.errors == {
        "rollout_strategy": ["rolloutStrategy: waves[0].name 'rest' is reserved for the implicit last wave."]
    }
    resource.refresh_from_db()
    assert not resource.rollout_strategy
