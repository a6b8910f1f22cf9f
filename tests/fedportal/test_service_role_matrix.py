"""Services check roles themselves (issue 16, finding 9): every service that writes, called by a
user of each role, either gets past its permission check or raises PermissionDenied.

"Allowed" means anything but PermissionDenied (a TransitionError or a "never propagated" error is
fine: the permission check came first). The actor is never the author of the sample objects
(``ivy-author`` wrote them), so author-only actions (cancel, repoint) are an admin's for the actor.

THE TABLE MUST COVER every public function with an ``actor`` parameter in the service modules
below (``test_every_service_that_takes_an_actor_is_in_the_table``): a new service gets a row.
No network: the sample clusters are not Ready and nothing verifies connections.
"""

import inspect
from dataclasses import dataclass
from importlib import import_module

import pytest
from django.core.exceptions import PermissionDenied

from fedportal.roles import Role

pytestmark = pytest.mark.django_db

SERVICE_MODULES = (
    "federation.services",
    "federation.propagation",
    "federation.approvals.services",
    "federation.approvals.rollout",
    "clusters.services.registry",
    "clusters.services.health",
    "clusters.services.kubeconfig",
    "drift.services",
    "drift.upgrades",
    "clusters.lifecycle",
)
# Functions with an ``actor`` that are not entry points for users: why each is left out.
NOT_ENTRY_POINTS = {
    "clusters.services.registry.save_new_cluster": "the write shared by register_cluster and the kubeconfig import, after their admin check",
    "clusters.services.registry.save_new_clusters": "save_new_cluster for many (the kubeconfig import), after its admin check",
    "federation.approvals.services.resource_settings_changed": "hook run by update_resource after its own operator check",
    "federation.approvals.rollout.start_rollout": "run by apply_change_request inside its transaction, after its checks",
}

NOBODY, VIEWER, OPERATOR, APPROVER, ADMIN = "nobody", Role.VIEWER, Role.OPERATOR, Role.APPROVER, Role.ADMIN
ROLES = (NOBODY, VIEWER, OPERATOR, APPROVER, ADMIN)
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: role-matrix-token}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"""
KUBEFED_CONFIGMAP = """apiVersion: types.kubefed.io/v1beta1
kind: FederatedConfigMap
metadata: {name: imported, namespace: default}
spec:
  template: {data: {k: v}}
  placement: {clusters: []}
"""


class World:
    """The sample objects, made on first use inside the test's database."""

    def __init__(self, make_user):
        from clusters.choices import ClusterState
        from federation import services as fs
        from tests.clusters.factories import ClusterFactory
        from tests.federation.factories import WEB_TEMPLATE, ftype

        self.author = make_user("ivy-author", Role.OPERATOR, Role.ADMIN)
        self.cluster = ClusterFactory(name="dev-a", labels={"env": "dev"}, state=ClusterState.NOT_READY)
        self.ready = ClusterFactory(name="ready-a", state=ClusterState.READY, api_server="https://127.0.0.1:1")
        self.resource = fs.create_resource(
            ftype("Deployment"),
            namespace="shop",
            name="web",
            template=WEB_TEMPLATE,
            placement={"clusters": ["dev-a"]},
            actor=self.author,
        )

    def change(self, state="Draft", **kw):
        from federation.approvals import services

        cr = services.create_change_request(self.resource, actor=self.author, **kw)
        if state != "Draft":
            cr = services.submit(cr, actor=self.author)
        return cr

    def unjoin_draft(self):
        from federation.approvals import services

        return services.create_change_request(kind="unjoin", cluster=self.cluster, actor=self.author)

    def waiting_on_ready_cluster(self):
        from federation.models import PropagatedVersion

        PropagatedVersion.objects.create(resource=self.resource, cluster=self.ready, status="ClusterNotReady")


def _fs():
    return import_module("federation.services")


def _prop():
    return import_module("federation.propagation")


