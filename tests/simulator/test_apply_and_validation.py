"""Server-side apply (fieldManager, force, conflicts, removal of fields no longer applied) and
fieldValidation Strict/Warn/Ignore against each cluster version's schema."""

import datetime
import json

import pytest
import yaml
from kubernetes import client
from kubernetes.client import ApiException

from tests.simulator.conftest import deployment


def apply(c, path, body, *, manager="fedportal", force=False, validation=None, as_yaml=False):
    query = [("fieldManager", manager)]
    if force:
        query.append(("force", "true"))
    if validation:
        query.append(("fieldValidation", validation))
    c.set_default_header("Content-Type", "application/apply-patch+yaml")
    try:
        return c.call_api(
            path,
            "PATCH",
            query_params=query,
            header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
            body=yaml.safe_dump(body) if as_yaml else body,
            auth_settings=["BearerToken"],
            response_type="object",
            _return_http_data_only=False,
            _preload_content=True,
        )
    finally:
        c.default_headers.pop("Content-Type", None)


@pytest.fixture
def ns(api):
    name = "apply-ns"
    for cluster in ("host", "m127", "m128"):
        core = client.CoreV1Api(api(cluster))
        try:
            core.create_namespace({"metadata": {"name": name}})
        except ApiException as exc:
            assert exc.value.status == 409 if hasattr(exc, "value") else exc.status == 409
    return name


def dep_path(ns, name):
    return f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"


def test_apply_creates_then_updates_and_records_managed_fields(api, ns):
    c = api("host")
    data, status, _ = apply(c, dep_path(ns, "ssa"), deployment("ssa"))
    assert status == 201 and data["metadata"]["generation"] == 1
    entries = data["metadata"]["managedFields"]
    assert entries[0]["manager"] == "fedportal" and entries[0]["operation"] == "Apply"
    assert "f:replicas" in entries[0]["fieldsV1"]["f:spec"]
    changed = deployment("ssa", replicas=5)
    data, status, _ = apply(c, dep_path(ns, "ssa"), changed)
    assert status == 200 and data["spec"]["replicas"] == 5 and data["metadata"]["generation"] == 2
    typed = client.AppsV1Api(c).read_namespaced_deployment("ssa", ns)
    assert typed.metadata.managed_fields[0].manager == "fedportal"


def test_reapply_removes_fields_the_manager_no_longer_applies(api, ns):
    c = api("host")
    body = deployment("drop")
    body["metadata"]["labels"]["team"] = "a"
    apply(c, dep_path(ns, "drop"), body)
    del body["metadata"]["labels"]["team"]
    data, _, _ = apply(c, dep_path(ns, "drop"), body)
    assert "team" not in data["metadata"]["labels"]


def test_external_edit_conflicts_with_apply_until_forced(sim, api, ns):
    c = api("host")
    apply(c, dep_path(ns, "drifty"), deployment("drifty", replicas=2))
    edited = sim.external_edit("host", "apps/v1", "Deployment", ns, "drifty", {"spec": {"replicas": 7}})
    assert edited["spec"]["replicas"] == 7
    with pytest.raises(ApiException) as exc:
        apply(c, dep_path(ns, "drifty"), deployment("drifty", replicas=2))
    body = json.loads(exc.value.body)
    assert exc.value.status == 409 and body["reason"] == "Conflict"
    assert 'conflict with "kubectl-edit"' in body["message"] and ".spec.replicas" in body["message"]
    data, status, _ = apply(c, dep_path(ns, "drifty"), deployment("drifty", replicas=2), force=True)
    assert status == 200 and data["spec"]["replicas"] == 2
    assert sim.get_object("host", "apps/v1", "Deployment", ns, "drifty")["spec"]["replicas"] == 2


def test_apply_without_field_manager_is_400(api, ns):
    c = api("host")
    with pytest.raises(ApiException) as exc:
        c.call_api(
            dep_path(ns, "nofm"),
            "PATCH",
            header_params={"Content-Type": "application/apply-patch+yaml"},
            body=deployment("nofm"),
            auth_settings=["BearerToken"],
        )
    assert exc.value.status == 400


