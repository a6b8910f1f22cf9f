"""Read-side queries for change-request pages, the badge and the command."""

import functools

from django.core.exceptions import ValidationError
from django.db import connections, router
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce

from federation.approvals.choices import ChangeState, Decision, RolloutState, WaveState
from federation.approvals.content import content_authors
from federation.approvals.filtersets import FILTER_KEYS, ChangeRequestFilterSet
from federation.approvals.models import Approval, ChangeRequest, RolloutWave
from federation.models import PropagationRun, PropagationTarget, Revision
from fedportal.masking import is_secret_kind, mask_secrets, secret_values
from fedportal.models import AuditEvent
from fedportal.roles import Role, has_role, holders_of


def base_queryset() -> QuerySet:
    return ChangeRequest.objects.select_related("resource__type", "proposed_revision", "author")


def filter_change_requests(*, approval_counts: bool = True, **filters) -> QuerySet:
    """Change requests filtered by federation.approvals.filtersets.ChangeRequestFilterSet's keys
    (``emergency`` as True / False / None), newest first. ``approval_counts=False`` leaves out the
    approval_count annotation (its GROUP BY makes SQLite sort every matching row before a LIMIT;
    the API counts a page's approvals separately)."""
    return with_approval_counts(run_filters(base_queryset(), filters), approval_counts=approval_counts)


def run_filters(queryset: QuerySet, filters: dict) -> QuerySet:
    """``queryset`` through ChangeRequestFilterSet; a value it refuses raises ValidationError naming
    the field (the API's 400)."""
    unknown = set(filters) - set(FILTER_KEYS)
    if unknown:
        raise ValueError(f"unknown change request filters: {', '.join(sorted(unknown))}")
    data = {key: value for key, value in filters.items() if value not in (None, "")}
    if not data:  # most requests: a FilterSet copies every filter and builds a form just to do nothing
        return queryset
    if "emergency" in data and isinstance(data["emergency"], bool):
        data["emergency"] = "yes" if data["emergency"] else "no"
    filterset = ChangeRequestFilterSet(data, queryset=queryset)
    if not filterset.is_valid():
        raise ValidationError({key: list(errors) for key, errors in filterset.errors.items()})
    return filterset.qs


