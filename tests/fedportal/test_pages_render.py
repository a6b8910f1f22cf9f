"""Every page the role matrix knows renders for an admin: with the status the role matrix expects,
showing its own content (PAGE_CONTENT: the heading, title or CSV header that says it is that page),
and without leaking template syntax (an unclosed or multi-line ``{# #}`` comment, say, prints itself
into the page)."""

import pytest
from django.urls import reverse

from fedportal.roles import Role
from tests.role_matrix import EXPECTED, URL_KWARGS, success_status

pytestmark = pytest.mark.django_db

GET_PAGES = sorted(name for name, methods in EXPECTED.items() if "GET" in methods and not name.startswith("admin:"))

# What each page shows when it is that page (None: an empty fragment or a redirect for this sample).
# A page added to the role matrix needs its line here.
PAGE_CONTENT = {
    "favicon": "",  # a permanent redirect to the static icon (checked below)
    "profile": "API tokens",
    "approvals:badge": None,
    "approvals:change_create": "Request a change to ConfigMap default/rm-change-",
    "approvals:change_create_unjoin": "Request unjoin of ",
    "approvals:change_detail": "role matrix sample",
    "approvals:change_list": "<h1>Change requests",
    "approvals:emergency_apply": "Emergency apply of ConfigMap default/rm-change-",
    "approvals:inbox": "Waiting for my approval",
    "approvals:summary": "<title>Change requests · FedPortal</title>",
    "audit:event_detail": "test.role_matrix",
    "audit:event_export": "ID,Time (UTC),Actor,Action,Object type,Object ID,Object,Cluster,Summary,Request",
    "audit:event_list": "Audit log",
    "clusters:cluster_create": "Register a cluster",
    "clusters:cluster_detail": "(member)",
    "clusters:cluster_edit": "<title>Edit member-",
    "clusters:cluster_import": "Import clusters from a kubeconfig",
    "clusters:cluster_list": "<title>Clusters · FedPortal</title>",
    "clusters:cluster_rotate_credentials": "Rotate the credentials of member-",
    "clusters:cluster_unjoin": "<title>Unjoin member-",
    "clusters:poll_status": "Poll fleet",
    "clusters:summary": "<title>Cluster summary · FedPortal</title>",
    "drift:cluster_isolate": "Isolate rm-member",
    "drift:cluster_restore": "Restore rm-member",
    "drift:compat_cell": "default/rm-compat on rm-member",
    "drift:compat_export": "Resource,Kind,Cluster,Cluster version,Status,Unsupported fields,Problems",
    "drift:compat_matrix": "API compatibility",
    "drift:compliance_export": "Cluster,Role,Version,Score,Compliant,Version policy",
    "drift:compliance_report": "Fleet compliance report",
    "drift:isolation_banner": None,
    "drift:policy_edit": "<title>Version policy · FedPortal</title>",
    "drift:skew_export": "Cluster,Version,gitVersion,Host,Host version",
    "drift:skew_matrix": "<title>Version drift · FedPortal</title>",
    "drift:skew_pair": "rm-host vs rm-member",
    "drift:summary": "0 clusters",
    "drift:version_history": "<title>Version history · FedPortal</title>",
    "federation:drift_list": "<title>Resource drift · FedPortal</title>",
    "clusters:lifecycle": "<title>Lifecycle · FedPortal</title>",
    "drift:lifecycle_export": "section,cluster,version,target,detail",
    "federation:watcher_list": "<title>Fleet watchers · FedPortal</title>",
    "federation:formset_row": "TOTAL_FORMS must be a number.",
    "federation:resource_create": "New federated resource",
    "federation:resource_detail": "Deployment default/rm-federation",
    "federation:resource_edit": "Edit Deployment default/rm-federation",
    "federation:resource_list": "<title>Federated resources · FedPortal</title>",
    "federation:resource_preview": "<title>Preview Deployment default/rm-federation · FedPortal</title>",
    "federation:revision_detail": "Revision 1 of Deployment default/rm-federation",
    "federation:revision_list": "History of Deployment default/rm-federation",
    "federation:summary": "<title>Federation summary · FedPortal</title>",
    "federation:type_create": "Enable a federated type",
    "federation:type_edit": "Edit federated type secrets",
    "federation:type_list": "<title>Federated types · FedPortal</title>",
    "healthz": '{"status": "ok"}',
    "home": "Fleet dashboard",
    "login": None,
}


def test_every_page_has_its_expected_content():
    assert sorted(PAGE_CONTENT) == GET_PAGES


@pytest.mark.parametrize("name", GET_PAGES)
def test_page_renders_without_template_syntax(client, make_user, name):
    client.force_login(make_user("page-admin", Role.ADMIN))
    response = client.get(reverse(name, kwargs=URL_KWARGS[name]() if name in URL_KWARGS else {}))
    assert response.status_code == success_status(name, "GET", "admin")
    body = (b"".join(response.streaming_content) if response.streaming else response.content).decode()
    expected = PAGE_CONTENT[name]
    if expected is None:
        assert body.strip() == "", f"{name} should be empty for this sample"
    else:
        assert expected in body, f"{name} does not show {expected!r}"
    if "text/html" in response.get("Content-Type", ""):
        html = body
        for token in ("{#", "#}", "{%", "%}"):  # (braces alone appear in JSON for charts)
            assert token not in html, f"{name} shows raw template syntax {token!r}"
