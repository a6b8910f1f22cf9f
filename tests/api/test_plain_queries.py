"""The API's two hand-written queries (api.tokens._token_with_user, selectors.valid_approval_counts)
give what the ORM queries they replaced give: the same rows, the same values, the same types."""

from datetime import timedelta

import pytest
from django.utils import timezone

from api.models import ApiToken
from api.tokens import authenticate, create_token
from federation.approvals import selectors
from federation.approvals.choices import Decision
from federation.approvals.models import Approval, ChangeRequest
from fedportal.roles import Role, holders_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def configmap():
    from federation import services
    from federation.models import FederatedType

    return services.create_resource(
        FederatedType.objects.get(kind="ConfigMap"),
        namespace="default",
        name="settings",
        template={"data": {"a": "1"}},
        placement={"clusters": []},
    )


@pytest.fixture
def operator_api(api_as, operator):
    return api_as(operator)


def _field_values(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


def test_a_token_and_its_user_are_read_as_the_orm_reads_them(operator):
    operator.last_login = timezone.now() - timedelta(days=1)
    operator.save()
    secret = create_token(operator, actor=operator, name="ci", expires_in=timedelta(days=3)).secret
    token = authenticate(secret)
    orm = ApiToken.objects.select_related("user").get(pk=token.pk)
    # last_used_at is written by authenticate itself; the rest is as stored
    assert {**_field_values(token), "last_used_at": None} == {**_field_values(orm), "last_used_at": None}
    assert _field_values(token.user) == _field_values(orm.user)
    for ours, theirs in ((token, orm), (token.user, orm.user)):
        assert {k: type(v) for k, v in _field_values(ours).items()} == {
            k: type(v) for k, v in _field_values(theirs).items()
        }
    assert token.user.is_active is True and token.read_only is False
    assert token.expires_at.tzinfo is not None and token.user.last_login.tzinfo is not None
    assert not token._state.adding and token.user.pk == operator.pk


def test_an_unknown_revoked_or_expired_token_is_none(operator):
    assert authenticate("fpt_" + "x" * 40) is None
    secret = create_token(operator, actor=operator, name="ci").secret
    ApiToken.objects.update(revoked_at=timezone.now())
    assert authenticate(secret) is None
    ApiToken.objects.update(revoked_at=None, expires_at=timezone.now() - timedelta(seconds=1))
    assert authenticate(secret) is None


def _orm_counts(ids) -> dict[int, int]:
    """The ORM query valid_approval_counts replaced (the oracle)."""
    from django.db.models import Count, F

    return dict(
        Approval.objects.filter(
            change_request_id__in=ids,
            decision=Decision.APPROVE,
            content_hash=F("change_request__proposed_hash"),
            approver__in=holders_of(Role.APPROVER),
        )
        .values_list("change_request_id")
        .annotate(n=Count("pk"))
        .order_by()
    )


def test_approval_counts_count_approvals_of_the_content_proposed_now(configmap, operator, approver, make_user):
    second = make_user("approver-2", Role.APPROVER)
    current, stale, rejected, none, left = (
        ChangeRequest.objects.create(resource=configmap, author=operator, title=f"cr {i}", proposed_hash=h)
        for i, h in enumerate(["a" * 64, "b" * 64, "c" * 64, "d" * 64, "e" * 64])
    )

    def decide(cr, user, decision, content_hash):
        Approval.objects.create(
            change_request=cr,
            approver=user,
            approver_name=user.username,
            decision=decision,
            content_hash=content_hash,
        )

    decide(current, approver, Decision.APPROVE, "a" * 64)
    decide(current, second, Decision.APPROVE, "a" * 64)
    decide(stale, approver, Decision.APPROVE, "0" * 64)  # approved what it proposed before an edit
    decide(stale, second, Decision.APPROVE, "b" * 64)
    decide(rejected, approver, Decision.REJECT, "c" * 64)
    # approvals by those who left the role (group removed, deactivated) do not count, an admin's and a
    # superuser's do, as on the request's own page (services.approval_summary)
    removed, inactive = make_user("approver-removed", Role.APPROVER), make_user("approver-inactive", Role.APPROVER)
    admin, root = make_user("an-admin", Role.ADMIN), make_user("root")
    root.is_superuser = True
    root.save()
    for user in (removed, inactive, admin, root):
        decide(left, user, Decision.APPROVE, "e" * 64)
    removed.groups.clear()
    inactive.is_active = False
    inactive.save()
    ids = [current.pk, stale.pk, rejected.pk, none.pk, left.pk]
    assert selectors.valid_approval_counts(ids) == _orm_counts(ids) == {current.pk: 2, stale.pk: 1, left.pk: 2}
    counted = {cr.pk: cr.approval_count for cr in selectors.with_approval_counts(ChangeRequest.objects.all())}
    assert counted == {current.pk: 2, stale.pk: 1, rejected.pk: 0, none.pk: 0, left.pk: 2}
    assert selectors.valid_approval_counts([]) == {}
    assert selectors.valid_approval_counts([none.pk]) == {}


def test_the_change_request_list_shows_the_valid_approvals(operator_api, configmap, operator, approver):
    cr = ChangeRequest.objects.create(resource=configmap, author=operator, title="cr", proposed_hash="a" * 64)
    Approval.objects.create(
        change_request=cr, approver=approver, approver_name="x", decision=Decision.APPROVE, content_hash="a" * 64
    )
    items = operator_api.get("/api/v1/change-requests").json()["items"]
    assert [(item["id"], item["approvals"]) for item in items] == [(cr.pk, 1)]
