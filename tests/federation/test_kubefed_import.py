from pathlib import Path

import pytest

from federation.kubefed_import import KubeFedImportError, parse_documents
from federation.overrides import apply_overrides
from federation.rendering import TargetType, render_manifest

EXAMPLES = Path("/work/shared/kubefed-examples")
MAP = {"cluster1": "east", "cluster2": "west"}
KNOWN = ["east", "west", "lab"]

FEDERATED_DEPLOYMENT = """
apiVersion: types.kubefed.io/v1beta1
kind: FederatedDeployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      replicas: 3
      template: {spec: {containers: [{name: web, image: nginx}]}}
  placement:
    clusters: [{name: cluster2}, {name: cluster1}]
  overrides:
  - clusterName: cluster2
    clusterOverrides:
    - path: /spec/replicas
      value: 5
---
apiVersion: scheduling.kubefed.io/v1alpha1
kind: ReplicaSchedulingPreference
metadata: {name: web, namespace: shop}
spec:
  targetKind: FederatedDeployment
  totalReplicas: 10
  clusters:
    cluster1: {weight: 2}
    "*": {weight: 1}
"""


def test_federated_deployment_and_rsp_are_parsed_with_cluster_mapping():
    result = parse_documents(FEDERATED_DEPLOYMENT, cluster_map=MAP, known_clusters=KNOWN)
    (resource,) = result.resources
    assert (resource.kind, resource.namespace, resource.name) == ("Deployment", "shop", "web")
    assert resource.placement == {"clusters": ["east", "west"]}
    assert resource.overrides[0]["clusterName"] == "west"
    (rsp,) = result.scheduling
    assert rsp.target_kind == "Deployment" and rsp.preference["clusters"] == {
        "east": {"weight": 2, "minReplicas": 0},
        "*": {"weight": 1, "minReplicas": 0},
    }


def test_unknown_cluster_is_a_clear_error():
    with pytest.raises(KubeFedImportError, match="cluster 'cluster1' is not registered"):
        parse_documents(FEDERATED_DEPLOYMENT, known_clusters=KNOWN)


@pytest.mark.parametrize(
    "text, message",
    [
        ("apiVersion: types.kubefed.io/v1beta1\nkind: FederatedDeployment\n", "no metadata.name"),
        ("kind: FederatedDeployment\nmetadata: {name: x}\n", "no apiVersion"),
        ("apiVersion: types.kubefed.io/v1beta1\nkind: Deployment\nmetadata: {name: x}\n", "not a Federated<Kind>"),
        (
            "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedDeployment\nmetadata: {name: x}\nspec: {placment: {}}\n",
            "unknown spec field 'placment'",
        ),
        (
            "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedDeployment\nmetadata: {name: x}\nspec: {placement: {clusters: x}}\n",
            "must be a list",
        ),
        (
            "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedDeployment\nmetadata: {name: x}\nspec:\n  overrides: [{clusterName: a, clusterOverrides: [{op: move, path: /a}]}]\n",
            "op 'move'",
        ),
        (
            "apiVersion: scheduling.kubefed.io/v1alpha1\nkind: ReplicaSchedulingPreference\nmetadata: {name: x}\nspec: {targetKind: Deployment, totalReplicas: 1}\n",
            "targetKind",
        ),
        ("apiVersion: core.kubefed.io/v1beta1\nkind: KubeFedCluster\nmetadata: {name: x}\n", "control-plane"),
        (
            "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: x}\n"
            "spec: {template: {metadata: oops, data: {a: b}}}\n",
            "spec.template.metadata must be a mapping",
        ),
        (
            "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: x}\n"
            "spec: {template: {apiVersion: 5, data: {a: b}}}\n",
            "spec.template.apiVersion must be a string",
        ),
        # an empty list or string was read as an empty spec (a reviewer's finding)
        (
            "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: x}\nspec: []\n",
            "spec must be a mapping",
        ),
        (
            "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: x}\nspec: ''\n",
            "spec must be a mapping",
        ),
        (
            "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: x}\nspec: {template: []}\n",
            "spec.template must be a mapping",
        ),
        (
            "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: x}\n"
            "spec: {template: {metadata: []}}\n",
            "spec.template.metadata must be a mapping",
        ),
        ("a: [1", "Invalid YAML"),
        ("", "no YAML documents"),
    ],
)
def test_malformed_documents_are_rejected_with_a_message(text, message):
    with pytest.raises(KubeFedImportError, match=message):
        parse_documents(text)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_kubefed_example_parses(path):
    result = parse_documents(path.read_text(), cluster_map=MAP, known_clusters=KNOWN)
    assert result.resources or result.scheduling


def test_kubefed_example_deployment_overrides_apply_to_the_rendered_template():
    (resource,) = parse_documents((EXAMPLES / "federateddeployment.yaml").read_text(), cluster_map=MAP).resources
    manifest = render_manifest(
        target=TargetType("apps/v1", "Deployment"),
        template=resource.template,
        namespace=resource.namespace,
        name=resource.name,
        cluster="west",
        overrides=resource.overrides,
    )
    assert manifest["spec"]["replicas"] == 5
    assert manifest["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.17.0-alpine"
    assert apply_overrides(resource.template, resource.overrides, cluster="east") == resource.template


def test_federated_namespace_targets_the_cluster_scoped_namespace():
    (resource,) = parse_documents((EXAMPLES / "federatednamespace.yaml").read_text(), cluster_map=MAP).resources
    assert (resource.kind, resource.namespace, resource.name) == ("Namespace", "", "test-namespace")