def test_v127_strict_rejects_v128_only_field_naming_it(api, ns):
    with pytest.raises(ApiException) as exc:
        apply(
            api("m127"),
            dep_path(ns, "sidecar"),
            deployment("sidecar", init_restart_policy="Always"),
            validation="Strict",
        )
    body = json.loads(exc.value.body)
    assert exc.value.status == 400 and body["reason"] == "BadRequest"
    assert 'unknown field "spec.template.spec.initContainers[0].restartPolicy"' in body["message"]


def test_v128_strict_accepts_the_same_field(api, ns):
    data, status, _ = apply(
        api("m128"), dep_path(ns, "sidecar"), deployment("sidecar", init_restart_policy="Always"), validation="Strict"
    )
    assert status == 201
    assert data["spec"]["template"]["spec"]["initContainers"][0]["restartPolicy"] == "Always"


def test_v127_warn_is_the_default_drops_the_field_and_sends_warning_header(api, ns):
    apps = client.AppsV1Api(api("m127"))
    data, status, headers = apps.create_namespaced_deployment_with_http_info(
        ns, deployment("warned", init_restart_policy="Always")
    )
    assert status == 201
    assert data.spec.template.spec.init_containers[0].restart_policy is None
    assert headers["Warning"] == '299 - "unknown field \\"spec.template.spec.initContainers[0].restartPolicy\\""'


def test_v127_ignore_drops_the_field_silently(api, ns):
    apps = client.AppsV1Api(api("m127"))
    data, status, headers = apps.create_namespaced_deployment_with_http_info(
        ns, deployment("ignored", init_restart_policy="Always"), field_validation="Ignore"
    )
    assert status == 201 and "Warning" not in headers
    assert data.spec.template.spec.init_containers[0].restart_policy is None


def test_strict_create_through_typed_client(api, ns):
    apps = client.AppsV1Api(api("m127"))
    body = deployment("strict-typed")
    body["spec"]["bogus"] = 1
    with pytest.raises(ApiException) as exc:
        apps.create_namespaced_deployment(ns, body, field_validation="Strict")
    assert exc.value.status == 400 and 'unknown field \\"spec.bogus\\"' in exc.value.body


def test_dry_run_does_not_store(api, ns):
    core = client.CoreV1Api(api("host"))
    core.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}}, dry_run="All")
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("dry", ns)
    assert exc.value.status == 404


def test_reapplying_the_same_configuration_is_a_no_op(api, ns):
    c = api("host")
    first, _, _ = apply(c, dep_path(ns, "noop"), deployment("noop"))
    again, status, _ = apply(c, dep_path(ns, "noop"), deployment("noop"))
    assert status == 200
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert again["metadata"]["generation"] == 1
    assert again["metadata"]["managedFields"] == first["metadata"]["managedFields"]


def test_apply_merges_list_items_by_key_and_drops_items_no_longer_applied(api, ns):
    c = api("host")
    body = deployment("lists")
    body["spec"]["template"]["spec"]["containers"].append({"name": "log", "image": "fluentbit:2"})
    apply(c, dep_path(ns, "lists"), body)
    body["spec"]["template"]["spec"]["containers"] = [
        {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}
    ]
    data, _, _ = apply(c, dep_path(ns, "lists"), body)
    containers = data["spec"]["template"]["spec"]["containers"]
    assert [x["name"] for x in containers] == ["web"]
    assert containers[0]["image"] == "nginx:1.27"
    assert containers[0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]


def test_apply_keeps_fields_owned_by_another_manager(sim, api, ns):
    c = api("host")
    apply(c, dep_path(ns, "shared"), deployment("shared"))
    sim.external_edit(
        "host",
        "apps/v1",
        "Deployment",
        ns,
        "shared",
        {"metadata": {"annotations": {"owner": "ops"}}},
        field_manager="ops-tool",
    )
    data, _, _ = apply(c, dep_path(ns, "shared"), deployment("shared", image="nginx:1.26"))
    assert data["metadata"]["annotations"] == {"owner": "ops"}
    assert {e["manager"] for e in data["metadata"]["managedFields"]} == {"fedportal", "ops-tool"}


