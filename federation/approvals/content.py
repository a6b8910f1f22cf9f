"""What a change request asks approvers to agree to, and who wrote it (the four-eyes rule).

    approved_content_hash(kind, resource, revision, cluster) -> str
    content_authors(cr) -> dict[int, str]      user id -> what they wrote ("revision 4", ...)
    content_review(cr) -> (authors, settings)  the request page's authors and settings under review

The hash covers everything that decides what applying the request does: the proposed revision
(template, placement, overrides, scheduling), the resource's retention and drift policy, and the
rollout strategy it would go through (the request's own, else its resource's); for a
delete, the retention; for an unjoin, the retention of every resource still on the cluster.
Approvals are given for a hash; when it changes they no longer count.

An approval counts only from someone who wrote none of that content: not the request's author,
not the author of any revision after the one the clusters last received up to the proposed one, nor
of any revision the proposed one came from (its parents, and revisions of the same content, as a
rollback copies one) back to content others approved, and not whoever changed the retention, drift
policy or rollout strategy since a request whose content held that change was approved by others.
"""

from __future__ import annotations

from datetime import datetime

from federation.approvals.choices import ChangeKind, ChangeState
from federation.approvals.kinds import handler_for
from federation.approvals.models import ChangeRequest
from federation.models import (
    PropagatedVersion,
    Revision,
    SettingsChange,
)
from federation.rendering import content_hash

STAGED_KINDS = (ChangeKind.CREATE, ChangeKind.EDIT, ChangeKind.ROLLBACK)  # the kinds a rollout strategy stages
# the states of a request its approvers approved
_DECIDED = (
    ChangeState.APPROVED,
    ChangeState.APPLYING,
    ChangeState.APPLIED,
    ChangeState.PARTIALLY_FAILED,
    ChangeState.FAILED,
    ChangeState.ROLLED_BACK,
)


def resource_settings(resource) -> dict:
    return {"retention": resource.retention, "drift_policy": resource.drift_policy}


def _present_on(cluster) -> list[PropagatedVersion]:
    return [
        pv
        for pv in PropagatedVersion.objects.filter(cluster=cluster).select_related("resource").order_by("resource_id")
        if pv.is_present
    ]


def approved_content_hash(kind: str, resource, revision, cluster, *, strategy_override=None) -> str:
    """``strategy_override``: the request's own rollout strategy (None: its resource's applies)."""
    if kind == ChangeKind.UNJOIN:
        retention = {str(pv.resource_id): pv.resource.retention for pv in _present_on(cluster)} if cluster else {}
        return content_hash({"unjoin": cluster.pk if cluster else None, "retention": retention})
    if kind == ChangeKind.DELETE:
        return content_hash(
            {"delete": resource.pk if resource else None, "retention": resource.retention if resource else None}
        )
    if revision is None:
        return ""
    content = {"revision": revision.content_hash, **resource_settings(resource)}
    # the waves and gates the change goes through, for the kinds a strategy stages (a request
    # without any hashes as it always has)
    strategy = strategy_override if strategy_override is not None else (resource.rollout_strategy or {})
    if strategy and kind in STAGED_KINDS:
        content["rollout_strategy"] = strategy
    return content_hash(content)


def request_content_hash(cr) -> str:
    handler = handler_for(cr.kind)
    if handler is not None:
        return handler.content_hash(cr)
    return approved_content_hash(
        cr.kind, cr.resource, cr.proposed_revision, cr.cluster, strategy_override=cr.rollout_strategy
    )


