"""Forms and validators: Kubernetes names and labels, credentials, TLS, filters."""

import pytest
from django.core.exceptions import ValidationError

from clusters.filtersets import ClusterFilterSet
from clusters.forms import ClusterRegisterForm, KubeconfigUploadForm, UnjoinForm
from clusters.validators import parse_label_pairs, validate_dns1123_label, validate_labels
from tests.clusters.factories import ClusterFactory

BASE = {
    "name": "prod-eu-1",
    "api_server": "https://prod-eu-1.example.com:6443",
    "role": "member",
    "labels": "env=prod",
    "auth_method": "token",
    "token": "abc",
}


@pytest.mark.parametrize("name", ["a", "prod-eu-1", "x" * 63, "1abc"])
def test_valid_dns_labels(name):
    validate_dns1123_label(name)


@pytest.mark.parametrize("name", ["", "-a", "a-", "A", "a_b", "a.b", "x" * 64, "a b"])
def test_invalid_dns_labels(name):
    with pytest.raises(ValidationError):
        validate_dns1123_label(name)


def test_label_pairs_follow_kubernetes_rules():
    assert parse_label_pairs("env=prod, team=pay\nexample.com/tier=gold,empty=") == {
        "env": "prod",
        "team": "pay",
        "example.com/tier": "gold",
        "empty": "",
    }
    for bad in ("env", "=x", "-a=b", "a=-b", "Bad.Prefix/x=y", "a=" + "v" * 64, "k" * 64 + "=v", "a=1,a=2"):
        with pytest.raises(ValidationError):
            parse_label_pairs(bad)
    with pytest.raises(ValidationError):
        validate_labels({"ok": 1})


def test_register_form_accepts_a_token_cluster():
    form = ClusterRegisterForm(BASE)
    assert form.is_valid(), form.errors
    assert form.service_kwargs()["labels"] == {"env": "prod"}
    assert form.service_kwargs()["client_certificate"] is None


def test_register_form_requires_the_chosen_credentials():
    form = ClusterRegisterForm({**BASE, "auth_method": "client_certificate"})
    assert not form.is_valid()
    assert "client_certificate" in form.errors and "client_key" in form.errors


@pytest.mark.parametrize(
    "override, field",
    [
        ({"api_server": "example.com"}, "api_server"),
        ({"api_server": "ftp://example.com"}, "api_server"),
        ({"name": "Prod"}, "name"),
        ({"labels": "a b"}, "labels"),
        ({"ca_bundle": "nope"}, "ca_bundle"),
        ({"ca_bundle": "-----BEGIN CERTIFICATE-----\nx", "insecure_skip_tls_verify": "on"}, "insecure_skip_tls_verify"),
        ({"role": "boss"}, "role"),
    ],
)
def test_register_form_rejects_bad_input(override, field):
    form = ClusterRegisterForm({**BASE, **override})
    assert not form.is_valid()
    assert field in form.errors


def test_token_is_never_rendered_back():
    form = ClusterRegisterForm({**BASE, "token": "sekret-token"})
    form.is_valid()
    assert "sekret-token" not in str(form)


def test_kubeconfig_upload_needs_text_or_file():
    assert not KubeconfigUploadForm({}).is_valid()
    form = KubeconfigUploadForm({"kubeconfig_text": "kind: Config"})
    assert form.is_valid() and form.cleaned_data["text"] == "kind: Config"


@pytest.mark.django_db
def test_unjoin_form_needs_the_exact_name():
    cluster = ClusterFactory(name="m127")
    assert not UnjoinForm({"confirm_name": "m12"}, cluster=cluster).is_valid()
    assert UnjoinForm({"confirm_name": "m127"}, cluster=cluster).is_valid()


def test_filter_form_says_why_each_bad_value_is_refused():
    form = ClusterFilterSet({"label": "bad key", "state": "Sideways", "version": "latest"}).form
    assert not form.is_valid()
    assert set(form.errors) == {"label", "state", "version"}
    assert "minor version" in form.errors["version"][0]
    good = ClusterFilterSet({"label": "env=prod", "state": "Ready", "version": "1.27"}).form
    assert good.is_valid() and good.cleaned_data["label"] == "env=prod"


def test_client_key_is_a_textarea_that_never_renders_the_key_back():
    form = ClusterRegisterForm(
        {**BASE, "auth_method": "client_certificate", "token": "", "client_key": "PRIVATE-KEY-TEXT"}
    )
    form.is_valid()
    html = str(form["client_key"])
    assert "<textarea" in html and "PRIVATE-KEY-TEXT" not in html


@pytest.mark.parametrize("labels", [{"env\n": "prod"}, {"env": "prod\n"}])
def test_labels_with_a_final_newline_are_refused(labels):
    """JSON and YAML bodies are not stripped: a pattern ending in "$" let "prod\\n" in (a review's finding)."""
    with pytest.raises(ValidationError):
        validate_labels(labels)
    with pytest.raises(ValidationError):
        validate_dns1123_label("m128\n")