def _ap():
    return import_module("federation.approvals.services")


def _ro():
    return import_module("federation.approvals.rollout")


def _cs():
    return import_module("clusters.services")


def _ds():
    return import_module("drift.services")


def _type(kind):
    from federation.models import FederatedType

    return FederatedType.objects.get(kind=kind)


@dataclass(frozen=True)
class Row:
    service: str
    allowed: frozenset
    call: object  # (world, actor) -> anything

    def __str__(self):
        return self.service


def row(service, allowed, call):
    allowed = set(allowed) | {ADMIN}  # an admin holds every role
    return Row(service, frozenset(allowed), call)


APPLIERS = (OPERATOR, APPROVER)  # apply an approved request: an operator, or the approver completing it
EVERY_ROLE = (VIEWER, OPERATOR, APPROVER)

TABLE = [
    # federation
    row(
        "federation.services.create_resource",
        [OPERATOR],
        lambda w, a: _fs().create_resource(
            _type("ConfigMap"), namespace="default", name="rm-new", template={"data": {"k": "v"}}, actor=a
        ),
    ),
    row(
        "federation.services.update_resource",
        [OPERATOR],
        lambda w, a: _fs().update_resource(
            w.resource, template=w.resource.current_revision.template, placement={"clusters": []}, actor=a
        ),
    ),
    row(
        "federation.services.withdraw_resource",
        list(APPLIERS),
        lambda w, a: _fs().withdraw_resource(w.resource, actor=a),
    ),
    row(
        "federation.services.rollback_resource",
        [OPERATOR],
        lambda w, a: _fs().rollback_resource(w.resource, to_revision=w.resource.current_revision, actor=a),
    ),
    row(
        "federation.services.apply_kubefed_file",
        [OPERATOR],
        lambda w, a: _fs().apply_kubefed_file(KUBEFED_CONFIGMAP, actor=a, dry_run=True),
    ),
    row(
        "federation.services.create_type",
        [ADMIN],
        lambda w, a: _fs().create_type(
            actor=a,
            group="example.com",
            version="v1",
            kind="Widget",
            plural="widgets",
            scope="Namespaced",
            propagation="Enabled",
            status_collection="Disabled",
        ),
    ),
    row(
        "federation.services.update_type",
        [ADMIN],
        lambda w, a: _fs().update_type(_type("ConfigMap"), actor=a, propagation="Disabled"),
    ),
    row(
        "federation.services.enable_type",
        [ADMIN],
        lambda w, a: _fs().enable_type(kind="Gadget", group="example.com", version="v1", actor=a),
    ),
    row(
        "federation.propagation.propagate_revision",
        APPLIERS,
        lambda w, a: _prop().propagate_revision(w.resource, actor=a),
    ),
    row(
        "federation.propagation.remove_from_cluster",
        APPLIERS,
        lambda w, a: _prop().remove_from_cluster(w.resource, cluster=w.cluster, actor=a),
    ),
    row("federation.propagation.resync_failed", [OPERATOR], lambda w, a: _prop().resync_failed(w.resource, actor=a)),
    row(
        "federation.propagation.resync_cluster",
        [OPERATOR],
        lambda w, a: _prop().resync_cluster(w.resource, w.cluster, actor=a),
    ),
    row(
        "federation.propagation.reconcile_waiting_clusters",
        [OPERATOR],
        lambda w, a: (w.waiting_on_ready_cluster(), _prop().reconcile_waiting_clusters(actor=a)),
    ),
    row(
        "federation.services.set_rollout_strategy",
        [OPERATOR],
        lambda w, a: _fs().set_rollout_strategy(
            w.resource, {"waves": [{"name": "all", "clusterSelector": {}}]}, actor=a
        ),
    ),
    # staged rollouts (the sample request has none: past the role check a RolloutError says so)
    row(
        "federation.approvals.rollout.pause_rollout", [OPERATOR], lambda w, a: _ro().pause_rollout(w.change(), actor=a)
    ),
    row(
        "federation.approvals.rollout.resume_rollout",
        [OPERATOR],
        lambda w, a: _ro().resume_rollout(w.change(), actor=a),
    ),
    row(
        "federation.approvals.rollout.abort_rollout", [OPERATOR], lambda w, a: _ro().abort_rollout(w.change(), actor=a)
    ),
    row(
        "federation.approvals.rollout.rollback_rollout",
        [OPERATOR],
        lambda w, a: _ro().rollback_rollout(w.change(), actor=a),
    ),
    row("federation.approvals.rollout.approve_wave", [APPROVER], lambda w, a: _ro().approve_wave(w.change(), actor=a)),
    # change requests
    row(
        "federation.approvals.services.create_change_request",
        [OPERATOR],
        lambda w, a: _ap().create_change_request(w.resource, actor=a),
    ),
    row(
        "federation.approvals.services.create_change_request(unjoin)",
        [ADMIN],
        lambda w, a: _ap().create_change_request(kind="unjoin", cluster=w.cluster, actor=a),
    ),
    # another operator's draft: its author or an admin submits it
    row("federation.approvals.services.submit", [ADMIN], lambda w, a: _ap().submit(w.change(), actor=a)),
    row("federation.approvals.services.submit(unjoin)", [ADMIN], lambda w, a: _ap().submit(w.unjoin_draft(), actor=a)),
    row(
        "federation.approvals.services.approve", [APPROVER], lambda w, a: _ap().approve(w.change("Submitted"), actor=a)
    ),
    row(
        "federation.approvals.services.reject",
        [APPROVER],
        lambda w, a: _ap().reject(w.change("Submitted"), actor=a, comment="no"),
    ),
    row("federation.approvals.services.cancel", [ADMIN], lambda w, a: _ap().cancel(w.change(), actor=a)),
    row(
        "federation.approvals.services.add_comment",
        EVERY_ROLE,
        lambda w, a: _ap().add_comment(w.change(), actor=a, body="hi"),
    ),
    row(
        "federation.approvals.services.override_preflight",
        [ADMIN],
        lambda w, a: _ap().override_preflight(w.change(), actor=a, reason="known"),
    ),
    row(
        "federation.approvals.services.apply_change_request",
        [OPERATOR],
        lambda w, a: _ap().apply_change_request(w.change("Submitted"), actor=a),
    ),
    row(
        "federation.approvals.services.emergency_apply",
        [ADMIN],
        lambda w, a: _ap().emergency_apply(w.resource, actor=a, reason="outage"),
    ),
    row(
        "federation.approvals.services.revise_change_request",
        [ADMIN],
        lambda w, a: _ap().revise_change_request(w.change(), actor=a, revision=w.resource.current_revision),
    ),
    row(
        "federation.approvals.services.revise_from_current",
        [ADMIN],
        lambda w, a: _ap().revise_from_current(w.change(), actor=a),
    ),
    row(
        "federation.approvals.services.refresh_change_request",
        APPLIERS,
        lambda w, a: _ap().refresh_change_request(w.change(), actor=a),
    ),
    # clusters
    row(
        "clusters.services.registry.register_cluster",
        [ADMIN],
        lambda w, a: _cs().register_cluster(
            name="rm-new", api_server="https://127.0.0.1:1", token="t", actor=a, verify=False, probe=False
        ),
    ),
    row(
        "clusters.services.registry.update_cluster",
        [ADMIN],
        lambda w, a: _cs().update_cluster(w.cluster, actor=a, verify=False, labels={"env": "test"}),
    ),
    row(
        "clusters.services.registry.rotate_credentials",
        [ADMIN],
        lambda w, a: _cs().rotate_credentials(w.cluster, token="new-token", actor=a, verify=False),
    ),
    row(
        "clusters.services.kubeconfig.import_kubeconfig_contexts",
        [ADMIN],
        lambda w, a: _cs().import_kubeconfig_contexts(KUBECONFIG, actor=a, verify=False),
    ),
    row(
        "clusters.services.kubeconfig.import_kubeconfig",
        [ADMIN],
        lambda w, a: import_module("clusters.services.kubeconfig").import_kubeconfig(
            KUBECONFIG, actor=a, verify=False, skip_existing=True
        ),
    ),
    row("clusters.services.registry.unjoin_cluster", [ADMIN], lambda w, a: _cs().unjoin_cluster(w.ready, actor=a)),
    row(
        "clusters.services.health.request_poll", [OPERATOR], lambda w, a: _cs().request_poll(cluster=w.cluster, actor=a)
    ),
    # drift
    row(
        "drift.services.isolate_cluster", [ADMIN], lambda w, a: _ds().isolate_cluster(w.cluster, actor=a, reason="skew")
    ),
    row(
        "drift.services.isolate_cluster(automatic)",
        [ADMIN],
        lambda w, a: _ds().isolate_cluster(w.cluster, actor=a, reason="skew", automatic=True),
    ),
    row("drift.services.restore_cluster", [ADMIN], lambda w, a: _ds().restore_cluster(w.cluster, actor=a)),
    row("drift.services.take_compliance_snapshot", [ADMIN], lambda w, a: _ds().take_compliance_snapshot(actor=a)),
    row("drift.services.update_version_policy", [ADMIN], lambda w, a: _ds().update_version_policy(actor=a)),
    # Cluster API lifecycle (a permitted role is refused for the sample cluster: not CAPI-managed)
    row(
        "drift.upgrades.request_upgrade",
        [OPERATOR],
        lambda w, a: import_module("drift.upgrades").request_upgrade(w.cluster, "v1.30.4", actor=a),
    ),
    row(
        "clusters.lifecycle.link_member",
        [ADMIN],
        lambda w, a: import_module("clusters.lifecycle").link_member(
            import_module("clusters.models").ManagedCluster.objects.get_or_create(
                management=w.cluster, namespace="default", name="rm-capi"
            )[0],
            None,
            actor=a,
        ),
    ),
]