def _revision_authors(cr) -> dict[int, str]:
    """Who wrote the proposed content: the authors of every revision after the clusters' one up to
    the proposed one, and of every revision the proposed one came from (its parents: the previous
    revision of an edit, the restored one of a rollback) back to content that others approved. A
    revision's number says nothing of where its content came from: a rollback copies an older
    revision, a request may propose an older one, and once a rollout's first wave has gone out the
    clusters' revision is the proposed one itself.

    A reconcile request re-applies the propagated revision to clusters that joined its placement:
    when approvers approved that content, its authors may approve where it goes next; when it went
    out without them (an emergency apply), they wrote what the reconcile would spread, as for an edit."""
    if cr.kind not in (*STAGED_KINDS, ChangeKind.RECONCILE) or cr.proposed_revision is None:
        return {}
    proposed = cr.proposed_revision
    approved = _approved_contents(proposed.resource_id, besides=cr.pk)
    if cr.kind == ChangeKind.RECONCILE and proposed.content_hash in approved:
        return {}
    rows = {
        pk: (number, parent_id, author_id, content)
        for pk, number, parent_id, author_id, content in Revision.objects.filter(
            resource_id=proposed.resource_id
        ).values_list("pk", "number", "parent_id", "author_id", "content_hash")
    }
    by_content: dict[str, list[int]] = {}
    for pk, row in rows.items():
        by_content.setdefault(row[3], []).append(pk)
    # the proposed revision, and every revision after the clusters' one up to it
    baseline = cr.resource.propagated_revision if cr.resource is not None else None
    after = baseline.number if baseline is not None and baseline.number < proposed.number else proposed.number
    wrote = {pk for pk, row in rows.items() if after < row[0] <= proposed.number} | {proposed.pk}
    # ... and where their content came from, back to content that others approved
    todo = [pk for seed in wrote for pk in (rows[seed][1], *by_content[rows[seed][3]])]
    while todo:
        pk = todo.pop()
        if pk not in rows or pk in wrote or rows[pk][3] in approved:
            continue
        wrote.add(pk)
        todo += [rows[pk][1], *by_content[rows[pk][3]]]
    authors: dict[int, str] = {}
    for pk in sorted(wrote, key=lambda pk: rows[pk][0]):
        if rows[pk][2] is not None:
            authors.setdefault(rows[pk][2], f"revision {rows[pk][0]}")
    return authors


def _approved_by_others(resource_ids, *, kinds, besides):
    """The requests of ``resource_ids`` that approvers approved, but ``besides`` (the request
    asking): not an emergency apply or a rollout's rollback, which were decided without approvers."""
    return ChangeRequest.objects.filter(
        resource_id__in=resource_ids,
        kind__in=list(kinds),
        state__in=_DECIDED,
        emergency=False,
        required_approvals__gt=0,
        decided_at__isnull=False,
    ).exclude(pk=besides)


def _approved_contents(resource_id, *, besides) -> set[str]:
    """The content hashes of the revisions of ``resource_id`` that other requests proposed and
    approvers approved."""
    approved = _approved_by_others([resource_id], kinds=STAGED_KINDS, besides=besides)
    return set(approved.exclude(proposed_revision=None).values_list("proposed_revision__content_hash", flat=True))


# The settings each kind of request's approved content covers (approved_content_hash): its
# resource's retention and drift policy, and the rollout strategy when the request goes through it.
_SETTINGS_IN_CONTENT = {kind: ("retention", "drift_policy") for kind in STAGED_KINDS}
_SETTINGS_IN_CONTENT[ChangeKind.DELETE] = ("retention",)


def _settings_reviewed_at(resource_ids, *, besides) -> dict[int, dict[str, datetime]]:
    """For each resource, when each of its settings was last part of another request's content that
    approvers approved (``besides``: the request asking)."""
    decided = _approved_by_others(resource_ids, kinds=_SETTINGS_IN_CONTENT, besides=besides).values_list(
        "resource_id", "kind", "rollout_strategy", "decided_at"
    )
    reviewed: dict[int, dict[str, datetime]] = {}
    for resource_id, kind, own_strategy, decided_at in decided:
        names = _SETTINGS_IN_CONTENT[kind]
        if kind in STAGED_KINDS and own_strategy is None:  # it went through the resource's strategy
            names = (*names, "rollout_strategy")
        latest = reviewed.setdefault(resource_id, {})
        for name in names:
            latest[name] = max(latest.get(name, decided_at), decided_at)
    return reviewed


def _settings_authors(cr, resource_ids, *, strategy: bool = True, reviewed=None) -> dict[int, str]:
    """Who changed retention, drift policy or rollout strategy since a request whose content held
    that change was approved by others. A run is no such proof: a rollout approved before the change
    starts its later waves after it, and an emergency apply has no approvers."""
    changes = (
        SettingsChange.objects.filter(resource_id__in=resource_ids)
        .exclude(author=None)
        .order_by("created_at", "id")
        .values_list("resource_id", "author_id", "before", "after", "created_at")
    )
    if reviewed is None:
        reviewed = _settings_reviewed_at(resource_ids, besides=cr.pk)
    authors: dict[int, str] = {}
    for resource_id, author_id, before, after, created_at in changes:
        after, before = after or {}, before or {}
        changed = {name for name in after if before.get(name) != after[name]} or set(after)
        if not strategy:  # the request does not go through the resource's strategy
            changed.discard("rollout_strategy")
        seen = reviewed.get(resource_id, {})
        if not changed or all(name in seen and seen[name] > created_at for name in changed):
            continue
        what = "the rollout strategy change" if "rollout_strategy" in after else "the retention/drift policy change"
        authors.setdefault(author_id, what)
    return authors


