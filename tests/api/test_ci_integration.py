"""The CI pipeline the issue describes, over real HTTP: a live server thread, a real Celery worker,
the fleet simulator. An operator's token creates a federated Deployment from YAML and opens and
submits a change request; an approver's token approves it; the client polls until Applied; the
objects are on the clusters. Approving with the operator's token is 403, with a revoked token 401,
and a create replayed with the same Idempotency-Key returns the same change request."""

import time

import pytest
import requests

from federation import propagation
from federation.approvals.models import ChangeRequest
from federation.models import PropagationRun
from tests.federation.factories import federate_namespace, register_fleet
from tests.utils import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MEMBERS = ["m128", "m131"]  # env=staging and env=dev: one approval each
DEPLOYMENT_YAML = """\
apiVersion: types.kubefed.io/v1beta1
kind: FederatedDeployment
metadata:
  name: ci-web
  namespace: shop
spec:
  template:
    metadata:
      labels: {app: ci-web}
    spec:
      replicas: 2
      selector: {matchLabels: {app: ci-web}}
      template:
        metadata:
          labels: {app: ci-web}
        spec:
          containers:
          - {name: web, image: "nginx:1.25"}
  placement:
    clusters:
    - name: m128
    - name: m131
  overrides:
  - clusterName: m131
    clusterOverrides:
    - {path: /spec/replicas, value: 1}
"""


class Http:
    def __init__(self, base: str, token: str):
        self.base, self.session = base, requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    def get(self, path):
        return self.session.get(self.base + path, timeout=60)

    def post(self, path, json=None, data=None, headers=None):
        return self.session.post(self.base + path, json=json, data=data, headers=headers or {}, timeout=60)

    def delete(self, path):
        return self.session.delete(self.base + path, timeout=60)


@pytest.fixture
def ready_fleet(fleet, celery_worker):
    clusters = register_fleet(fleet, MEMBERS)
    run = propagation.propagate_revision(federate_namespace("shop", MEMBERS))
    wait_for(
        lambda: PropagationRun.objects.filter(pk=run.pk, finished_at__isnull=False).exists(),
        timeout=60,
        message="namespace propagation",
    )
    return clusters


def test_ci_pipeline_over_http(live_server, fleet, ready_fleet, operator, approver, token_for):
    ci = Http(live_server.url, token_for(operator, name="ci"))
    reviewer = Http(live_server.url, token_for(approver, name="review"))

    created = ci.post("/api/v1/resources", data=DEPLOYMENT_YAML, headers={"Content-Type": "application/yaml"})
    assert created.status_code == 201, created.text
    [result] = created.json()["results"]
    assert (result["kind"], result["namespace"], result["name"], result["action"], result["revision"]) == (
        "Deployment",
        "shop",
        "ci-web",
        "created",
        1,
    )
    resource_id = result["id"]
    detail = ci.get(f"/api/v1/resources/{resource_id}").json()
    assert detail["placement"] == {"clusters": ["m128", "m131"]} and detail["condition"] == "NotPropagated"

    key = {"Idempotency-Key": "pipeline-42-open"}
    opened = ci.post(
        "/api/v1/change-requests", json={"resource_id": resource_id, "title": "ci-web from CI"}, headers=key
    )
    assert opened.status_code == 201, opened.text
    change = opened.json()
    assert change["state"] == "Draft" and change["target_clusters"] == ["m128", "m131"]
    replay = ci.post(
        "/api/v1/change-requests", json={"resource_id": resource_id, "title": "ci-web from CI"}, headers=key
    )
    assert replay.status_code == 201 and replay.json()["id"] == change["id"]
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert ChangeRequest.objects.count() == 1

    submitted = ci.post(f"/api/v1/change-requests/{change['id']}/submit")
    assert submitted.status_code == 200, submitted.text
    assert submitted.json()["state"] == "Submitted"
    assert {d["cluster"]: d["action"] for d in submitted.json()["diffs"]} == {"m128": "create", "m131": "create"}

    reviewed = ci.get(f"/api/v1/change-requests/{change['id']}").json()["content_hash"]
    own = ci.post(f"/api/v1/change-requests/{change['id']}/approve", json={"comment": "lgtm", "content_hash": reviewed})
    assert own.status_code == 403 and own.json()["error"] == "forbidden"

    revoked_token = token_for(approver, name="old")
    old = Http(live_server.url, revoked_token)
    [old_id] = [t["id"] for t in old.get("/api/v1/tokens").json() if t["name"] == "old"]
    assert old.delete(f"/api/v1/tokens/{old_id}").status_code == 200
    refused = old.post(f"/api/v1/change-requests/{change['id']}/approve", json={})
    assert refused.status_code == 401 and refused.json()["error"] == "unauthenticated"

    approved = reviewer.post(
        f"/api/v1/change-requests/{change['id']}/approve", json={"comment": "ship it", "content_hash": reviewed}
    )
    assert approved.status_code == 200, approved.text
    assert approved.json()["state"] in ("Approved", "Applying", "Applied")

    deadline = time.monotonic() + 120
    state = None
    while time.monotonic() < deadline:
        state = ci.get(f"/api/v1/change-requests/{change['id']}").json()
        if state["state"] not in ("Approved", "Applying"):
            break
        time.sleep(0.5)
    assert state["state"] == "Applied", state
    assert {(r["cluster"], r["state"], r["reason"]) for r in state["outcome"]} == {
        ("m128", "done", "OK"),
        ("m131", "done", "OK"),
    }
    assert [a["approver"] for a in state["approval_list"]] == [approver.username]

    m128 = fleet.get_object("m128", "apps/v1", "Deployment", "shop", "ci-web")
    m131 = fleet.get_object("m131", "apps/v1", "Deployment", "shop", "ci-web")
    assert m128["spec"]["replicas"] == 2 and m131["spec"]["replicas"] == 1
    statuses = {c["cluster"]: c["status"] for c in ci.get(f"/api/v1/resources/{resource_id}").json()["clusters"]}
    assert statuses == {"m128": "OK", "m131": "OK"}
