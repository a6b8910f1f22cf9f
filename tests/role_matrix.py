"""The role matrix: who may call every URL in the project, and how to build a sample of each.

``tests/fedportal/test_role_matrix.py`` walks every URL pattern (``get_resolver().url_patterns``,
skipping ``admin/`` and static files) and, for GET and POST, checks:

* anonymous           -> redirect to the login page (unless the entry says PUBLIC);
* logged in, no role  -> 403 (unless PUBLIC or AUTHENTICATED);
* viewer / operator / approver / admin -> allowed when the user holds the role named for that
  method (``fedportal.roles.user_roles``: admin holds every role, every role holder is a viewer),
  403 otherwise. A method missing from the entry must be refused (403 or 405) for everyone.

"Allowed" means the request got past the permission check and answered exactly what the URL answers
a permitted user: ``success_status`` (GET 200, an empty POST 200 with form errors, unless
``SUCCESS_STATUS`` at the end of this file says otherwise, e.g. 302, 400 with a reason, 409).

THE TEST FAILS when a URL pattern has no entry in ``EXPECTED`` (so nobody adds an unguarded view),
when an entry names a URL that no longer exists, or when a pattern has parameters and no entry in
``URL_KWARGS``.

EACH APP ADDS ITS OWN ENTRIES here, in its own block, when it adds a URL:

    # --- clusters ---------------------------------------------------------------------------
    EXPECTED.update({
        "clusters:cluster_list": {"GET": Role.VIEWER},
        "clusters:cluster_create": {"GET": Role.ADMIN, "POST": Role.ADMIN},
        "clusters:cluster_detail": {"GET": Role.VIEWER},
    })
    URL_KWARGS.update({
        # a callable run inside the test's database; make the objects the URL needs (factories)
        "clusters:cluster_detail": lambda: {"pk": ClusterFactory().pk},
    })

Keys are the URL's full name (``namespace:name``). Values map an HTTP method ("GET", "POST")
to the role it needs (a ``Role`` value), or to ``PUBLIC`` (anyone, even anonymous: login,
healthz) or ``AUTHENTICATED`` (any logged-in user, even without a role: logout). Import your
factories inside the lambda (or at the top of your block) so a broken app only breaks its rows.
"""

from collections.abc import Callable

from fedportal.roles import Role

PUBLIC = "public"
AUTHENTICATED = "authenticated"
METHODS = ("GET", "POST")

EXPECTED: dict[str, dict[str, str]] = {}
URL_KWARGS: dict[str, Callable[[], dict]] = {}


# --- fedportal ----------------------------------------------------------------------------------
def _sample_audit_event_pk() -> dict:
    from fedportal.audit import record_event

    return {"pk": record_event("test.role_matrix", summary="sample event for the role matrix").pk}


EXPECTED.update(
    {
        "home": {"GET": Role.VIEWER},
        "healthz": {"GET": PUBLIC},
        "favicon": {"GET": PUBLIC},
        "login": {"GET": PUBLIC, "POST": PUBLIC},
        "logout": {"POST": AUTHENTICATED},
        "audit:event_list": {"GET": Role.VIEWER},
        "audit:event_detail": {"GET": Role.VIEWER},
        "audit:event_export": {"GET": Role.VIEWER},
    }
)
URL_KWARGS.update(
    {
        "audit:event_detail": _sample_audit_event_pk,
    }
)


# --- drift --------------------------------------------------------------------------------------
def _sample_drift_pair() -> dict:
    from clusters.models import Cluster

    for name, role, version in (("rm-host", "host", "v1.29.0"), ("rm-member", "member", "v1.27.0")):
        Cluster.objects.get_or_create(
            name=name, defaults={"api_server": f"https://{name}.example:6443", "role": role, "server_version": version}
        )
    return {"a": "rm-host", "b": "rm-member"}