SETTING_LABELS = {"retention": "Retention", "drift_policy": "Drift policy", "rollout_strategy": "Rollout strategy"}


def settings_under_review(cr, *, reviewed=None) -> list[dict]:
    """The settings of ``cr``'s resource that an approval of ``cr`` covers (``approved_content_hash``)
    and that changed since approvers last approved a request holding them: for each, what it was
    then, what it is now, who changed it and when (the request's page shows them beside the diff:
    a drift policy switched to Enforce made FedPortal write to clusters once approved, and the
    approver saw "No change"). A setting never changed since, or never changed at all, is left out."""
    if cr.resource_id is None or cr.kind not in _SETTINGS_IN_CONTENT:
        return []
    names = list(_SETTINGS_IN_CONTENT[cr.kind])
    if cr.kind in STAGED_KINDS and cr.rollout_strategy is None:
        names.append("rollout_strategy")
    if reviewed is None:
        reviewed = _settings_reviewed_at([cr.resource_id], besides=cr.pk)
    seen = reviewed.get(cr.resource_id, {})
    changes = SettingsChange.objects.filter(resource_id=cr.resource_id).order_by("created_at", "id")
    found: dict[str, dict] = {}
    for change in changes.select_related("author"):
        before, after = change.before or {}, change.after or {}
        for name in names:
            if name not in after or before.get(name) == after[name]:
                continue
            if name in seen and seen[name] > change.created_at:
                continue  # approved by others since
            row = found.setdefault(name, {"name": name, "label": SETTING_LABELS[name], "before": before.get(name)})
            row.update(
                after=after[name],
                by=change.author.get_username() if change.author else "system",
                at=change.created_at,
            )
    rows = [found[name] for name in names if name in found and found[name]["before"] != found[name]["after"]]
    for row in rows:
        row["before_text"], row["after_text"] = (setting_text(row["name"], row[k]) for k in ("before", "after"))
    return rows


def setting_text(name: str, value) -> str:
    """A setting's value in words (a rollout strategy by its waves)."""
    if name != "rollout_strategy":
        return str(value) if value not in (None, "") else "(not set)"
    waves = [w.get("name", "?") for w in (value or {}).get("waves") or [] if isinstance(w, dict)]
    if not waves:
        return "no waves: every placed cluster at once, no health gates or automatic rollback"
    extra = ", automatic rollback" if (value or {}).get("autoRollback") else ""
    return f"{len(waves)} wave(s): {', '.join(waves)}{extra}"


def _content_resource_ids(cr) -> list[int]:
    if cr.kind == ChangeKind.UNJOIN:
        return [pv.resource_id for pv in _present_on(cr.cluster)] if cr.cluster_id else []
    return [cr.resource_id] if cr.resource_id else []


def content_authors(cr, *, reviewed=None) -> dict[int, str]:
    """Everyone whose approval of ``cr`` does not count, with what they wrote. ``reviewed``: the
    settings' review times when the caller has read them already (``content_review``)."""
    authors: dict[int, str] = {}
    if cr.author_id is not None:
        authors[cr.author_id] = "this request"
    for author_id, what in _revision_authors(cr).items():
        authors.setdefault(author_id, what)
    staged = cr.kind in STAGED_KINDS and cr.rollout_strategy is None
    for author_id, what in _settings_authors(cr, _content_resource_ids(cr), strategy=staged, reviewed=reviewed).items():
        authors.setdefault(author_id, what)
    return authors


def content_review(cr) -> tuple[dict[int, str], list[dict]]:
    """What a request's page shows of its content's authors and settings (``content_authors`` and,
    while the request is open, ``settings_under_review``), reading the settings' history once."""
    if cr.resource_id is None or cr.kind not in _SETTINGS_IN_CONTENT:  # an unjoin: no settings shown
        return content_authors(cr), []
    reviewed = _settings_reviewed_at([cr.resource_id], besides=cr.pk)
    authors = content_authors(cr, reviewed=reviewed)
    return authors, settings_under_review(cr, reviewed=reviewed) if cr.is_open else []
