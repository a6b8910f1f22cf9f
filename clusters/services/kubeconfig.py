"""Importing clusters from a kubeconfig's contexts, each with its own credentials."""

from __future__ import annotations

import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from clusters import crypto, enqueue, probing
from clusters.choices import ClusterRole
from clusters.kubeconfig import KubeconfigContext, KubeconfigError, parse_kubeconfig
from clusters.models import Cluster
from clusters.services.connections import (
    Registered,
    apply_version,
    check_address,
    check_tls,
    check_tls_choice,
    check_transport,
    connection_for,
    credentials_for,
    snapshot,
    test_connection,
    validate_cluster,
)
from clusters.services.registry import save_new_clusters
from clusters.validators import normalize_api_server, validate_labels
from fedportal.audit import record_event
from fedportal.roles import Role, require_actor_role


def cluster_name_for_context(context_name: str) -> str:
    """A DNS-1123 label from a kubeconfig context name ("arn:aws:eks:...:cluster/prod" -> "prod")."""
    base = context_name.rsplit("/", 1)[-1] if "/" in context_name else context_name
    name = re.sub(r"[^a-z0-9-]+", "-", base.lower()).strip("-")
    return name[:63].strip("-") or "cluster"


def compile_label_pattern(pattern: str) -> re.Pattern | None:
    """A regular expression whose named groups become labels, matched against each context name
    (e.g. ``(?P<region>[a-z]+-[a-z]+-[0-9])-(?P<env>prod|staging)``); ValidationError if it has no
    named group or does not compile."""
    if not (pattern or "").strip():
        return None
    try:
        compiled = re.compile(pattern.strip())
    except re.error as exc:
        raise ValidationError(f"The label pattern is not a regular expression: {exc}.", code="bad_pattern") from None
    if not compiled.groupindex:
        raise ValidationError(
            "The label pattern needs named groups, e.g. (?P<env>prod|dev): each becomes a label.", code="bad_pattern"
        )
    return compiled


def labels_from_context(pattern: re.Pattern | None, context_name: str) -> dict[str, str]:
    """The named groups the pattern matched in the context name (searched, not anchored), empty ones left out."""
    match = pattern.search(context_name) if pattern else None
    return {key: value for key, value in match.groupdict().items() if value} if match else {}


CONNECTION_TESTS_AT_ONCE = 16


@dataclass
class ImportReport:
    """What an import did: clusters registered, updated (on request), already up to date, and the
    contexts skipped because their cluster is already registered (with why)."""

    created: list = field(default_factory=list)
    updated: list = field(default_factory=list)
    unchanged: list = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def clusters(self) -> list[Cluster]:
        return [*self.created, *self.updated, *self.unchanged]


@dataclass(frozen=True)
class ImportPlan:
    context: KubeconfigContext
    name: str
    role: str


def default_contexts(contexts: list[KubeconfigContext]) -> list[str]:
    """The first usable context of each API server (a kubeconfig often holds several users for
    one cluster, e.g. admin and read-only)."""
    chosen, servers = [], set()
    for context in contexts:
        server = normalize_api_server(context.server)
        if context.usable and server not in servers:
            servers.add(server)
            chosen.append(context.name)
    return chosen


