"""The API's role matrix: every operation of the OpenAPI schema × anonymous, no role, viewer,
operator, approver, admin, and an admin's read-only token — like tests/fedportal/test_role_matrix.py
for the pages. The test fails when an operation has no row here (so nobody adds an unguarded
endpoint) or a row names an operation that no longer exists.

"Allowed" means the request got past the permission check: any status but 401, 403, 405 and 5xx.
Samples are built so that an allowed request never reaches the network (no placement, verify off)."""

import json

import pytest

from api.api import api
from fedportal.roles import Role
from tests.api.conftest import ApiClient

pytestmark = pytest.mark.django_db

READ = Role.VIEWER

CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "rm-api", "namespace": "default"},
    "data": {"k": "v"},
}


def _cluster() -> dict:
    from tests.clusters.factories import ClusterFactory

    return {"cluster_id": ClusterFactory().pk}


def _resource() -> dict:
    from federation.models import FederatedType
    from federation.services import create_resource

    ftype = FederatedType.objects.get(group="", kind="ConfigMap")
    resource = create_resource(ftype, namespace="default", name="rm-api", template={"data": {"k": "v"}}, placement={})
    return {"resource_id": resource.pk}


def _change(state: str = "Draft") -> dict:
    from federation.approvals.models import ChangeRequest
    from federation.models import FederatedResource

    resource = FederatedResource.objects.get(pk=_resource()["resource_id"])
    revision = resource.current_revision
    cr = ChangeRequest.objects.create(
        kind="create",
        state=state,
        title="api role matrix",
        resource=resource,
        resource_repr=str(resource),
        proposed_revision=revision,
        proposed_hash=revision.content_hash,
    )
    return {"change_id": cr.pk}


def _own_token(user) -> dict:
    from api.tokens import create_token

    return {"token_id": create_token(user, actor=user).token.pk} if user is not None else {"token_id": 1}


# (method, path) -> (role needed, sample path kwargs (callable, gets the user), JSON body)
EXPECTED = {
    ("GET", "/api/v1/clusters"): (READ, None, None),
    ("POST", "/api/v1/clusters"): (
        Role.ADMIN,
        None,
        {"name": "rm-new", "api_server": "https://rm-new.example:6443", "token": "t0k3n", "verify": False},
    ),
    ("GET", "/api/v1/clusters/{cluster_id}"): (READ, _cluster, None),
    ("PATCH", "/api/v1/clusters/{cluster_id}"): (Role.ADMIN, _cluster, {"labels": {"env": "dev"}, "verify": False}),
    ("POST", "/api/v1/clusters/{cluster_id}/rotate-credentials"): (
        Role.ADMIN,
        _cluster,
        {"token": "n3w", "verify": False},
    ),
    ("GET", "/api/v1/types"): (READ, None, None),
    ("GET", "/api/v1/resources"): (READ, None, None),
    ("POST", "/api/v1/resources"): (Role.OPERATOR, None, {"manifest": CONFIGMAP}),
    ("GET", "/api/v1/resources/{resource_id}"): (READ, _resource, None),
    ("PUT", "/api/v1/resources/{resource_id}"): (Role.OPERATOR, _resource, {"manifest": CONFIGMAP}),
    ("GET", "/api/v1/resources/{resource_id}/preview"): (READ, _resource, None),
    ("GET", "/api/v1/change-requests"): (READ, None, None),
    ("POST", "/api/v1/change-requests"): (Role.OPERATOR, None, "resource"),
    ("GET", "/api/v1/change-requests/{change_id}"): (READ, _change, None),
    # a draft nobody here wrote (and not the system's reconcile request): an admin's to submit
    ("POST", "/api/v1/change-requests/{change_id}/submit"): (Role.ADMIN, _change, {}),
    ("POST", "/api/v1/change-requests/{change_id}/approve"): (Role.APPROVER, lambda: _change("Submitted"), {}),
    ("POST", "/api/v1/change-requests/{change_id}/reject"): (
        Role.APPROVER,
        lambda: _change("Submitted"),
        {"comment": "no"},
    ),
    # a finished request: the state is refused (409) before the author check, for every operator
    ("POST", "/api/v1/change-requests/{change_id}/cancel"): (Role.OPERATOR, lambda: _change("Cancelled"), {}),
    ("GET", "/api/v1/drift/skew"): (READ, None, None),
    ("GET", "/api/v1/drift/compatibility"): (READ, None, None),
    ("GET", "/api/v1/drift/compliance"): (READ, None, None),
    ("GET", "/api/v1/audit/events"): (READ, None, None),
    ("GET", "/api/v1/tokens"): (READ, None, None),
    ("POST", "/api/v1/tokens"): (READ, None, {"name": "rm"}),
    ("DELETE", "/api/v1/tokens/{token_id}"): (READ, "own-token", None),
}