EXPECTED.update(
    {
        "drift:skew_matrix": {"GET": Role.VIEWER},
        "drift:skew_export": {"GET": Role.VIEWER},
        "drift:skew_pair": {"GET": Role.VIEWER},
        "drift:version_history": {"GET": Role.VIEWER},
        "drift:policy_edit": {"GET": Role.ADMIN, "POST": Role.ADMIN},
    }
)
URL_KWARGS.update({"drift:skew_pair": _sample_drift_pair})


# --- clusters -----------------------------------------------------------------------------------
def _sample_cluster_pk() -> dict:
    from tests.clusters.factories import ClusterFactory

    return {"pk": ClusterFactory().pk}


def _sample_poll_pk() -> dict:
    from clusters.models import PollRequest

    return {"pk": PollRequest.objects.create(total=0).pk}


def _sample_managed_cluster_pk() -> dict:
    from clusters.models import ManagedCluster
    from tests.clusters.factories import ClusterFactory

    return {"pk": ManagedCluster.objects.create(management=ClusterFactory(), namespace="default", name="w1").pk}


EXPECTED.update(
    {
        "clusters:cluster_list": {"GET": Role.VIEWER},
        "clusters:cluster_detail": {"GET": Role.VIEWER},
        "clusters:summary": {"GET": Role.VIEWER},
        "clusters:cluster_create": {"GET": Role.ADMIN, "POST": Role.ADMIN},
        "clusters:cluster_test_connection": {"POST": Role.ADMIN},
        "clusters:cluster_import": {"GET": Role.ADMIN, "POST": Role.ADMIN},
        "clusters:cluster_bulk_label": {"POST": Role.ADMIN},
        "clusters:cluster_edit": {"GET": Role.ADMIN, "POST": Role.ADMIN},
        "clusters:cluster_rotate_credentials": {"GET": Role.ADMIN, "POST": Role.ADMIN},
        "clusters:cluster_unjoin": {"GET": Role.ADMIN, "POST": Role.ADMIN},
        "clusters:cluster_poll": {"POST": Role.OPERATOR},
        "clusters:fleet_poll": {"POST": Role.OPERATOR},
        "clusters:poll_status": {"GET": Role.VIEWER},
        "clusters:lifecycle": {"GET": Role.VIEWER},
        "clusters:lifecycle_link": {"POST": Role.ADMIN},
    }
)
URL_KWARGS.update(
    {
        "clusters:cluster_detail": _sample_cluster_pk,
        "clusters:cluster_edit": _sample_cluster_pk,
        "clusters:cluster_rotate_credentials": _sample_cluster_pk,
        "clusters:cluster_unjoin": _sample_cluster_pk,
        "clusters:cluster_poll": _sample_cluster_pk,
        "clusters:poll_status": _sample_poll_pk,
        "clusters:lifecycle_link": _sample_managed_cluster_pk,
    }
)