def plan_kubeconfig_import(
    text: str,
    *,
    contexts: list[str] | None = None,
    host_context: str | None = None,
    base_dir=None,
    parsed: list[KubeconfigContext] | None = None,
) -> list[ImportPlan]:
    """Parse (unless the caller gives ``parsed``, the contexts it already read from ``text``) and
    select contexts; ValidationError for a malformed file or an unknown context."""
    if parsed is None:
        try:
            parsed = parse_kubeconfig(
                text, base_dir=base_dir, allow_link_local=settings.FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS
            )
        except KubeconfigError as exc:
            raise ValidationError(exc.message, code="bad_kubeconfig") from None
    by_name = {c.name: c for c in parsed}
    wanted = list(contexts) if contexts else default_contexts(parsed)
    if not wanted:
        problems = "; ".join(f"{c.name}: {c.problem}" for c in parsed if c.problem)
        raise ValidationError(f"The kubeconfig has no usable context ({problems}).", code="unusable_context")
    unknown = [name for name in wanted if name not in by_name]
    if unknown:
        raise ValidationError(
            f"Unknown context(s): {', '.join(unknown)}. The kubeconfig has: {', '.join(by_name)}.",
            code="unknown_context",
        )
    if host_context and host_context not in wanted:
        raise ValidationError(
            f"The host context {host_context!r} is not among the chosen contexts.", code="unknown_context"
        )
    plans = []
    for name in dict.fromkeys(wanted):
        context = by_name[name]
        if context.problem:
            raise ValidationError(f"Context {name!r} cannot be registered: {context.problem}.", code="unusable_context")
        role = ClusterRole.HOST if name == host_context else ClusterRole.MEMBER
        plans.append(ImportPlan(context, cluster_name_for_context(name), role))
    servers = Counter(normalize_api_server(plan.context.server) for plan in plans)
    shared = [server for server, count in servers.items() if count > 1]
    if shared:
        raise ValidationError(
            f"Two chosen contexts point at the same API server ({shared[0]}); choose one of them.",
            code="duplicate_server",
        )
    names = Counter(plan.name for plan in plans)
    clashes = [n for n, count in names.items() if count > 1]
    if clashes:
        raise ValidationError(f"Two chosen contexts would both be named {clashes[0]!r}.", code="duplicate_name")
    return plans


def import_kubeconfig_contexts(
    text: str,
    *,
    contexts: list[str] | None = None,
    labels: dict | None = None,
    host_context: str | None = None,
    actor=None,
    verify: bool = True,
    base_dir=None,
    update_existing: bool = False,
) -> list[Cluster]:
    """The clusters of ``import_kubeconfig`` (without skipping existing ones)."""
    return import_kubeconfig(
        text,
        contexts=contexts,
        labels=labels,
        host_context=host_context,
        actor=actor,
        verify=verify,
        base_dir=base_dir,
        update_existing=update_existing,
    ).clusters