def test_a_write_naming_another_uid_is_refused_and_a_create_ignores_the_uid(api):
    """An object's uid is immutable: a patch or an apply carrying another one is 422 (the
    apiserver's metadata validation), a PUT 409 (its storage precondition); on create the server
    assigns its own."""
    c = api("spare")
    core = client.CoreV1Api(c)
    made = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "uid-cm", "uid": "mine"}, "data": {"a": "1"}}
    )
    uid = made.metadata.uid
    assert uid and uid != "mine"
    path = "/api/v1/namespaces/default/configmaps/uid-cm"

    def apply(body_uid):
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "data": {"a": "2"},
            "metadata": {"name": "uid-cm", "namespace": "default", "uid": body_uid},
        }
        return c.call_api(
            path,
            "PATCH",
            query_params=[("fieldManager", "t"), ("force", "true")],
            header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )

    with pytest.raises(ApiException) as wrong_apply:
        apply("0b7d5a4e-0000-4000-8000-000000000000")
    body = wrong_apply.value.body.decode() if isinstance(wrong_apply.value.body, bytes) else wrong_apply.value.body
    assert wrong_apply.value.status == 422 and "metadata.uid" in body and "field is immutable" in body
    with pytest.raises(ApiException) as wrong_merge:
        core.patch_namespaced_config_map("uid-cm", "default", {"metadata": {"uid": "other"}})
    assert wrong_merge.value.status == 422
    with pytest.raises(ApiException) as wrong_put:
        core.replace_namespaced_config_map("uid-cm", "default", {"metadata": {"name": "uid-cm", "uid": "other"}})
    assert wrong_put.value.status == 409 and "Precondition failed: UID in precondition" in wrong_put.value.body
    assert core.read_namespaced_config_map("uid-cm", "default").data == {"a": "1"}  # nothing written
    assert apply(uid).status == 200  # the right uid is no obstacle
    assert core.read_namespaced_config_map("uid-cm", "default").data == {"a": "2"}
    core.delete_namespaced_config_map("uid-cm", "default")
    # an apply naming a uid creates nothing where no object is: kube-apiserver's patcher answers 409
    # (apiserver pkg/endpoints/handlers/patch.go, applyPatch), before admission, so before a
    # missing namespace is noticed too
    with pytest.raises(ApiException) as no_object:
        apply(uid)
    body = no_object.value.body.decode() if isinstance(no_object.value.body, bytes) else no_object.value.body
    assert no_object.value.status == 409 and json.loads(body)["reason"] == "Conflict"
    assert json.loads(body)["message"] == (
        f'Operation cannot be fulfilled on configmaps "uid-cm": uid mismatch: the provided object specified uid '
        f"{uid}, and no existing object was found"
    )
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("uid-cm", "default")
    with pytest.raises(ApiException) as in_missing_namespace:
        c.call_api(
            "/api/v1/namespaces/nowhere/configmaps/uid-cm",
            "PATCH",
            query_params=[("fieldManager", "t")],
            header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
            body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "uid-cm", "uid": uid}},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
    assert in_missing_namespace.value.status == 409


def _refusal(exc: ApiException) -> dict:
    return json.loads(exc.body.decode() if isinstance(exc.body, bytes) else exc.body)


def _moved_selector(name: str) -> dict:
    body = deployment(name)
    body["spec"]["selector"] = {"matchLabels": {"app": name, "track": "new"}}
    body["spec"]["template"]["metadata"]["labels"]["track"] = "new"
    return body


def test_an_update_changing_a_deployments_selector_is_refused_and_changes_nothing(api, ns):
    """apps/v1 strategies: "disallow mutation of selector" (422 FieldValueInvalid, field is immutable),
    by apply and by PUT alike; the object keeps its selector and its resourceVersion."""
    c = api("host")
    made, _, _ = apply(c, dep_path(ns, "sel"), deployment("sel"), force=True)
    with pytest.raises(ApiException) as refused:
        apply(c, dep_path(ns, "sel"), _moved_selector("sel"), force=True)
    status = _refusal(refused.value)
    assert refused.value.status == 422 and status["reason"] == "Invalid"
    assert status["message"].startswith('Deployment.apps "sel" is invalid: spec.selector: Invalid value: ')
    assert status["message"].endswith("field is immutable")
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec.selector",
            "message": 'Invalid value: {"matchLabels":{"app":"sel","track":"new"}}: field is immutable',
        }
    ]
    apps = client.AppsV1Api(c)
    live = apps.read_namespaced_deployment("sel", ns)
    with pytest.raises(ApiException) as replaced:
        put = _moved_selector("sel")
        put["metadata"]["resourceVersion"] = live.metadata.resource_version
        apps.replace_namespaced_deployment("sel", ns, put)
    assert replaced.value.status == 422 and "spec.selector" in _refusal(replaced.value)["message"]
    after = apps.read_namespaced_deployment("sel", ns)
    assert after.spec.selector.match_labels == {"app": "sel"}
    assert after.metadata.resource_version == made["metadata"]["resourceVersion"]
    image_only, status_code, _ = apply(c, dep_path(ns, "sel"), deployment("sel", image="nginx:1.27"), force=True)
    assert status_code == 200 and image_only["metadata"]["generation"] == 2  # the rest of the spec still changes


