"""Schemathesis over the whole /api/v1 schema, with a token for each role: no 5xx, every status
code, content type and response body as the schema says. Part of `make test`.

Generated data is valid by the schema (positive mode: the checks are on the responses). A cluster
registered by a generated request is never tested against the network (``verify`` forced off), so
the run does not wait on DNS for made-up API servers."""

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.api import api
from api.tokens import create_token
from fedportal.roles import Role

schema = schemathesis.openapi.from_dict(api.get_openapi_schema())
schema.app = get_wsgi_application()
# generated requests (fuzzing) only: the coverage phase's many boundary cases times five roles made
# this test several minutes long on two cores
schema.config.phases.update(phases=["examples", "fuzzing"])

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
ROLES = {
    "viewer": (Role.VIEWER,),
    "operator": (Role.OPERATOR,),
    "approver": (Role.APPROVER,),
    "admin": (Role.ADMIN,),
    "nobody": (),
}


@pytest.fixture(autouse=True)
def keep_the_test_connection():
    """Requests go through the WSGI handler, which closes the database connection when a request
    ends; the test's transaction lives on it (Django's test client disconnects the same receiver)."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def role_tokens(make_user):
    return {name: create_token(make_user(f"st-{name}", *roles), actor=None).secret for name, roles in ROLES.items()}


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)
def test_api_conforms_to_its_schema_for_every_role(case, role_tokens):
    if case.path.startswith("/api/v1/clusters") and case.method in ("POST", "PATCH") and isinstance(case.body, dict):
        case.body["verify"] = False
    for token in role_tokens.values():
        case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)