HOLDS = {
    "nobody": set(),
    "viewer": {Role.VIEWER},
    "operator": {Role.VIEWER, Role.OPERATOR},
    "approver": {Role.VIEWER, Role.APPROVER},
    "admin": {Role.VIEWER, Role.OPERATOR, Role.APPROVER, Role.ADMIN},
    "admin-read-only": {Role.VIEWER},  # an admin's read-only token: every write is refused
}
REFUSED = {401, 403, 405}


def schema_operations() -> set[tuple[str, str]]:
    paths = api.get_openapi_schema()["paths"]
    return {(method.upper(), path) for path, ops in paths.items() for method in ops}


def test_every_api_operation_has_a_row_and_every_row_an_operation():
    operations = schema_operations()
    assert sorted(operations - set(EXPECTED)) == [], "API operations with no row in tests/api/test_role_matrix.py"
    assert sorted(set(EXPECTED) - operations) == [], "rows for operations that no longer exist"


@pytest.fixture
def users(make_user):
    return {
        "nobody": make_user("rm-nobody"),
        "viewer": make_user("rm-viewer", Role.VIEWER),
        "operator": make_user("rm-operator", Role.OPERATOR),
        "approver": make_user("rm-approver", Role.APPROVER),
        "admin": make_user("rm-admin", Role.ADMIN),
    }


def _call(client: ApiClient, method: str, path: str, user, sample, body):
    kwargs = {}
    if sample == "own-token":
        kwargs = _own_token(user)
    elif sample is not None:
        kwargs = sample()
    if body == "resource":
        body = {"resource_id": _resource()["resource_id"]}
    return client.request(method, path.format(**kwargs), body if method != "GET" else None)


@pytest.mark.parametrize(("method", "path"), sorted(EXPECTED))
@pytest.mark.parametrize("who", ["anonymous", *HOLDS])
def test_api_role_matrix(method, path, who, users, token_for):
    role, sample, body = EXPECTED[(method, path)]
    if who == "anonymous":
        response = _call(ApiClient(None), method, path, None, sample, body)
        assert response.status_code == 401, (who, method, path, response.content[:300])
        assert response.json()["error"] == "unauthenticated"
        return
    user = users["admin" if who == "admin-read-only" else who]
    client = ApiClient(token_for(user, read_only=who == "admin-read-only"))
    response = _call(client, method, path, user, sample, body)
    allowed = role in HOLDS[who] and not (who == "admin-read-only" and method != "GET")
    detail = (who, method, path, response.status_code, response.content[:300])
    if allowed:
        assert response.status_code not in REFUSED and response.status_code < 500, detail
    else:
        assert response.status_code == 403, detail
        assert response.json()["error"] == "forbidden", detail


WRITES = sorted(key for key in EXPECTED if key[0] != "GET")
# bodies no operation takes: every field unknown, a list, text that is not JSON
INVALID_BODIES = ({"bogus": ["x"], "verify": "yes"}, [1, 2], "{not json")


@pytest.mark.parametrize(("method", "path"), WRITES)
@pytest.mark.parametrize("bad", range(len(INVALID_BODIES)))
def test_a_caller_without_the_role_gets_403_before_the_body_is_read(method, path, bad, users, token_for):
    """django-ninja validates the body before the view runs: the role is checked by the operation's
    authentication (api.auth.needs), so a caller without it is refused without learning what the
    body should hold (a 422 would describe the fields)."""
    role, sample, _ = EXPECTED[(method, path)]
    body = INVALID_BODIES[bad]
    data = body if isinstance(body, str) else json.dumps(body)
    shared = sample() if callable(sample) else {}
    for who in HOLDS:
        if role in HOLDS[who] and who != "admin-read-only":
            continue
        user = users["admin" if who == "admin-read-only" else who]
        kwargs = _own_token(user) if sample == "own-token" else shared
        client = ApiClient(token_for(user, read_only=who == "admin-read-only"))
        response = client.request(method, path.format(**kwargs), data=data)
        detail = (who, method, path, response.status_code, response.content[:300])
        assert response.status_code == 403, detail
        assert response.json()["error"] == "forbidden", detail
        assert "bogus" not in response.content.decode(), detail


def test_a_logged_in_browser_without_the_role_gets_403_before_the_body_is_read(users, client):
    """The session's path (BrowserSession) checks the role the same way, after its CSRF check."""
    client.force_login(users["viewer"])
    response = client.post("/api/v1/clusters", data=json.dumps({"bogus": 1}), content_type="application/json")
    assert response.status_code == 403, response.content[:300]
    assert response.json()["error"] == "forbidden"
    assert "This action needs the admin role." in response.json()["message"]


@pytest.mark.parametrize("body", [{"kind": "unjoin"}, {"kind": "unjoin", "cluster_id": 999999}])
def test_an_operator_asking_for_an_unjoin_gets_403_before_the_body_is_checked(body, users, token_for):
    """An unjoin request is an admin's: an operator got 400 "Required for kind=unjoin" or a 404."""
    response = ApiClient(token_for(users["operator"])).post("/api/v1/change-requests", body)
    assert response.status_code == 403, response.content[:300]
    assert response.json()["error"] == "forbidden"