def test_an_immutable_configmap_keeps_its_data_and_its_flag(api, ns):
    """core validation ValidateConfigMapUpdate: Forbidden "field is immutable when `immutable` is set"."""
    c = api("host")
    path = f"/api/v1/namespaces/{ns}/configmaps/frozen"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "frozen"}, "data": {"a": "1"}}
    apply(c, path, {**body, "immutable": True}, force=True)
    _, status_code, _ = apply(c, path, {**body, "immutable": True}, force=True)
    assert status_code == 200  # the same content again is no change
    with pytest.raises(ApiException) as edited:
        apply(c, path, {**body, "immutable": True, "data": {"a": "2"}}, force=True)
    assert edited.value.status == 422
    assert _refusal(edited.value)["message"] == (
        'ConfigMap "frozen" is invalid: data: Forbidden: field is immutable when `immutable` is set'
    )
    with pytest.raises(ApiException) as thawed:
        apply(c, path, {**body, "immutable": False}, force=True)
    assert [cause["field"] for cause in _refusal(thawed.value)["details"]["causes"]] == ["immutable"]
    assert client.CoreV1Api(c).read_namespaced_config_map("frozen", ns).data == {"a": "1"}


@pytest.mark.parametrize(
    "path, body, changed, field",
    [
        (
            "/apis/apps/v1/namespaces/{ns}/statefulsets/db",
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": "db"},
                "spec": {
                    "serviceName": "db",
                    "selector": {"matchLabels": {"app": "db"}},
                    "template": {
                        "metadata": {"labels": {"app": "db"}},
                        "spec": {"containers": [{"name": "db", "image": "postgres:16"}]},
                    },
                },
            },
            {"serviceName": "db-headless"},
            "spec",
        ),
        (
            "/apis/batch/v1/namespaces/{ns}/jobs/once",
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "once"},
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "run", "image": "busybox:1.36"}],
                        }
                    }
                },
            },
            {
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "run", "image": "busybox:1.37"}]}
                }
            },
            "spec.template",
        ),
    ],
)
def test_a_statefulsets_fixed_fields_and_a_jobs_template_cannot_change(api, ns, path, body, changed, field):
    c = api("host")
    apply(c, path.format(ns=ns), body, force=True)
    with pytest.raises(ApiException) as refused:
        apply(c, path.format(ns=ns), {**body, "spec": {**body["spec"], **changed}}, force=True)
    assert refused.value.status == 422
    assert [cause["field"] for cause in _refusal(refused.value)["details"]["causes"]] == [field]