def import_kubeconfig(
    text: str,
    *,
    contexts: list[str] | None = None,
    labels: dict | None = None,
    label_pattern: str = "",
    host_context: str | None = None,
    actor=None,
    verify: bool = True,
    base_dir=None,
    update_existing: bool = False,
    skip_existing: bool = False,
    parsed: list[KubeconfigContext] | None = None,
) -> ImportReport:
    """Register the chosen contexts (one per API server by default), each with its own credentials.
    All or nothing: every context is validated and tested before any is saved.

    ``labels`` go on every imported cluster; ``label_pattern``'s named groups, matched against each
    context name, add labels per context. ``skip_existing``: a context whose cluster name or API
    server is already registered is skipped and reported instead of failing the whole import.

    ``update_existing``: a context whose cluster name is already registered updates that cluster's
    API server, TLS settings and credentials (audited, credential_version bumped) instead of failing
    as a duplicate; its role is kept, and ``labels`` given here are merged into its own. ``make demo``
    uses this on restart."""
    require_actor_role(actor, Role.ADMIN)
    if labels:
        validate_labels(labels)
    pattern = compile_label_pattern(label_pattern)
    plans = plan_kubeconfig_import(text, contexts=contexts, host_context=host_context, base_dir=base_dir, parsed=parsed)
    report = ImportReport()
    if skip_existing:
        by_name = set(Cluster.objects.filter(name__in=[p.name for p in plans]).values_list("name", flat=True))
        by_server = {
            normalize_api_server(server): name for server, name in Cluster.objects.values_list("api_server", "name")
        }
        kept = []
        for plan in plans:
            server = normalize_api_server(plan.context.server)
            if plan.name in by_name:
                report.skipped.append((plan.context.name, f"a cluster named {plan.name} is already registered"))
            elif server in by_server:
                report.skipped.append(
                    (plan.context.name, f"its API server is already registered as {by_server[server]}")
                )
            else:
                kept.append(plan)
        plans = kept
    existing = {c.name: c for c in Cluster.objects.filter(name__in=[p.name for p in plans])} if update_existing else {}
    errors = []
    pending: list[Cluster] = []
    registered = Registered.read()
    for plan in plans:
        context = plan.context
        ca = (context.ca_data or "").strip()
        current = existing.get(plan.name)
        derived = labels_from_context(pattern, context.name)
        try:
            validate_labels(derived)
        except ValidationError as exc:
            errors += [f"{context.name}: labels from the pattern: {m}" for m in exc.messages]
            continue
        context_labels = {**(labels or {}), **derived}
        cluster = Cluster(
            pk=current.pk if current else None,
            name=plan.name,
            api_server=normalize_api_server(context.server),
            role=current.role if current else plan.role,
            labels={**current.labels, **context_labels} if current else context_labels,
            ca_bundle=ca + "\n" if ca else "",
            insecure_skip_tls_verify=context.insecure_skip_tls_verify,
            credential_version=current.credential_version + 1 if current else 1,
        )
        try:
            validate_cluster(cluster, exclude_pk=cluster.pk, registered=registered)
            check_address(cluster.api_server)
            check_tls(cluster.api_server, ca, cluster.insecure_skip_tls_verify)
            check_tls_choice(ca, cluster.insecure_skip_tls_verify)
            cluster.auth_method, credentials = credentials_for(
                context.token, context.client_certificate, context.client_key
            )
            check_transport(cluster.api_server, credentials)
            cluster.set_credentials(credentials)
        except ValidationError as exc:
            errors += [f"{context.name}: {m}" for m in exc.messages]
            continue
        pending.append(cluster)
    # Test every connection (outside any transaction: no lock is held while we wait on the network),
    # several at a time: a 200-context import must not wait for 200 round trips one after another.
    if verify and not errors and pending:
        with ThreadPoolExecutor(max_workers=min(CONNECTION_TESTS_AT_ONCE, len(pending))) as pool:
            results = list(pool.map(lambda cluster: test_connection(connection_for(cluster)), pending))
        for cluster, result in zip(pending, results, strict=True):
            if result.ok:
                apply_version(cluster, result.version)
            else:
                errors.append(f"{cluster.name}: cannot connect ({result.error_label}): {result.message}")
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        for cluster in pending:
            if cluster.pk is None:
                report.created.append(cluster)
            else:
                before = existing[cluster.name].credential_version
                updated = _update_from_kubeconfig(existing[cluster.name], cluster, actor=actor)
                (report.updated if updated.credential_version != before else report.unchanged).append(updated)
        save_new_clusters(report.created, actor=actor)
        # the new clusters' first probes, in chunks (a 200-context import queues a few messages, not 200)
        probing.fan_out_probe_batches(cluster_ids=[c.pk for c in report.created], expires=300, on_commit=True)
    return report


def _update_from_kubeconfig(current: Cluster, incoming: Cluster, *, actor) -> Cluster:
    fresh = Cluster.objects.select_for_update().get(pk=current.pk)
    before = snapshot(fresh)
    fields = ["api_server", "ca_bundle", "insecure_skip_tls_verify", "auth_method", "labels", "credentials_encrypted"]
    same = all(getattr(fresh, f) == getattr(incoming, f) for f in fields[:5]) and _same_credentials(fresh, incoming)
    if same:
        return fresh
    for field_name in fields:
        setattr(fresh, field_name, getattr(incoming, field_name))
    fresh.credential_version += 1
    fresh.credentials_rotated_at = timezone.now()
    fresh.save(update_fields=[*fields, "credential_version", "credentials_rotated_at", "updated_at"])
    record_event(
        "cluster.edit",
        actor=actor,
        obj=fresh,
        cluster=fresh.name,
        summary=f"Updated {fresh.name} from a kubeconfig (API server, TLS, labels and credentials)",
        before=before,
        after=snapshot(fresh),
    )
    enqueue.probe_cluster(fresh.pk)
    return fresh


def _same_credentials(stored: Cluster, incoming: Cluster) -> bool:
    try:
        return stored.get_credentials() == incoming.get_credentials()
    except crypto.CredentialDecryptError:
        return False  # no configured key opens the stored ones: the kubeconfig's replace them
