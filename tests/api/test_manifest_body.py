"""POST /api/v1/resources reads its body itself (JSON or YAML): what JSON cannot hold, nesting
past the interpreter's limit and unknown fields are 4xx with a reason, and nothing is written
(reviewers' findings: NaN and 1e400 were stored as the strings "NaN" and "Infinity", 1,000 levels
of lists were a 500, an unknown field was ignored, a 5,000-digit integer was a 500). And a write
without any body says so."""

import pytest

from federation.models import FederatedResource

pytestmark = pytest.mark.django_db

HEAD = '{"manifest": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "shop"}, '


@pytest.mark.parametrize(
    "body, status, says",
    [
        (HEAD + '"data": {"a": NaN}}}', 400, "NaN is not a JSON number"),
        (HEAD + '"data": {"a": -Infinity}}}', 400, "-Infinity is not a JSON number"),
        (HEAD + '"data": {"a": 1e400}}}', 400, "out of range"),
        (HEAD + '"data": {"a": ' + "[" * 5000 + "]" * 5000 + "}}}", 400, "nested too deeply"),
        (HEAD + '"data": {"a": "b"}}, "bogus": 1}', 422, "Unknown field 'bogus'"),
        (HEAD + '"data": {"a": ' + "9" * 5000 + "}}}", 400, "The body is not JSON"),
    ],
    ids=["nan", "infinity", "out-of-range", "deep", "unknown-field", "long-integer"],
)
def test_json_the_api_cannot_hold_is_refused_with_its_reason(api_as, operator, body, status, says):
    api = api_as(operator)
    response = api.request("POST", "/api/v1/resources", data=body)
    assert response.status_code == status, response.content
    assert says in response.json()["message"]
    assert not FederatedResource.objects.exists()


def test_an_integer_too_long_for_python_in_yaml_is_a_400_not_a_500(api_as, operator):
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: shop}\ndata:\n  a: " + "9" * 5000 + "\n"
    response = api_as(operator).request("POST", "/api/v1/resources", data=text, content_type="application/yaml")
    assert response.status_code == 400, response.content
    assert "too long" in response.json()["message"]
    assert not FederatedResource.objects.exists()


def test_a_post_without_a_body_says_so(api_as, operator):
    """It answered "non_field_errors: Field required" (a reviewer's finding)."""
    api = api_as(operator)
    response = api.request("POST", "/api/v1/tokens", data="")
    assert response.status_code == 422, response.content
    assert "The request has no body" in response.json()["message"]


def test_a_form_encoded_body_is_the_usual_400_saying_what_to_send(api_as, operator):
    response = api_as(operator).request(
        "POST", "/api/v1/tokens", data="name=x", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid" and "send a JSON object" in response.json()["message"]


def test_a_bare_manifest_without_the_wrapper_is_told_to_wrap_it(api_as, operator):
    body = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "shop"}}'
    response = api_as(operator).request("POST", "/api/v1/resources", data=body)
    assert response.status_code == 400 and 'Send {"manifest": {...}}' in response.json()["message"]
