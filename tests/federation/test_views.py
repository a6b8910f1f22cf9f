"""Federation pages: full page, htmx fragment, permissions, bad input, query counts."""

import pytest
from django.urls import reverse
from django.utils.html import escape

from federation import propagation, services
from federation.models import FederatedResource, FederatedType, PropagatedVersion, Revision
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import WEB_TEMPLATE, drain, federate_namespace, ftype, register_fleet, web_deployment

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
IMAGE = "/spec/template/spec/containers/0/image"

TEMPLATE_YAML = """metadata:
  labels: {app: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "nginx:1.25"}
"""


@pytest.fixture
def clusters():
    return [ClusterFactory(name=n) for n in ("east", "west")]


@pytest.fixture
def resource(clusters):
    return web_deployment(placement={"clusters": ["east"]})


def form_data(**overrides):
    data = {
        "type": ftype("Deployment").pk,
        "namespace": "shop",
        "name": "web",
        "template_yaml": TEMPLATE_YAML,
        "placement_mode": "clusters",
        "clusters": ["east", "west"],
        "selector_yaml": "",
        "retention": "Delete",
        "drift_policy": "Report",
        "message": "",
        "ov-TOTAL_FORMS": "1",
        "ov-INITIAL_FORMS": "0",
        "ov-MIN_NUM_FORMS": "0",
        "ov-MAX_NUM_FORMS": "200",
        "ov-0-cluster": "west",
        "ov-0-op": "replace",
        "ov-0-path": IMAGE,
        "ov-0-value": "nginx:1.27",
        "rsp-TOTAL_FORMS": "1",
        "rsp-INITIAL_FORMS": "0",
        "rsp-MIN_NUM_FORMS": "0",
        "rsp-MAX_NUM_FORMS": "200",
        "rsp-0-cluster": "*",
        "rsp-0-weight": "1",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def pages(resource):
    return [
        reverse("federation:resource_list"),
        reverse("federation:resource_detail", args=[resource.pk]),
        reverse("federation:revision_list", args=[resource.pk]),
        reverse("federation:revision_detail", args=[resource.pk, 1]),
        reverse("federation:drift_list"),
        reverse("federation:type_list"),
        reverse("federation:summary"),
    ]


def test_every_read_page_renders_full_and_as_fragment(client, viewer, resource):
    client.force_login(viewer)
    for url in pages(resource):
        full = client.get(url)
        assert full.status_code == 200, url
        assert b"<html" in full.content
        fragment = client.get(url, **HX)
        assert fragment.status_code == 200, url
        assert b"<html" not in fragment.content
        assert "HX-Request" in full.get("Vary", "")


def test_users_without_a_role_get_403_everywhere(client, nobody, resource):
    client.force_login(nobody)
    for url in pages(resource) + [
        reverse("federation:resource_create"),
        reverse("federation:resource_preview", args=[resource.pk]),
    ]:
        assert client.get(url).status_code == 403, url
        assert client.get(url, **HX).status_code == 403, url


def test_viewers_cannot_write(client, viewer, resource, clusters):
    client.force_login(viewer)
    assert client.get(reverse("federation:resource_create")).status_code == 403
    assert client.post(reverse("federation:resource_create"), form_data()).status_code == 403
    assert client.post(reverse("federation:resource_resync", args=[resource.pk, clusters[0].pk])).status_code == 403
    assert client.post(reverse("federation:revision_rollback", args=[resource.pk, 1])).status_code == 403
    assert client.get(reverse("federation:type_create")).status_code == 403


def test_operators_cannot_edit_types(client, operator):
    client.force_login(operator)
    assert client.get(reverse("federation:type_create")).status_code == 403
    assert client.post(reverse("federation:type_edit", args=[ftype("Secret").pk]), {}).status_code == 403


def test_resource_list_has_a_fixed_number_of_queries(client, viewer, clusters, django_assert_max_num_queries):
    for i in range(12):
        web_deployment(name=f"web-{i}", placement={"clusters": ["east"]})
    client.force_login(viewer)
    with django_assert_max_num_queries(8):
        response = client.get(reverse("federation:resource_list"))
    assert response.content.count(b"/federation/") >= 12


def test_drift_list_has_a_fixed_number_of_queries(client, viewer, clusters, django_assert_max_num_queries):
    for i in range(5):
        resource = web_deployment(name=f"web-{i}", placement={"clusters": ["east"]})
        PropagatedVersion.objects.create(
            resource=resource,
            cluster=clusters[0],
            status="OK",
            sync_state="OutOfSync",
            drift=[{"path": "/spec/replicas", "before": 1, "after": 3, "change": "changed"}],
        )
    client.force_login(viewer)
    with django_assert_max_num_queries(8):
        response = client.get(reverse("federation:drift_list"))
    assert response.content.count(b"/spec/replicas") == 5


def test_create_through_the_form_saves_revision_with_override_and_rsp(client, operator, clusters):
    client.force_login(operator)
    response = client.post(
        reverse("federation:resource_create"), form_data(**{"rsp_enabled": "on", "total_replicas": "4"})
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    resource = FederatedResource.objects.get()
    revision = resource.current_revision
    assert revision.placement == {"clusters": ["east", "west"]}
    assert revision.overrides == [
        {"clusterName": "west", "clusterOverrides": [{"op": "replace", "path": IMAGE, "value": "nginx:1.27"}]}
    ]
    assert revision.scheduling["totalReplicas"] == 4 and revision.scheduling["clusters"] == {
        "*": {"weight": 1, "minReplicas": 0}
    }
    assert revision.author == operator


def test_htmx_create_redirects_with_hx_header(client, operator, clusters):
    client.force_login(operator)
    response = client.post(reverse("federation:resource_create"), form_data(), **HX)
    assert response.status_code == 200 and response["HX-Redirect"].startswith("/federation/")


@pytest.mark.parametrize(
    "changes, field_text",
    [
        ({"template_yaml": "spec: [unclosed"}, "Invalid YAML"),
        ({"template_yaml": "kind: Service\n"}, "kind is &#x27;Service&#x27;"),
        ({"template_yaml": "a: &x [1]\nb: *x\n"}, "aliases"),
        ({"template_yaml": "a: " + "x" * 300_000}, "larger than"),
        ({"ov-0-path": "/spec/strategy/type", "ov-0-value": "Recreate"}, "path /spec/strategy/type does not exist"),
        ({"ov-0-path": "spec/replicas"}, "not a JSON pointer"),
        (
            {"placement_mode": "selector", "selector_yaml": "matchExpressions: [{key: env, operator: Has}]"},
            "operator &#x27;Has&#x27;",
        ),
        ({"placement_mode": "selector", "selector_yaml": "matchLabels: [a]"}, "matchLabels must be a mapping"),
        ({"clusters": ["mars"]}, "Select a valid choice"),
        ({"namespace": "Not_Valid"}, "not a valid name"),
        ({"rsp_enabled": "on", "total_replicas": ""}, "Give the total number of replicas"),
        # a second row for a cluster silently replaced the first, its max included (a reviewer's finding)
        (
            {
                "rsp_enabled": "on",
                "total_replicas": "4",
                "rsp-TOTAL_FORMS": "2",
                "rsp-0-cluster": "east",
                "rsp-0-max_replicas": "3",
                "rsp-1-cluster": "east",
                "rsp-1-weight": "7",
            },
            "east has another scheduling row above; keep one.",
        ),
        (
            {
                "rsp_enabled": "on",
                "total_replicas": "4",
                "rsp-TOTAL_FORMS": "2",
                "rsp-1-cluster": "*",
                "rsp-1-weight": "2",
            },
            "* has another scheduling row above; keep one.",
        ),
        ({"type": "99999"}, "Select a valid choice"),
        # "²" passes str.isdigit() but not int(): a 500 before; an array index is ASCII digits only
        ({"ov-0-path": "/spec/template/spec/containers/²/image"}, "containers/²/image does not exist"),
        # a "\0" escape loads as NUL, which PostgreSQL's jsonb refuses: a 500 on save before
        ({"template_yaml": TEMPLATE_YAML.replace('"nginx:1.25"', '"nginx\\0"')}, "Null characters are not allowed"),
        ({"ov-0-value": '"nginx\\u0000"'}, "Null characters are not allowed"),
        ({"placement_mode": "selector", "selector_yaml": 'matchLabels: {"env\\0": prod}'}, "Null characters"),
    ],
)
def test_bad_input_is_a_form_error_and_nothing_is_saved(client, operator, clusters, changes, field_text):
    client.force_login(operator)
    response = client.post(reverse("federation:resource_create"), form_data(**changes))
    assert response.status_code == 400
    assert field_text in response.content.decode()
    assert not FederatedResource.objects.exists() and not Revision.objects.exists()


def test_two_scheduling_rows_without_a_valid_cluster_are_not_called_duplicates(client, operator, clusters):
    client.force_login(operator)
    data = form_data(
        **{
            "rsp_enabled": "on",
            "total_replicas": "4",
            "rsp-TOTAL_FORMS": "2",
            "rsp-0-cluster": "mars",
            "rsp-1-cluster": "mars",
            "rsp-1-weight": "2",
        }
    )
    body = client.post(reverse("federation:resource_create"), data).content.decode()
    assert "Select a valid choice" in body and "has another scheduling row" not in body
    assert not FederatedResource.objects.exists()


def test_edit_with_a_bad_array_index_or_a_null_character_is_a_form_error(client, operator, resource):
    client.force_login(operator)
    url = reverse("federation:resource_edit", args=[resource.pk])
    base = form_data(namespace=None, name=None, type=None)
    bad_index = client.post(url, {**base, "ov-0-path": "/spec/template/spec/containers/²/image"})
    assert bad_index.status_code == 400 and "containers/²/image does not exist" in bad_index.content.decode()
    nul = client.post(url, {**base, "template_yaml": TEMPLATE_YAML.replace('"nginx:1.25"', '"nginx\\u0000"')})
    assert nul.status_code == 400 and "Null characters are not allowed" in nul.content.decode()
    resource.refresh_from_db()
    assert resource.current_revision.number == 1 and resource.revisions.count() == 1


@pytest.mark.parametrize("raw", ["²", "١", "x", "-1", "99999999999999999999"])
def test_new_resource_page_ignores_a_type_that_is_not_a_number(client, operator, raw):
    client.force_login(operator)
    response = client.get(reverse("federation:resource_create"), {"type": raw})
    assert response.status_code == 200 and response.context["form"].initial.get("type") is None


def test_new_resource_page_preselects_the_type_given(client, operator):
    client.force_login(operator)
    deployment = ftype("Deployment")
    response = client.get(reverse("federation:resource_create"), {"type": str(deployment.pk)})
    assert response.status_code == 200 and response.context["form"].initial["type"] == deployment


def test_bad_override_error_names_the_cluster(client, operator, clusters):
    client.force_login(operator)
    response = client.post(
        reverse("federation:resource_create"),
        form_data(**{"ov-0-op": "remove", "ov-0-path": "/spec/paused", "ov-0-value": ""}),
    )
    assert response.status_code == 400
    assert "/spec/paused" in response.content.decode() and "&#x27;west&#x27;" in response.content.decode()


def test_htmx_bad_input_returns_the_form_fragment(client, operator, clusters):
    client.force_login(operator)
    response = client.post(reverse("federation:resource_create"), form_data(template_yaml="- a"), **HX)
    assert response.status_code == 400 and b"<html" not in response.content and b"resource-form" in response.content


def test_add_override_row_via_htmx_and_without_js(client, operator, clusters):
    client.force_login(operator)
    response = client.get(reverse("federation:formset_row", args=["overrides"]), {"ov-TOTAL_FORMS": "3"})
    body = response.content.decode()
    assert 'name="ov-3-path"' in body and 'value="4"' in body and "hx-swap-oob" in body
    assert client.get(reverse("federation:formset_row", args=["overrides"]), {"ov-TOTAL_FORMS": "x"}).status_code == 400
    assert client.get(reverse("federation:formset_row", args=["nope"])).status_code == 404
    no_js = client.post(reverse("federation:resource_create"), form_data(_add_override="1"))
    assert no_js.status_code == 200 and 'name="ov-1-path"' in no_js.content.decode()
    assert not FederatedResource.objects.exists()


def test_removed_override_rows_are_ignored(client, operator, clusters):
    client.force_login(operator)
    response = client.post(
        reverse("federation:resource_create"), form_data(**{"ov-0-DELETE": "on", "ov-0-path": "/nope"})
    )
    assert response.status_code == 302
    assert FederatedResource.objects.get().current_revision.overrides == []


def test_edit_makes_a_new_revision_and_shows_initial_values(client, operator, resource):
    client.force_login(operator)
    page = client.get(reverse("federation:resource_edit", args=[resource.pk]))
    assert page.status_code == 200 and "nginx:1.25" in page.content.decode()
    data = form_data(namespace=None, name=None, type=None, clusters=["west"])
    response = client.post(reverse("federation:resource_edit", args=[resource.pk]), data)
    assert response.status_code == 302
    resource.refresh_from_db()
    assert resource.current_revision.number == 2 and resource.current_revision.placement == {"clusters": ["west"]}
    assert resource.name == "web"  # identity fields are disabled


def test_rollback_and_revision_diff(client, operator, resource):
    services.update_resource(resource, template=WEB_TEMPLATE, placement={"clusters": ["west"]})
    client.force_login(operator)
    diff = client.get(reverse("federation:revision_detail", args=[resource.pk, 2]))
    assert "/placement/clusters/0" in diff.content.decode()
    against = client.get(reverse("federation:revision_detail", args=[resource.pk, 1]), {"against": "2"}, **HX)
    assert against.status_code == 200 and b"Changes from revision 2" in against.content
    assert client.get(reverse("federation:revision_detail", args=[resource.pk, 1]), {"against": "x"}).status_code == 400
    response = client.post(reverse("federation:revision_rollback", args=[resource.pk, 1]))
    assert response.status_code == 302
    resource.refresh_from_db()
    assert resource.current_revision.number == 3 and resource.current_revision.placement == {"clusters": ["east"]}


def test_type_admin_can_enable_a_type_and_bad_input_is_an_error(client, admin_user):
    client.force_login(admin_user)
    FederatedType.objects.filter(kind="Job").delete()  # enabled by default since 0006_sched_kubefed_default_types
    ok = client.post(
        reverse("federation:type_create"),
        {
            "group": "batch",
            "version": "v1",
            "kind": "Job",
            "plural": "jobs",
            "scope": "Namespaced",
            "propagation": "Enabled",
            "status_collection": "Enabled",
        },
    )
    assert ok.status_code == 302 and FederatedType.objects.filter(kind="Job").exists()
    dup = client.post(
        reverse("federation:type_create"),
        {
            "group": "apps",
            "version": "v1",
            "kind": "Deployment",
            "plural": "deployments",
            "scope": "Namespaced",
            "propagation": "Enabled",
            "status_collection": "Enabled",
        },
    )
    assert dup.status_code == 400 and b"already exists" in dup.content


def test_propagate_and_progress_polling_through_the_detail_page(client, operator, fleet, settings):
    """Propagation itself starts from an approved change request (tests/approvals); here the
    resource page shows its progress while it runs and the outcome when it is done."""
    register_fleet(fleet, ["m128", "m130"])
    ns = federate_namespace("shop", ["m128", "m130"])
    drain(propagation.propagate_revision(ns))
    resource = web_deployment(placement={"clusters": ["m128", "m130"]})
    client.force_login(operator)
    propagation.propagate_revision(resource, actor=operator)
    polling = client.get(reverse("federation:resource_detail", args=[resource.pk]), **HX)
    assert b'hx-trigger="every 1s"' in polling.content and b"2 pending" in polling.content
    drain(resource.runs.first())
    done = client.get(reverse("federation:resource_detail", args=[resource.pk]), **HX).content.decode()
    assert 'hx-trigger="every 10s"' in done and "2 done" in done and 'data-condition="Propagated"' in done
    preview = client.get(reverse("federation:resource_preview", args=[resource.pk]))
    body = preview.content.decode()
    # both clusters unchanged: one group (issue 23 item 12), each cluster listed in it
    assert preview.status_code == 200 and "Same on 2 clusters" in body
    assert body.count('<li data-cluster="m128" data-action="unchanged">') == 1
    assert body.count('<li data-cluster="m130" data-action="unchanged">') == 1
    assert client.get(reverse("federation:resource_preview", args=[resource.pk]), {"revision": "0"}).status_code == 400
    assert client.get(reverse("federation:resource_preview", args=[resource.pk]), {"revision": "9"}).status_code == 404


def test_summary_panel_counts(client, viewer, resource, clusters, django_assert_max_num_queries):
    PropagatedVersion.objects.create(resource=resource, cluster=clusters[0], status="OK", sync_state="OutOfSync")
    PropagatedVersion.objects.create(resource=resource, cluster=clusters[1], status="FieldNotSupported")
    client.force_login(viewer)
    with django_assert_max_num_queries(8):
        body = client.get(reverse("federation:summary"), **HX).content.decode()
    assert "1 federated resource" in body and "OK 1" in body and "Failing 1" in body and "Out of sync 1" in body


def test_resource_page_offers_a_change_request_not_a_direct_propagate(client, operator, admin_user, resource):
    client.force_login(operator)
    page = client.get(reverse("federation:resource_detail", args=[resource.pk])).content.decode()
    assert reverse("approvals:change_create", args=[resource.pk]) in page
    assert reverse("approvals:emergency_apply", args=[resource.pk]) not in page
    client.force_login(admin_user)
    page = client.get(reverse("federation:resource_detail", args=[resource.pk])).content.decode()
    assert reverse("approvals:emergency_apply", args=[resource.pk]) in page


def test_resync_of_a_never_propagated_resource_is_refused(client, operator, resource, clusters):
    client.force_login(operator)
    response = client.post(reverse("federation:resource_resync", args=[resource.pk, clusters[0].pk]), follow=True)
    assert "never propagated" in response.content.decode()
    assert not resource.runs.exists()


def test_resource_page_has_a_scheduling_panel_that_explains_the_plan(client, viewer, clusters):
    federate_namespace("shop", [c.name for c in clusters])
    resource = web_deployment(
        scheduling={
            "totalReplicas": 10,
            "rebalance": True,
            "clusters": {clusters[0].name: {"weight": 1, "maxReplicas": 3}, "*": {"weight": 1}},
        }
    )
    client.force_login(viewer)
    page = client.get(reverse("federation:resource_detail", args=[resource.pk])).content.decode()
    assert 'id="scheduling"' in page and "<h2>Scheduling</h2>" in page
    assert (
        f'<tr data-plan-cluster="{clusters[0].name}"><td>{clusters[0].name}</td><td>1</td><td>0</td><td>3</td>' in page
    )
    assert "capped at maxReplicas 3" in page


def test_resource_page_says_why_nothing_is_placed(client, viewer, clusters):
    resource = web_deployment(namespace="lonely", placement={"clusters": [clusters[0].name]})
    client.force_login(viewer)
    page = client.get(reverse("federation:resource_detail", args=[resource.pk])).content.decode()
    assert "Namespace lonely is not federated (no FederatedNamespace lonely)" in page
    assert "Placed on: no cluster" in page


# Good and bad values of IsDNS1035Label and IsDNS1123Subdomain, from Kubernetes'
# apimachinery/pkg/util/validation/validation_test.go (TestIsDNS1035Label, TestIsDNS1123Subdomain;
# Apache-2.0): apiextensions applies the first to a CRD's plural and versions and, lowercased, to its
# kind; a group is the second (built-in groups such as "apps" have no dot, so no dot is required).
DNS1035_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "a" * 63]
DNS1035_BAD = [
    *("0", "01", "012", "1a", "1-a", "1--a--b--2", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a"),
    *("1-", "-1", "_", "a_", "_a", "a_b", "1_", "_1", "1_2", ".", "a.", ".a", "a.b", "1.", ".1", "1.2"),
    *(" ", "a ", " a", "a b", "1 ", " 1", "1 2", "a" * 64),
]
MIXED_CASE_DNS1035 = ["A", "ABC", "aBc", "A1", "A-1"]  # good once lowercased: a kind may be written so
DNS1123_SUBDOMAIN_GOOD = ["a", "0", "01", "1a", "1-a", "a.a", "ab.a", "a-1.a", "a.1", "0.a", "01.a", "1.2", "a" * 253]
DNS1123_SUBDOMAIN_BAD = [
    *("A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a", "a_b", "1_", "_1"),
    *(".", "a.", ".a", "a..b", "1.", ".1", "1..2", " ", "a ", " a", "a b", "A.a", "aB.a", "ab.A", "a" * 254),
]


def type_form(**values):
    return {
        "group": "example.com",
        "version": "v1",
        "kind": "Widget",
        "plural": "widgets",
        "scope": "Namespaced",
        "propagation": "Enabled",
        "status_collection": "Disabled",
        **values,
    }


TYPE_NAMES_ACCEPTED = [
    *(("plural", v) for v in DNS1035_GOOD),
    *(("version", v) for v in DNS1035_GOOD),
    *(("kind", v) for v in DNS1035_GOOD + MIXED_CASE_DNS1035),
    *(("group", v) for v in ["", *DNS1123_SUBDOMAIN_GOOD]),
]
TYPE_NAMES_REFUSED = [
    *(("plural", v) for v in DNS1035_BAD),
    *(("version", v) for v in DNS1035_BAD),
    *(("kind", v) for v in DNS1035_BAD if v not in MIXED_CASE_DNS1035),
    *(("group", v) for v in DNS1123_SUBDOMAIN_BAD),
]
# the form strips surrounding whitespace ("a " is saved as "a"), so there they are left out
TYPE_NAMES_REFUSED_BY_THE_FORM = [(field, v) for field, v in TYPE_NAMES_REFUSED if v.strip() == v]


@pytest.mark.parametrize(("field", "value"), TYPE_NAMES_REFUSED)
def test_the_type_name_validators_refuse_what_apiextensions_refuses(field, value):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        FederatedType(**{**type_form(), field: value}).clean_fields(
            exclude=["scope", "propagation", "status_collection"]
        )


@pytest.mark.parametrize(("field", "value"), TYPE_NAMES_ACCEPTED)
def test_a_type_is_saved_with_any_name_apiextensions_accepts(client, admin_user, field, value):
    client.force_login(admin_user)
    response = client.post(reverse("federation:type_create"), type_form(**{field: value}))
    assert response.status_code == 302, response.content.decode()[:2000]
    assert getattr(FederatedType.objects.get(kind=value if field == "kind" else "Widget"), field) == value


@pytest.mark.parametrize(("field", "value"), TYPE_NAMES_REFUSED_BY_THE_FORM)
def test_a_type_named_as_kubernetes_would_refuse_is_a_form_error_and_nothing_is_saved(client, admin_user, field, value):
    client.force_login(admin_user)
    before = FederatedType.objects.count()
    response = client.post(reverse("federation:type_create"), type_form(**{field: value}))
    assert response.status_code == 400, (field, value)
    errors = response.context["form"].errors[field]
    assert errors and all(escape(message) in response.content.decode() for message in errors)
    assert FederatedType.objects.count() == before


@pytest.mark.parametrize("group", ["types.kubefed.io", "core.kubefed.io", "kubefed.io"])
def test_kubefeds_own_api_groups_are_not_a_type_to_federate(client, admin_user, group):
    """A type in types.kubefed.io is KubeFed's wrapper (FederatedDeployment), not something to
    federate: the form names the group to use instead."""
    client.force_login(admin_user)
    before = FederatedType.objects.count()
    response = client.post(reverse("federation:type_create"), type_form(group=group))
    assert response.status_code == 400
    (error,) = response.context["form"].errors["group"]
    assert error.startswith(f"{group} is KubeFed's own API group") and "group apps for Deployment" in error
    assert FederatedType.objects.count() == before


def test_a_type_stored_in_a_kubefed_group_can_still_be_switched_off_and_fedctl_cannot_add_one(admin_user):
    from django.core.exceptions import ValidationError

    from federation import services

    legacy = FederatedType.objects.create(
        group="types.kubefed.io", version="v1beta1", kind="FederatedThing", plural="ft"
    )
    services.update_type(legacy, actor=admin_user, propagation="Disabled")
    assert FederatedType.objects.get(pk=legacy.pk).propagation == "Disabled"
    with pytest.raises(ValidationError, match="is KubeFed's own API group"):
        services.enable_type(kind="FederatedWidget", group="types.kubefed.io", version="v1beta1", actor=admin_user)


def test_a_forged_row_count_is_one_error_not_a_page_of_them(client, operator, clusters):
    client.force_login(operator)
    response = client.post(reverse("federation:resource_create"), form_data(**{"ov-TOTAL_FORMS": "5000"}))
    assert response.status_code == 400
    body = response.content.decode()
    assert "Please submit at most 200 forms." in body
    assert body.count('class="override-row"') <= 201  # it rendered 1,200 rows, each with its errors
    assert not FederatedResource.objects.exists()


def test_a_type_named_before_the_rules_can_still_be_switched_off_but_not_renamed_badly(admin_user):
    legacy = FederatedType.objects.create(group="example.com", version="v1", kind="Bad_Kind", plural="bad_kinds")
    services.update_type(legacy, actor=admin_user, propagation="Disabled")
    assert FederatedType.objects.get(pk=legacy.pk).propagation == "Disabled"
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="plural"):
        services.update_type(legacy, actor=admin_user, plural="Bad Plural")
