"""The roles of an API token's user are read on every request: a role taken away answers 403 on the
very next request, and the token's user holds exactly the roles the pages give them."""

import pytest
from django.contrib.auth.models import Group

from clusters.models import Cluster
from fedportal.roles import Role

pytestmark = pytest.mark.django_db


def test_a_role_taken_away_is_refused_on_the_next_request(api_as, make_user):
    user = make_user("olga-operator", Role.OPERATOR)
    api = api_as(user)
    assert api.get("/api/v1/clusters").status_code == 200
    user.groups.clear()
    response = api.get("/api/v1/clusters")
    assert response.status_code == 403, response.content
    user.groups.add(Group.objects.get(name=Role.VIEWER))
    assert api.get("/api/v1/clusters").status_code == 200


def test_the_roles_read_with_the_token_are_the_ones_the_pages_use(api_as, make_user, django_user_model):
    """Admin implies every role, a group outside the roles gives none, a superuser holds all."""
    admin = make_user("ada-admin", Role.ADMIN)
    outsider = django_user_model.objects.create_user("oscar-outsider", password="pw-123456789")
    outsider.groups.add(Group.objects.get_or_create(name="not-a-role")[0])
    superuser = django_user_model.objects.create_superuser("sue-super", password="pw-123456789")
    assert api_as(admin).get("/api/v1/clusters").status_code == 200
    assert api_as(outsider).get("/api/v1/clusters").status_code == 403
    assert api_as(superuser).get("/api/v1/clusters").status_code == 200
    # an approver may read but not relabel a cluster; an admin may (roles from the token's query)
    cluster = Cluster.objects.create(name="c2", api_server="https://c2.example:6443")
    approver = make_user("april-approver", Role.APPROVER)
    body = {"labels": {"env": "prod"}, "verify": False}
    assert api_as(approver).patch(f"/api/v1/clusters/{cluster.pk}", body).status_code == 403
    assert api_as(admin).patch(f"/api/v1/clusters/{cluster.pk}", body).status_code == 200
    cluster.refresh_from_db()
    assert cluster.labels == {"env": "prod"}