def valid_approval_counts(ids: list[int]) -> dict[int, int]:
    """{change request id: approvals given for the content it proposes now, by approvers who still
    hold the role} for one page, read with one plain query: the ORM compiling it (a join for the F(),
    a GROUP BY) took 0.6 ms of CPU on every list request, running it 0.15 ms (PostgreSQL, bench_api)."""
    if not ids:
        return {}
    connection = connections[router.db_for_read(Approval)]
    quote = connection.ops.quote_name
    approvers_sql, approvers_params = _approvers_subquery(connection.alias)
    approval, change = Approval._meta, ChangeRequest._meta
    on = quote(approval.get_field("change_request").column)
    sql = (
        f"SELECT a.{on}, COUNT(*) FROM {quote(approval.db_table)} a "
        f"JOIN {quote(change.db_table)} c ON c.{quote(change.pk.column)} = a.{on} "
        f"WHERE a.{on} IN ({', '.join(['%s'] * len(ids))}) AND a.{quote(approval.get_field('decision').column)} = %s "
        f"AND a.{quote(approval.get_field('content_hash').column)} = c.{quote(change.get_field('proposed_hash').column)} "
        f"AND a.{quote(approval.get_field('approver').column)} IN ({approvers_sql}) "
        f"GROUP BY a.{on}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*ids, Decision.APPROVE.value, *approvers_params])
        return {int(change_id): count for change_id, count in cursor.fetchall()}


@functools.cache
def _approvers_subquery(alias: str) -> tuple[str, tuple]:
    """The ids of those who hold the approver role now (services.approval_summary's rule), as SQL
    compiled once per database: the same text on every request."""
    query = holders_of(Role.APPROVER).values("pk").query
    return query.get_compiler(connection=connections[alias]).as_sql()


def with_approval_counts(queryset: QuerySet, *, approval_counts: bool = True) -> QuerySet:
    """Newest first, with each request's valid approvals counted (``approval_count``)."""
    if not approval_counts:
        return queryset.order_by("-created_at", "-id")
    return queryset.annotate(
        # valid approvals only: given for the content the request proposes now, by someone who still
        # holds the approver role (services.approval_summary's rule)
        approval_count=Count(
            "approvals",
            filter=Q(
                approvals__decision=Decision.APPROVE,
                approvals__content_hash=F("proposed_hash"),
                approvals__approver__in=holders_of(Role.APPROVER).values("pk"),
            ),
        ),
    ).order_by("-created_at", "-id")


def inbox_for(user) -> QuerySet:
    """Submitted requests waiting for this approver: not their own, not proposing a revision they
    wrote (any after the clusters' one, up to the proposed one), not approved by them already (for
    the current content). A first cut: content.content_authors, which approve() enforces, also
    counts the revisions the proposed one came from and settings changes, so a request listed here
    may still refuse this approver's approval with the reason."""
    mine = Approval.objects.filter(change_request=OuterRef("pk"), approver=user, content_hash=OuterRef("proposed_hash"))
    wrote = Revision.objects.filter(
        Q(pk=OuterRef("proposed_revision_id"))
        | Q(
            number__lte=OuterRef("proposed_revision__number"),
            number__gt=Coalesce(OuterRef("resource__propagated_revision__number"), 0),
        ),
        resource_id=OuterRef("resource_id"),
        author=user,
    )
    return (
        base_queryset()
        .filter(state=ChangeState.SUBMITTED)
        .exclude(author=user)
        .annotate(decided_by_me=Exists(mine), wrote_by_me=Exists(wrote))
        .filter(decided_by_me=False, wrote_by_me=False)
        .order_by("submitted_at", "id")
    )


def waves_waiting_for(user, *, check_authors: bool = True) -> list[tuple[ChangeRequest, RolloutWave]]:
    """Staged rollouts waiting for a wave approval this approver may give (rollout.approve_wave's
    rules: not a change they wrote, a wave they have not approved yet), oldest request first. One
    query for the waves; ``check_authors`` then works out each request's content authors (a few
    queries a waiting rollout: the inbox page), which the badge, polled by every approver, leaves
    out as ``inbox_for`` does (approve_wave still refuses with the reason)."""
    # a revision this approver wrote after the one the request started from, up to the proposed one
    # (inbox_for's first cut; once a wave went out the propagated revision is the proposed one, so the
    # range starts at the request's base revision)
    wrote = Revision.objects.filter(
        resource_id=OuterRef("rollout__change_request__resource_id"),
        number__gt=Coalesce(OuterRef("rollout__change_request__base_revision__number"), 0),
        number__lte=OuterRef("rollout__change_request__proposed_revision__number"),
        author=user,
    )
    waves = (
        RolloutWave.objects.filter(rollout__state=RolloutState.WAITING_APPROVAL)
        .exclude(state=WaveState.PASSED)
        .exclude(rollout__change_request__author=user)
        .exclude(rollout__change_request__proposed_revision__author=user)
        .exclude(Exists(wrote))
        .select_related("rollout__change_request__resource__type", "rollout__change_request__proposed_revision")
        .order_by("rollout__change_request_id", "index")
    )
    waiting, seen = [], set()
    for wave in waves:
        cr = wave.rollout.change_request
        if cr.pk in seen:
            continue  # a rollout waits on its first wave not passed
        seen.add(cr.pk)
        if any(a.get("user_id") == user.pk for a in wave.approvals):
            continue
        if check_authors and user.pk in content_authors(cr):
            continue
        waiting.append((cr, wave))
    return waiting


def badge_count(user) -> int:
    """What the navigation badge shows: approvers see their inbox (requests and waves waiting for
    them), operators their open drafts."""
    if has_role(user, Role.APPROVER):
        return inbox_for(user).count() + len(waves_waiting_for(user, check_authors=False))
    if has_role(user, Role.OPERATOR):
        return ChangeRequest.objects.filter(author=user, state=ChangeState.DRAFT).count()
    return 0


def state_counts() -> dict[str, int]:
    return dict(ChangeRequest.objects.values_list("state").annotate(n=Count("id")))


def audit_trail(cr: ChangeRequest, *, limit: int = 200) -> list[AuditEvent]:
    """The audit events about this request, and about its resource since it was drafted."""
    own = Q(object_type=cr._meta.label_lower, object_id=str(cr.pk))
    qs = AuditEvent.objects.filter(own)
    if cr.resource_id:
        qs = AuditEvent.objects.filter(
            own
            | Q(
                object_type="federation.federatedresource", object_id=str(cr.resource_id), created_at__gte=cr.created_at
            )
        )
    return list(qs.order_by("id")[:limit])


def authors() -> list[str]:
    return list(ChangeRequest.objects.order_by().values_list("author_name", flat=True).distinct()[:200])


def masked_content(cr: ChangeRequest) -> dict:
    """The preflight results, per-cluster diffs, outcome and apply error of ``cr`` as the page, the
    command and the API show them: for a Secret, its values masked and scrubbed out of messages (an
    API server's error may quote a value)."""
    content = {
        "preflight": list(cr.preflight or []),
        "diffs": list(cr.diffs or []),
        "outcome": list(cr.outcome or []),
        "apply_error": cr.apply_error,
    }
    if cr.resource_id is None or not is_secret_kind(cr.resource.type.kind):
        return content
    revisions = [revision.snapshot for revision in (cr.proposed_revision, cr.base_revision) if revision is not None]
    return mask_secrets(content, secret=True, known=secret_values(revisions, secret=True))


def as_dict(cr: ChangeRequest) -> dict:
    """A change request as plain data (the command's and fedctl's JSON output)."""
    return {
        "id": cr.pk,
        "title": cr.title,
        "kind": cr.kind,
        "state": cr.state,
        "emergency": cr.emergency,
        "subject": cr.subject,
        "author": cr.author_name,
        "proposed_revision": cr.proposed_revision.number if cr.proposed_revision_id and cr.proposed_revision else None,
        "targets": list(cr.target_clusters or []),
        "approvals": getattr(cr, "approval_count", None),
        "required_approvals": cr.required_approvals,
        "outcome": masked_content(cr)["outcome"],
        "created_at": cr.created_at.isoformat(),
        "updated_at": cr.updated_at.isoformat(),
    }


def outcome_rows(runs) -> list[dict]:
    """Each cluster's target of the given runs, as a change request's outcome records it (rows of
    values, not model instances: a finished rollout of a large fleet reads thousands of targets)."""
    run_ids = [run.pk for run in runs]
    resources = {
        run.pk: str(run.resource)
        for run in PropagationRun.objects.select_related("resource__type").filter(pk__in=run_ids)
    }
    fields = ("cluster__name", "run_id", "action", "state", "reason", "message", "changed")
    return [
        {
            "cluster": cluster,
            "resource": resources[run_id],
            "run": run_id,
            "action": action,
            "state": state,
            "reason": reason,
            "message": message,
            "changed": changed,
        }
        for cluster, run_id, action, state, reason, message, changed in PropagationTarget.objects.filter(
            run_id__in=run_ids
        )
        .order_by("cluster__name", "run_id")
        .values_list(*fields)
    ]