def test_an_indexed_jobs_completions_change_only_in_tandem_with_its_parallelism(api, ns):
    """validateCompletions (v1.27+): an Indexed Job's completions may change with parallelism set to
    the same value, and not otherwise; a NonIndexed Job's never (the simulator's host is v1.27+)."""
    c = api("host")
    path = f"/apis/batch/v1/namespaces/{ns}/jobs/indexed"
    pod = {"spec": {"restartPolicy": "Never", "containers": [{"name": "run", "image": "busybox:1.36"}]}}
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "indexed"},
        "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "template": pod},
    }
    apply(c, path, body, force=True)
    with pytest.raises(ApiException) as refused:
        apply(c, path, {**body, "spec": {**body["spec"], "completions": 4}}, force=True)
    assert refused.value.status == 422
    (cause,) = _refusal(refused.value)["details"]["causes"]
    assert cause["field"] == "spec.completions"
    assert cause["message"] == "Invalid value: 4: can only be modified in tandem with spec.parallelism"
    scaled, _, _ = apply(c, path, {**body, "spec": {**body["spec"], "completions": 4, "parallelism": 4}}, force=True)
    assert (scaled["spec"]["completions"], scaled["spec"]["parallelism"]) == (4, 4)
    plain = {**body, "metadata": {"name": "plain"}, "spec": {"template": pod}}
    plain_path = f"/apis/batch/v1/namespaces/{ns}/jobs/plain"
    apply(c, plain_path, plain, force=True)
    # completions was defaulted (nobody's): adding parallelism leaves it, and is accepted
    grown, _, _ = apply(c, plain_path, {**plain, "spec": {**plain["spec"], "parallelism": 2}}, force=True)
    assert (grown["spec"]["completions"], grown["spec"]["parallelism"]) == (1, 2)
    with pytest.raises(ApiException) as mode:
        apply(c, path, {**body, "spec": {**scaled["spec"], "completionMode": "NonIndexed"}}, force=True)
    assert [cause["field"] for cause in _refusal(mode.value)["details"]["causes"]] == ["spec.completionMode"]


def test_a_suspended_job_may_move_its_pods_until_it_starts(api, ns):
    """A suspended Job has not started (no startTime, a Suspended condition), so its node selector may
    change (validationOptionsForJob); its image may not; once resumed it starts."""
    c = api("host")
    path = f"/apis/batch/v1/namespaces/{ns}/jobs/later"
    pod = {"restartPolicy": "Never", "containers": [{"name": "run", "image": "busybox:1.36"}]}
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "later"},
        "spec": {"suspend": True, "template": {"spec": pod}},
    }
    made, _, _ = apply(c, path, body, force=True)
    assert "startTime" not in made["status"] and made["status"]["conditions"][0]["type"] == "Suspended"
    moved = {**body, "spec": {**body["spec"], "template": {"spec": {**pod, "nodeSelector": {"zone": "b"}}}}}
    stored, _, _ = apply(c, path, moved, force=True)
    assert stored["spec"]["template"]["spec"]["nodeSelector"] == {"zone": "b"}
    newer = {**pod, "nodeSelector": {"zone": "b"}, "containers": [{"name": "run", "image": "busybox:1.37"}]}
    with pytest.raises(ApiException) as refused:
        apply(c, path, {**moved, "spec": {**moved["spec"], "template": {"spec": newer}}}, force=True)
    assert [cause["field"] for cause in _refusal(refused.value)["details"]["causes"]] == ["spec.template"]
    started, _, _ = apply(c, path, {**moved, "spec": {**moved["spec"], "suspend": False}}, force=True)
    assert started["status"]["startTime"]
    # suspended again after it started (here: finished): its status stays, and so does its template
    again, _, _ = apply(c, path, {**moved, "spec": {**moved["spec"], "suspend": True}}, force=True)
    assert again["status"]["startTime"] == started["status"]["startTime"]
    assert [c["type"] for c in again["status"]["conditions"]] == ["Complete"]
    elsewhere = {**pod, "nodeSelector": {"zone": "c"}}
    with pytest.raises(ApiException) as started_refused:
        apply(
            c, path, {**moved, "spec": {**moved["spec"], "suspend": True, "template": {"spec": elsewhere}}}, force=True
        )
    assert [cause["field"] for cause in _refusal(started_refused.value)["details"]["causes"]] == ["spec.template"]


