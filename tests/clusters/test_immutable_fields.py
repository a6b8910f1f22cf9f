"""clusters.immutable_fields: what kube-apiserver compares on an update (the stored form: defaults,
stringData folded into data, empty lists and maps as absent), and how its refusals read."""

import pytest

from clusters.immutable_fields import immutable_changes, is_immutable_refusal

SELECTOR = {"matchLabels": {"app": "web"}}


def fields(group, kind, new, old):
    return [change.field for change in immutable_changes(group, kind, new, old)]


@pytest.mark.parametrize(
    "new, old, expected",
    [
        ({"spec": {"selector": SELECTOR}}, {"spec": {"selector": SELECTOR}}, []),
        ({"spec": {"selector": {**SELECTOR, "matchExpressions": []}}}, {"spec": {"selector": SELECTOR}}, []),
        ({"spec": {"selector": {"matchLabels": {"app": "api"}}}}, {"spec": {"selector": SELECTOR}}, ["spec.selector"]),
    ],
)
def test_a_deployments_selector(new, old, expected):
    assert fields("apps", "Deployment", new, old) == expected


def test_a_secrets_type_defaults_to_opaque_and_its_string_data_is_its_data():
    frozen = {"immutable": True, "data": {"a": "MQ=="}, "type": "Opaque"}
    assert fields("", "Secret", {"immutable": True, "stringData": {"a": "1"}}, frozen) == []
    assert fields("", "Secret", {"immutable": True, "stringData": {"a": "2"}}, frozen) == ["data"]
    assert fields("", "Secret", {"type": "kubernetes.io/tls"}, {}) == ["type"]


def test_a_statefulsets_fixed_fields_are_one_forbidden_cause_on_spec():
    old = {"spec": {"selector": SELECTOR, "serviceName": "db", "replicas": 1}}
    assert fields("apps", "StatefulSet", {"spec": {**old["spec"], "replicas": 3}}, old) == []
    assert fields("apps", "StatefulSet", {"spec": {**old["spec"], "serviceName": "db2"}}, old) == ["spec"]


@pytest.mark.parametrize(
    "message",
    [
        'Deployment.apps "web" is invalid: spec.selector: Invalid value: {}: field is immutable',
        # v1.25's wording (no 'ordinals') and v1.34's (revisionHistoryLimit) share the prefix
        'StatefulSet.apps "db" is invalid: spec: Forbidden: updates to statefulset spec for fields other than '
        "'replicas', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
    ],
)
def test_refusals_are_recognised_in_every_minors_words(message):
    assert is_immutable_refusal(message)