@pytest.fixture
def world(make_user):
    return World(make_user)


def _actor(make_user, role):
    return make_user(f"rm-{role}") if role == NOBODY else make_user(f"rm-{role}", role)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("entry", TABLE, ids=str)
def test_service_checks_the_role_itself(entry, role, world, make_user):
    actor = _actor(make_user, role)
    try:
        entry.call(world, actor)
    except PermissionDenied as exc:
        assert role not in entry.allowed, f"{entry.service} refused {role}: {exc}"
    except (TypeError, AttributeError, NameError, KeyError):
        raise  # a broken row, not an answer
    except Exception:  # noqa: BLE001 - anything else means the permission check let the role through
        assert role in entry.allowed, f"{entry.service} let {role} past its permission check"
    else:
        assert role in entry.allowed, f"{entry.service} let {role} do it"


def test_every_service_that_takes_an_actor_is_in_the_table():
    found = set()
    for name in SERVICE_MODULES:
        module = import_module(name)
        for attr, func in vars(module).items():
            # a package (federation.propagation) counts what it exports from its own modules
            own = func.__module__ == name if inspect.isfunction(func) else False
            exported = hasattr(module, "__path__") and attr in getattr(module, "__all__", ())
            if attr.startswith("_") or not inspect.isfunction(func) or not (own or exported):
                continue
            if "actor" in inspect.signature(func).parameters:
                found.add(f"{name}.{attr}")
    covered = {entry.service.split("(")[0] for entry in TABLE} | set(NOT_ENTRY_POINTS)
    assert found - covered == set(), "add a row for each new service"
    assert covered - found == set(), "a row names a service that no longer exists"