def test_an_update_cannot_start_a_deletion(api, ns):
    """rest.BeforeUpdate keeps a stored deletion; ValidateObjectMetaAccessorUpdate refuses one an
    update sets (422 on metadata.deletionTimestamp, field is immutable), and the object stays."""
    c = api("host")
    core = client.CoreV1Api(c)
    path = f"/api/v1/namespaces/{ns}/configmaps/keep"
    apply(
        c, path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep"}, "data": {"a": "1"}}, force=True
    )
    live = core.read_namespaced_config_map("keep", ns)
    live.data = {"a": "2"}
    live.metadata.deletion_timestamp = datetime.datetime(2026, 12, 7, 23, 30, tzinfo=datetime.UTC)
    with pytest.raises(ApiException) as refused:
        core.replace_namespaced_config_map("keep", ns, live)
    assert refused.value.status == 422
    (cause,) = _refusal(refused.value)["details"]["causes"]
    assert cause == {
        "reason": "FieldValueInvalid",
        "field": "metadata.deletionTimestamp",
        "message": "Invalid value: 2026-12-07 23:30:00 +0000 UTC: field is immutable",
    }
    live.metadata.deletion_timestamp, live.metadata.deletion_grace_period_seconds = None, 30
    with pytest.raises(ApiException) as grace:
        core.replace_namespaced_config_map("keep", ns, live)
    assert [cause["field"] for cause in _refusal(grace.value)["details"]["causes"]] == [
        "metadata.deletionGracePeriodSeconds"
    ]
    kept = core.read_namespaced_config_map("keep", ns)
    assert kept.data == {"a": "1"} and kept.metadata.deletion_timestamp is None


def test_a_delete_with_preconditions_deletes_only_that_object(api, ns):
    """DeleteOptions.preconditions (rest.BeforeDelete): another uid or resourceVersion is a 409 naming
    the kind, and the object stays; a dryRun in the body deletes nothing; the right uid deletes it."""
    c = api("host")
    path = f"/api/v1/namespaces/{ns}/configmaps/pre"
    made, _, _ = apply(c, path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pre"}}, force=True)
    core = client.CoreV1Api(c)
    with pytest.raises(ApiException) as other_uid:
        core.delete_namespaced_config_map("pre", ns, body=client.V1DeleteOptions(preconditions={"uid": "not-it"}))
    status = _refusal(other_uid.value)
    assert other_uid.value.status == 409 and status["reason"] == "Conflict"
    assert status["message"] == (
        f'Operation cannot be fulfilled on ConfigMap "pre": the UID in the precondition (not-it) does not match '
        f"the UID in record ({made['metadata']['uid']}). The object might have been deleted and then recreated"
    )
    assert status["details"] == {"name": "pre", "kind": "ConfigMap"}
    with pytest.raises(ApiException) as old_version:
        core.delete_namespaced_config_map(
            "pre", ns, body=client.V1DeleteOptions(preconditions={"resourceVersion": "1"})
        )
    assert (
        old_version.value.status == 409
        and "the ResourceVersion in the precondition (1) does not match" in _refusal(old_version.value)["message"]
    )
    core.delete_namespaced_config_map("pre", ns, body=client.V1DeleteOptions(dry_run=["All"]))
    assert core.read_namespaced_config_map("pre", ns).metadata.uid == made["metadata"]["uid"]
    core.delete_namespaced_config_map(
        "pre", ns, body=client.V1DeleteOptions(preconditions={"uid": made["metadata"]["uid"]})
    )
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("pre", ns)
    assert gone.value.status == 404


@pytest.mark.parametrize(
    "options, status, message",
    [
        (
            {"preconditions": "x"},
            400,
            "json: cannot unmarshal string into Go struct field DeleteOptions.preconditions of type v1.Preconditions",
        ),
        (
            {"dryRun": ["Foo"]},
            422,
            'DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Foo"]: supported values: "All"',
        ),
        (
            {"propagationPolicy": "Later"},
            422,
            'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Later": supported '
            'values: "Foreground", "Background", "Orphan", "nil"',
        ),
        (
            {"propagationPolicy": "Orphan", "orphanDependents": True},
            422,
            'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Orphan": orphanDependents '
            "and deletionPropagation cannot be both set",
        ),
        (
            {"propagationPolicy": 5},
            400,
            "json: cannot unmarshal number into Go struct field DeleteOptions.propagationPolicy of type "
            "v1.DeletionPropagation",
        ),
        (
            {"dryRun": [5]},
            400,
            "json: cannot unmarshal number into Go struct field DeleteOptions.dryRun of type string",
        ),
    ],
)
def test_delete_options_the_apiserver_cannot_decode_or_accept_delete_nothing(api, ns, options, status, message):
    c = api("host")
    path = f"/api/v1/namespaces/{ns}/configmaps/opts"
    apply(c, path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "opts"}}, force=True)
    with pytest.raises(ApiException) as refused:
        c.call_api(
            path,
            "DELETE",
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body=options,
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
    assert refused.value.status == status and _refusal(refused.value)["message"] == message
    assert client.CoreV1Api(c).read_namespaced_config_map("opts", ns).metadata.name == "opts"


def test_a_namespaces_preconditions_are_its_registrys_and_come_after_admission(api, ns):
    core = client.CoreV1Api(api("host"))
    with pytest.raises(ApiException) as other_uid:
        core.delete_namespace(ns, body=client.V1DeleteOptions(preconditions={"uid": "not-it"}))
    assert other_uid.value.status == 409
    assert _refusal(other_uid.value)["message"].startswith(
        f'Operation cannot be fulfilled on namespaces "{ns}": Precondition failed: UID in precondition: not-it, '
    )
    with pytest.raises(ApiException) as stale:
        core.delete_namespace("default", body=client.V1DeleteOptions(preconditions={"uid": "not-it"}))
    assert stale.value.status == 409  # the registry's preconditions come before its delete validation
    with pytest.raises(ApiException) as protected:
        core.delete_namespace("default")
    assert protected.value.status == 403  # NamespaceLifecycle


def test_a_delete_without_a_body_takes_its_options_from_the_query_and_a_body_wins(api, ns):
    """delete.go: DeleteOptions come from the query only when the body is empty; any dryRun list is
    a dry run (IsDryRun), an unknown value a 422 that deletes nothing."""
    c = api("host")
    core = client.CoreV1Api(c)
    path = f"/api/v1/namespaces/{ns}/configmaps/q"
    apply(c, path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "q"}}, force=True)

    def delete(query, body=None):
        return c.call_api(
            path,
            "DELETE",
            query_params=query,
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
        )

    with pytest.raises(ApiException) as unknown:
        delete([("dryRun", "Al")])
    assert unknown.value.status == 422
    with pytest.raises(ApiException) as policy:
        delete([("propagationPolicy", "Bogus")])
    assert policy.value.status == 422
    with pytest.raises(ApiException) as grace:
        delete([("gracePeriodSeconds", "soon")])
    assert grace.value.status == 400
    with pytest.raises(ApiException) as both:  # any orphanDependents but "0"/"false" is true
        delete([("orphanDependents", "1"), ("propagationPolicy", "Background")])
    assert both.value.status == 422 and "cannot be both set" in _refusal(both.value)["message"]
    delete([("dryRun", "All")])
    delete([], {"dryRun": ["All", "All"]})
    assert core.read_namespaced_config_map("q", ns).metadata.name == "q"  # dry runs, all of them
    delete([("dryRun", "All")], {"kind": "DeleteOptions", "apiVersion": "v1"})  # the body's options: none
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("q", ns)
    assert gone.value.status == 404