def _sample_compat_cell() -> dict:
    from federation.models import FederatedType
    from federation.services import create_resource

    kwargs = _sample_drift_pair()
    ftype, _ = FederatedType.objects.get_or_create(
        group="apps", kind="Deployment", defaults={"version": "v1", "plural": "deployments"}
    )
    template = {
        "spec": {
            "selector": {"matchLabels": {"app": "rm"}},
            "template": {
                "metadata": {"labels": {"app": "rm"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        }
    }
    resource = create_resource(
        ftype, namespace="default", name="rm-compat", template=template, placement={"clusters": [kwargs["b"]]}
    )
    return {"pk": resource.pk, "cluster": kwargs["b"]}


EXPECTED.update(
    {
        "drift:compat_matrix": {"GET": Role.VIEWER},
        "drift:compat_export": {"GET": Role.VIEWER},
        "drift:compat_cell": {"GET": Role.VIEWER},
    }
)
URL_KWARGS.update({"drift:compat_cell": _sample_compat_cell})
EXPECTED.update(
    {
        "drift:compliance_report": {"GET": Role.VIEWER},
        "drift:compliance_export": {"GET": Role.VIEWER},
        "drift:compliance_snapshot": {"POST": Role.ADMIN},
        "drift:isolation_banner": {"GET": Role.VIEWER},
        "drift:cluster_isolate": {"GET": Role.ADMIN, "POST": Role.ADMIN},
        "drift:cluster_restore": {"GET": Role.ADMIN, "POST": Role.ADMIN},
    }
)
URL_KWARGS.update(
    {
        "drift:cluster_isolate": lambda: {"name": _sample_drift_pair()["b"]},
        "drift:cluster_restore": lambda: {"name": _sample_drift_pair()["b"]},
    }
)
EXPECTED.update({"drift:summary": {"GET": Role.VIEWER}})


# --- approvals (change requests) ------------------------------------------------------------------
def _sample_change_request(state: str = "Draft") -> dict:
    from federation.approvals.models import ChangeRequest
    from federation.models import FederatedType
    from federation.services import create_resource

    ftype = FederatedType.objects.get(group="", kind="ConfigMap")
    resource = create_resource(
        ftype,
        namespace="default",
        name=f"rm-change-{ChangeRequest.objects.count()}",
        template={"data": {"k": "v"}},
        placement={},
    )
    revision = resource.current_revision
    cr = ChangeRequest.objects.create(
        kind="create",
        state=state,
        title="role matrix sample",
        resource=resource,
        resource_repr=str(resource),
        proposed_revision=revision,
        proposed_hash=revision.content_hash,
    )
    return {"pk": cr.pk}


def _sample_change_resource() -> dict:
    from federation.approvals.models import ChangeRequest

    return {"resource_pk": ChangeRequest.objects.get(pk=_sample_change_request()["pk"]).resource_id}


EXPECTED.update(
    {
        "approvals:change_list": {"GET": Role.VIEWER},
        "approvals:inbox": {"GET": Role.APPROVER},
        "approvals:badge": {"GET": Role.VIEWER},
        "approvals:summary": {"GET": Role.VIEWER},
        "approvals:change_detail": {"GET": Role.VIEWER},
        "approvals:change_create": {"GET": Role.OPERATOR, "POST": Role.OPERATOR},
        "approvals:change_create_unjoin": {"GET": Role.ADMIN, "POST": Role.ADMIN},
        "approvals:emergency_apply": {"GET": Role.ADMIN, "POST": Role.ADMIN},
        # the sample draft is another user's: its author or an admin submits it
        "approvals:change_submit": {"POST": Role.ADMIN},
        "approvals:change_approve": {"POST": Role.APPROVER},
        "approvals:change_reject": {"POST": Role.APPROVER},
        "approvals:change_cancel": {"POST": Role.OPERATOR},
        "approvals:change_apply": {"POST": Role.OPERATOR},
        "approvals:change_refresh": {"POST": Role.OPERATOR},
        "approvals:change_override": {"POST": Role.ADMIN},
        "approvals:change_comment": {"POST": Role.VIEWER},
        "approvals:change_rollout": {"POST": Role.OPERATOR},
        "approvals:change_wave_approve": {"POST": Role.APPROVER},
    }
)
URL_KWARGS.update(
    {
        "approvals:change_detail": _sample_change_request,
        "approvals:change_create": _sample_change_resource,
        "approvals:change_create_unjoin": lambda: {"cluster_pk": _sample_cluster_pk()["pk"]},
        "approvals:emergency_apply": _sample_change_resource,
        "approvals:change_submit": _sample_change_request,
        "approvals:change_approve": _sample_change_request,
        "approvals:change_reject": _sample_change_request,
        # a finished request: the state is refused (409) before the author check, for every operator
        "approvals:change_cancel": lambda: _sample_change_request("Cancelled"),
        "approvals:change_apply": _sample_change_request,
        "approvals:change_refresh": _sample_change_request,
        "approvals:change_override": _sample_change_request,
        "approvals:change_comment": _sample_change_request,
        "approvals:change_rollout": _sample_change_request,
        "approvals:change_wave_approve": _sample_change_request,
    }
)


# --- federation (types, resources, revisions, propagation, drift) --------------------------------
def _sample_federated_resource() -> dict:
    """A Deployment with no placement: its pages and actions never reach the network."""
    from federation.services import create_resource
    from tests.federation.factories import WEB_TEMPLATE, ftype

    return {
        "pk": create_resource(ftype("Deployment"), namespace="default", name="rm-federation", template=WEB_TEMPLATE).pk
    }


def _sample_federated_resource_revision() -> dict:
    return {**_sample_federated_resource(), "number": 1}


def _sample_federated_resource_cluster() -> dict:
    return {**_sample_federated_resource(), "cluster_pk": _sample_cluster_pk()["pk"]}


def _sample_federated_type_pk() -> dict:
    from tests.federation.factories import ftype

    return {"pk": ftype("Secret").pk}


EXPECTED.update(
    {
        "federation:resource_list": {"GET": Role.VIEWER},
        "federation:resource_create": {"GET": Role.OPERATOR, "POST": Role.OPERATOR},
        "federation:formset_row": {"GET": Role.OPERATOR},
        "federation:drift_list": {"GET": Role.VIEWER},
        "federation:watcher_list": {"GET": Role.VIEWER},
        "federation:summary": {"GET": Role.VIEWER},
        "federation:type_list": {"GET": Role.VIEWER},
        "federation:type_create": {"GET": Role.ADMIN, "POST": Role.ADMIN},
        "federation:type_edit": {"GET": Role.ADMIN, "POST": Role.ADMIN},
        "federation:resource_detail": {"GET": Role.VIEWER},
        "federation:resource_edit": {"GET": Role.OPERATOR, "POST": Role.OPERATOR},
        "federation:resource_preview": {"GET": Role.VIEWER},
        "federation:resource_resync": {"POST": Role.OPERATOR},
        "federation:resource_resync_failed": {"POST": Role.OPERATOR},
        "federation:revision_list": {"GET": Role.VIEWER},
        "federation:revision_detail": {"GET": Role.VIEWER},
        "federation:revision_rollback": {"POST": Role.OPERATOR},
    }
)
URL_KWARGS.update(
    {
        "federation:formset_row": lambda: {"kind": "overrides"},
        "federation:type_edit": _sample_federated_type_pk,
        "federation:resource_detail": _sample_federated_resource,
        "federation:resource_edit": _sample_federated_resource,
        "federation:resource_preview": _sample_federated_resource,
        "federation:resource_resync": _sample_federated_resource_cluster,
        "federation:resource_resync_failed": _sample_federated_resource,
        "federation:revision_list": _sample_federated_resource,
        "federation:revision_detail": _sample_federated_resource_revision,
        "federation:revision_rollback": _sample_federated_resource_revision,
    }
)


# --- drift: Cluster API upgrades ------------------------------------------------------------------
def _sample_cluster_name() -> dict:
    from tests.clusters.factories import ClusterFactory

    return {"name": ClusterFactory().name}


EXPECTED.update({"drift:upgrade_request": {"POST": Role.OPERATOR}, "drift:lifecycle_export": {"GET": Role.VIEWER}})
URL_KWARGS.update({"drift:upgrade_request": _sample_cluster_name})


# --- what an allowed request answers --------------------------------------------------------------
# "Allowed" is asserted exactly: GET answers 200 and a POST with an empty body 200 (a form shown
# again with its errors) unless listed here (a redirect, a 400 with the reason, a 409 when a fresh
# request is in the wrong state). A 404 or 400 where 200 is expected means the sample in URL_KWARGS
# or the view is broken, not that access works. Add your URL here when it answers otherwise.
SUCCESS_STATUS: dict[tuple[str, str], int] = {
    ("approvals:change_apply", "POST"): 409,
    ("approvals:change_rollout", "POST"): 400,  # no action chosen: refused with the reason
    ("approvals:change_wave_approve", "POST"): 400,  # names no wave: refused with the reason
    ("approvals:change_approve", "POST"): 400,  # names no content hash: refused with the reason
    ("approvals:change_cancel", "POST"): 409,
    ("approvals:change_comment", "POST"): 400,
    ("approvals:change_create", "POST"): 302,  # every field optional: a Draft with the defaults
    ("approvals:change_create_unjoin", "POST"): 400,
    ("approvals:change_override", "POST"): 400,
    ("approvals:change_refresh", "POST"): 302,
    ("approvals:change_reject", "POST"): 400,
    ("approvals:change_submit", "POST"): 302,
    ("approvals:emergency_apply", "POST"): 400,
    ("clusters:cluster_create", "POST"): 400,
    ("clusters:cluster_edit", "POST"): 400,
    ("clusters:cluster_import", "POST"): 400,
    ("clusters:cluster_poll", "POST"): 302,
    ("clusters:cluster_rotate_credentials", "POST"): 400,
    ("clusters:cluster_unjoin", "POST"): 400,
    ("clusters:fleet_poll", "POST"): 302,
    ("clusters:lifecycle_link", "POST"): 302,
    ("drift:upgrade_request", "POST"): 400,
    ("drift:cluster_isolate", "POST"): 400,  # no reason given
    ("drift:cluster_restore", "POST"): 400,  # the sample cluster is not isolated: refused with the reason
    ("drift:policy_edit", "POST"): 400,
    ("federation:formset_row", "GET"): 400,
    ("federation:resource_create", "POST"): 400,
    ("federation:resource_edit", "POST"): 400,
    ("federation:resource_resync", "POST"): 302,
    ("federation:resource_resync_failed", "POST"): 302,
    ("federation:revision_rollback", "POST"): 302,
    ("federation:type_create", "POST"): 400,
    ("federation:type_edit", "POST"): 400,
    ("login", "GET"): 302,
    ("login", "POST"): 302,
    ("logout", "POST"): 302,
}
# anonymous users get the login page itself; signed-in users are sent on
ANONYMOUS_SUCCESS_STATUS: dict[tuple[str, str], int] = {("login", "GET"): 200, ("login", "POST"): 200}


def success_status(name: str, method: str, who: str) -> int:
    if who == "anonymous" and (name, method) in ANONYMOUS_SUCCESS_STATUS:
        return ANONYMOUS_SUCCESS_STATUS[(name, method)]
    return SUCCESS_STATUS.get((name, method), 200)


# --- api (the profile page; the API itself has its own matrix: tests/api/test_role_matrix.py) -----
def _sample_token_pk() -> dict:
    from django.contrib.auth import get_user_model

    from api.tokens import create_token

    owner = get_user_model().objects.create_user(username=f"rm-token-owner-{get_user_model().objects.count()}")
    return {"pk": create_token(owner, actor=None).token.pk}


EXPECTED.update(
    {
        # creating a token needs a role, as POST /api/v1/tokens does
        "profile": {"GET": AUTHENTICATED, "POST": Role.VIEWER},
        # someone else's token: 404 for everyone (never revoked), so the row checks only the login gate
        "token_revoke": {"POST": AUTHENTICATED},
    }
)
URL_KWARGS.update({"token_revoke": _sample_token_pk})
SUCCESS_STATUS[("token_revoke", "POST")] = 404  # someone else's token: never revoked, never disclosed
SUCCESS_STATUS[("favicon", "GET")] = 301  # a permanent redirect to the static icon
SUCCESS_STATUS[("clusters:cluster_bulk_label", "POST")] = 302  # nothing chosen: back to the list with the reason
SUCCESS_STATUS[("drift:compliance_snapshot", "POST")] = 302  # taken, back to the report
SUCCESS_STATUS[("profile", "POST")] = 400  # an empty token form, shown again with its errors