def test_a_workload_whose_selector_does_not_select_its_pod_template_is_refused(api, ns):
    """apps validation on create and update: "`selector` does not match template `labels`", and "empty
    selector is invalid for deployment"; nothing is stored."""
    c = api("host")
    body = deployment("mismatch")
    body["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    with pytest.raises(ApiException) as created:
        apply(c, dep_path(ns, "mismatch"), body, force=True)
    assert created.value.status == 422
    assert _refusal(created.value)["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec.template.metadata.labels",
            "message": 'Invalid value: {"app":"other"}: `selector` does not match template `labels`',
        }
    ]
    empty = deployment("empty")
    empty["spec"]["selector"] = {"matchLabels": {}}
    with pytest.raises(ApiException) as refused:
        apply(c, dep_path(ns, "empty"), empty, force=True)
    assert "spec.selector: Invalid value: " in _refusal(refused.value)["message"]
    assert _refusal(refused.value)["message"].endswith("empty selector is invalid for deployment")
    apps = client.AppsV1Api(c)
    for name in ("mismatch", "empty"):
        with pytest.raises(ApiException) as missing:
            apps.read_namespaced_deployment(name, ns)
        assert missing.value.status == 404
    apply(c, dep_path(ns, "mismatch"), deployment("mismatch"), force=True)
    with pytest.raises(ApiException) as updated:
        apply(c, dep_path(ns, "mismatch"), body, force=True)
    assert updated.value.status == 422 and "does not match template" in _refusal(updated.value)["message"]
