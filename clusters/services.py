"""Every change to the cluster registry happens here, with an explicit audit event.

Network calls go through clusters.kube. Bad input raises django.core.exceptions.ValidationError
(with field names where there is one) before anything is written.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from clusters import kube
from clusters.choices import AuthMethod, ClusterRole, ClusterState
from clusters.models import Cluster, ClusterStateChange, PollRequest, VersionSample
from clusters.validators import validate_dns1123_label, validate_labels
from fedportal.audit import record_event

logger = logging.getLogger(__name__)

# Fields shown in audit before/after snapshots (never credentials).
AUDIT_FIELDS = ("name", "api_server", "role", "labels", "insecure_skip_tls_verify", "auth_method", "credential_version")


def snapshot(cluster: Cluster) -> dict:
    data = {field: getattr(cluster, field) for field in AUDIT_FIELDS}
    data["has_ca_bundle"] = bool(cluster.ca_bundle)
    return data


# ---------------------------------------------------------------------------------------------
# Connections


def connection_for(cluster: Cluster) -> kube.ClusterConnection:
    """The decrypted connection for a registered cluster (ApiClient cached by id + credential_version)."""
    credentials = cluster.get_credentials()
    return kube.ClusterConnection(
        name=cluster.name,
        api_server=cluster.api_server,
        token=credentials.get("token"),
        client_certificate=credentials.get("client_certificate"),
        client_key=credentials.get("client_key"),
        ca_data=cluster.ca_bundle or None,
        insecure_skip_tls_verify=cluster.insecure_skip_tls_verify,
        cache_key=cluster.cache_key if cluster.pk else None,
    )


@dataclass(frozen=True)
class ConnectionTest:
    ok: bool
    version: kube.VersionInfo | None = None
    node_count: int | None = None
    error_kind: str = ""
    message: str = ""

    @property
    def error_label(self) -> str:
        return kube.KIND_LABELS.get(self.error_kind, self.error_kind)


def test_connection(conn: kube.ClusterConnection, *, timeout: float | None = None) -> ConnectionTest:
    """GET /version, then list nodes (proves the credentials work). Never raises for kube errors."""
    timeout = timeout or settings.FEDPORTAL_HEALTH_TIMEOUT_SECONDS
    try:
        version = kube.get_version(conn, timeout=timeout)
        nodes = kube.list_nodes(conn, timeout=timeout)
    except kube.KubeError as exc:
        return ConnectionTest(False, error_kind=exc.kind, message=exc.message)
    return ConnectionTest(True, version=version, node_count=len(nodes))


test_connection.__test__ = False  # not a pytest test, despite the name


def _credentials(token=None, client_certificate=None, client_key=None) -> tuple[str, dict]:
    token = (token or "").strip()
    client_certificate = (client_certificate or "").strip()
    client_key = (client_key or "").strip()
    if token and (client_certificate or client_key):
        raise ValidationError("Give a bearer token or a client certificate, not both.", code="credentials")
    if token:
        if re.search(r"\s", token):
            raise ValidationError({"token": "A bearer token has no spaces or line breaks."})
        return AuthMethod.TOKEN, {"token": token}
    if client_certificate or client_key:
        if not (client_certificate and client_key):
            raise ValidationError("A client certificate needs its private key (and the key its certificate).")
        if "BEGIN CERTIFICATE" not in client_certificate:
            raise ValidationError({"client_certificate": "Paste the PEM certificate (-----BEGIN CERTIFICATE-----)."})
        if "PRIVATE KEY" not in client_key:
            raise ValidationError({"client_key": "Paste the PEM private key (-----BEGIN ... PRIVATE KEY-----)."})
        return AuthMethod.CLIENT_CERTIFICATE, {"client_certificate": client_certificate + "\n", "client_key": client_key + "\n"}
    raise ValidationError("Give a bearer token or a client certificate and key.", code="credentials")


def _check_tls(api_server: str, ca_bundle: str, insecure: bool) -> None:
    if ca_bundle and "BEGIN CERTIFICATE" not in ca_bundle:
        raise ValidationError({"ca_bundle": "Paste the CA bundle as PEM (-----BEGIN CERTIFICATE-----)."})
    if api_server.startswith("https://") and not ca_bundle and not insecure:
        # Without a CA bundle the system trust store is used (fine for public CAs), so this is allowed.
        return


def _verify(conn: kube.ClusterConnection) -> ConnectionTest:
    result = test_connection(conn)
    if not result.ok:
        raise ValidationError(
            f"Cannot connect ({result.error_label}): {result.message}", code=f"connection_{result.error_kind}"
        )
    return result


def _validate_cluster(cluster: Cluster, *, exclude_pk=None) -> None:
    """Model validation plus friendly messages for the two constraints users can hit."""
    errors: dict[str, list] = {}
    try:
        cluster.full_clean(exclude=["credentials_encrypted"], validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    others = Cluster.objects.exclude(pk=exclude_pk) if exclude_pk else Cluster.objects.all()
    if cluster.name and others.filter(name=cluster.name).exists():
        errors.setdefault("name", []).append(f"A cluster named {cluster.name!r} is already registered.")
    if cluster.api_server:
        same = others.filter(api_server=cluster.api_server).values_list("name", flat=True).first()
        if same:
            errors.setdefault("api_server", []).append(f"This API server is already registered as {same}.")
    if cluster.role == ClusterRole.HOST:
        host = others.filter(role=ClusterRole.HOST).first()
        if host is not None:
            errors.setdefault("role", []).append(
                f"{host.name} is already the host cluster; a fleet has at most one host."
            )
    if errors:
        raise ValidationError(errors)


def _apply_version(cluster: Cluster, version: kube.VersionInfo | None) -> None:
    if version is None:
        return
    cluster.server_version = version.git_version
    cluster.version_major = version.major
    cluster.version_minor = version.minor
    cluster.platform = version.platform


# ---------------------------------------------------------------------------------------------
# Register / edit / rotate / unjoin


def register_cluster(
    *,
    name: str,
    api_server: str,
    role: str = ClusterRole.MEMBER,
    labels: dict | None = None,
    token: str | None = None,
    client_certificate: str | None = None,
    client_key: str | None = None,
    ca_bundle: str = "",
    insecure_skip_tls_verify: bool = False,
    actor=None,
    verify: bool = True,
    probe: bool = True,
) -> Cluster:
    """Validate, test the connection (unless ``verify=False``), save, audit, and queue a first probe."""
    api_server = (api_server or "").strip().rstrip("/")
    ca_bundle = (ca_bundle or "").strip()
    cluster = Cluster(
        name=(name or "").strip(),
        api_server=api_server,
        role=role,
        labels=labels or {},
        ca_bundle=ca_bundle + "\n" if ca_bundle else "",
        insecure_skip_tls_verify=insecure_skip_tls_verify,
    )
    _validate_cluster(cluster)
    _check_tls(api_server, ca_bundle, insecure_skip_tls_verify)
    cluster.auth_method, credentials = _credentials(token, client_certificate, client_key)
    cluster.set_credentials(credentials)
    if verify:
        result = _verify(connection_for(cluster))
        _apply_version(cluster, result.version)
    _save_new_cluster(cluster, actor=actor, probe=probe)
    return cluster


def _save_new_cluster(cluster: Cluster, *, actor, probe: bool) -> None:
    try:
        with transaction.atomic():
            cluster.save()
            record_event(
                "cluster.register",
                actor=actor,
                obj=cluster,
                cluster=cluster.name,
                summary=f"Registered {cluster.role} cluster {cluster.name} ({cluster.api_server})",
                after=snapshot(cluster),
            )
            if probe:
                _queue_probe_on_commit(cluster.pk)
    except IntegrityError:
        # Lost a race with a concurrent registration: report it like the pre-check would.
        cluster.pk = None
        _validate_cluster(cluster)
        raise


EDITABLE_FIELDS = ("api_server", "role", "labels", "ca_bundle", "insecure_skip_tls_verify")
CONNECTION_FIELDS = ("api_server", "ca_bundle", "insecure_skip_tls_verify")


def update_cluster(cluster: Cluster, *, actor=None, verify: bool = True, **changes) -> Cluster:
    """Edit api_server, role, labels, CA bundle, skip-TLS. Connection changes are tested first and
    bump credential_version (so the cached ApiClient is replaced)."""
    unknown = set(changes) - set(EDITABLE_FIELDS)
    if unknown:
        raise ValueError(f"not editable: {sorted(unknown)}")
    if "api_server" in changes:
        changes["api_server"] = (changes["api_server"] or "").strip().rstrip("/")
    if "ca_bundle" in changes:
        ca = (changes["ca_bundle"] or "").strip()
        changes["ca_bundle"] = ca + "\n" if ca else ""
    fresh = Cluster.objects.get(pk=cluster.pk)
    before = snapshot(fresh)
    changed = [f for f, v in changes.items() if getattr(fresh, f) != v]
    if not changed:
        return fresh
    for field_name in changed:
        setattr(fresh, field_name, changes[field_name])
    _validate_cluster(fresh, exclude_pk=fresh.pk)
    _check_tls(fresh.api_server, fresh.ca_bundle, fresh.insecure_skip_tls_verify)
    connection_changed = any(f in CONNECTION_FIELDS for f in changed)
    if connection_changed:
        fresh.credential_version += 1
        changed.append("credential_version")
        if verify:
            _verify(connection_for(fresh))
    with transaction.atomic():
        fresh.save(update_fields=[*changed, "updated_at"])
        record_event(
            "cluster.edit",
            actor=actor,
            obj=fresh,
            cluster=fresh.name,
            summary=f"Edited {fresh.name}: {', '.join(sorted(set(changed) - {'credential_version'}))}",
            before=before,
            after=snapshot(fresh),
        )
        if connection_changed:
            _queue_probe_on_commit(fresh.pk)
    return fresh


def rotate_credentials(
    cluster: Cluster,
    *,
    token: str | None = None,
    client_certificate: str | None = None,
    client_key: str | None = None,
    actor=None,
    verify: bool = True,
) -> Cluster:
    """Replace the credentials (tested first), bump credential_version, audit the rotation."""
    fresh = Cluster.objects.get(pk=cluster.pk)
    before = snapshot(fresh)
    fresh.auth_method, credentials = _credentials(token, client_certificate, client_key)
    fresh.set_credentials(credentials)
    fresh.credential_version += 1
    fresh.credentials_rotated_at = timezone.now()
    if verify:
        _verify(connection_for(fresh))
    with transaction.atomic():
        fresh.save(
            update_fields=["auth_method", "credentials_encrypted", "credential_version", "credentials_rotated_at", "updated_at"]
        )
        record_event(
            "cluster.rotate_credentials",
            actor=actor,
            obj=fresh,
            cluster=fresh.name,
            summary=f"Rotated the credentials of {fresh.name} ({fresh.get_auth_method_display()})",
            before=before,
            after=snapshot(fresh),
        )
        _queue_probe_on_commit(fresh.pk)
    kube.forget_client((fresh.pk, before["credential_version"]))
    return fresh


@dataclass(frozen=True)
class UnjoinBlock:
    """Why a cluster cannot be unjoined directly, and where to go instead (e.g. a change request)."""

    reason: str
    url: str = ""
    link_text: str = ""


# Other apps (they sit above clusters, which must not import them) register callables
# ``guard(cluster) -> UnjoinBlock | None`` in their AppConfig.ready(); see register_unjoin_guard.
_unjoin_guards: list = []


def register_unjoin_guard(guard) -> None:
    """E.g. federation: "this cluster still holds propagated objects: unjoin through a change request"."""
    if guard not in _unjoin_guards:
        _unjoin_guards.append(guard)


def unjoin_blockers(cluster: Cluster) -> list[UnjoinBlock]:
    return [block for guard in list(_unjoin_guards) if (block := guard(cluster)) is not None]


def unjoin_cluster(cluster: Cluster, *, actor=None, respect_guards: bool = False) -> None:
    """Remove the cluster from the registry: it leaves every list and is no longer polled.
    (What happens to resources propagated to it is the federation app's business: with
    ``respect_guards`` the registered unjoin guards can refuse, e.g. while it holds our objects.)"""
    if respect_guards:
        blocks = unjoin_blockers(cluster)
        if blocks:
            raise ValidationError([block.reason for block in blocks], code="unjoin_blocked")
    with transaction.atomic():
        fresh = Cluster.objects.select_for_update().get(pk=cluster.pk)
        record_event(
            "cluster.unjoin",
            actor=actor,
            obj=fresh,
            cluster=fresh.name,
            summary=f"Unjoined {fresh.role} cluster {fresh.name}",
            before=snapshot(fresh),
        )
        key = fresh.cache_key
        fresh.delete()
    kube.forget_client(key)


def set_isolation(cluster: Cluster, *, isolated: bool, reason: str = "", actor=None) -> Cluster:
    """Isolate a cluster (excluded from propagation by clusters.selectors.ready_members) or release
    it. Compare-and-set: a repeat is a no-op and writes no second audit event."""
    now = timezone.now()
    with transaction.atomic():
        updated = Cluster.objects.filter(pk=cluster.pk, isolated=not isolated).update(
            isolated=isolated,
            isolated_reason=reason[:2000] if isolated else "",
            isolated_at=now if isolated else None,
        )
        if updated:
            record_event(
                "cluster.isolate" if isolated else "cluster.release",
                actor=actor,
                obj=cluster,
                cluster=cluster.name,
                summary=f"{'Isolated' if isolated else 'Released'} {cluster.name}" + (f": {reason}" if reason else ""),
                before={"isolated": not isolated},
                after={"isolated": isolated, "reason": reason},
            )
    return Cluster.objects.get(pk=cluster.pk)


# ---------------------------------------------------------------------------------------------
# kubeconfig import


def cluster_name_for_context(context_name: str) -> str:
    """A DNS-1123 label from a kubeconfig context name ("arn:aws:eks:...:cluster/prod" -> "prod")."""
    base = context_name.rsplit("/", 1)[-1] if "/" in context_name else context_name
    name = re.sub(r"[^a-z0-9-]+", "-", base.lower()).strip("-")
    return name[:63].strip("-") or "cluster"


@dataclass(frozen=True)
class ImportPlan:
    context: kube.KubeconfigContext
    name: str
    role: str


def default_contexts(contexts: list[kube.KubeconfigContext]) -> list[str]:
    """The first usable context of each API server (a kubeconfig often holds several users for
    one cluster, e.g. admin and read-only)."""
    chosen, servers = [], set()
    for context in contexts:
        server = context.server.rstrip("/")
        if context.usable and server not in servers:
            servers.add(server)
            chosen.append(context.name)
    return chosen


def plan_kubeconfig_import(
    text: str, *, contexts: list[str] | None = None, host_context: str | None = None, base_dir=None
) -> list[ImportPlan]:
    """Parse and select contexts; ValidationError for a malformed file or an unknown context."""
    try:
        parsed = kube.parse_kubeconfig(text, base_dir=base_dir)
    except kube.KubeError as exc:
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
        raise ValidationError(f"The host context {host_context!r} is not among the chosen contexts.", code="unknown_context")
    plans = []
    for name in dict.fromkeys(wanted):
        context = by_name[name]
        if context.problem:
            raise ValidationError(f"Context {name!r} cannot be registered: {context.problem}.", code="unusable_context")
        role = ClusterRole.HOST if name == host_context else ClusterRole.MEMBER
        plans.append(ImportPlan(context, cluster_name_for_context(name), role))
    servers = Counter(plan.context.server.rstrip("/") for plan in plans)
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
    """Register the chosen contexts (one per API server by default), each with its own credentials.
    All or nothing: every context is validated and tested before any is saved.

    ``update_existing``: a context whose cluster name is already registered updates that cluster's
    API server, TLS settings and credentials (audited, credential_version bumped) instead of failing
    as a duplicate; its role and labels are kept. ``make demo`` uses this on restart."""
    if labels:
        validate_labels(labels)
    plans = plan_kubeconfig_import(text, contexts=contexts, host_context=host_context, base_dir=base_dir)
    existing = (
        {c.name: c for c in Cluster.objects.filter(name__in=[p.name for p in plans])} if update_existing else {}
    )
    errors = []
    pending: list[Cluster] = []
    for plan in plans:
        context = plan.context
        ca = (context.ca_data or "").strip()
        current = existing.get(plan.name)
        cluster = Cluster(
            pk=current.pk if current else None,
            name=plan.name,
            api_server=context.server.strip().rstrip("/"),
            role=current.role if current else plan.role,
            labels=current.labels if current else (labels or {}),
            ca_bundle=ca + "\n" if ca else "",
            insecure_skip_tls_verify=context.insecure_skip_tls_verify,
            credential_version=current.credential_version + 1 if current else 1,
        )
        try:
            _validate_cluster(cluster, exclude_pk=cluster.pk)
            _check_tls(cluster.api_server, ca, cluster.insecure_skip_tls_verify)
            cluster.auth_method, credentials = _credentials(context.token, context.client_certificate, context.client_key)
            cluster.set_credentials(credentials)
        except ValidationError as exc:
            errors += [f"{context.name}: {m}" for m in exc.messages]
            continue
        pending.append(cluster)
    # Test every connection (outside any transaction: no lock is held while we wait on the network).
    if verify and not errors:
        for cluster in pending:
            result = test_connection(connection_for(cluster))
            if result.ok:
                _apply_version(cluster, result.version)
            else:
                errors.append(f"{cluster.name}: cannot connect ({result.error_label}): {result.message}")
    if errors:
        raise ValidationError(errors)
    saved = []
    with transaction.atomic():
        for cluster in pending:
            if cluster.pk is None:
                _save_new_cluster(cluster, actor=actor, probe=True)
                saved.append(cluster)
            else:
                saved.append(_update_from_kubeconfig(existing[cluster.name], cluster, actor=actor))
    return saved


def _update_from_kubeconfig(current: Cluster, incoming: Cluster, *, actor) -> Cluster:
    fresh = Cluster.objects.select_for_update().get(pk=current.pk)
    before = snapshot(fresh)
    fields = ["api_server", "ca_bundle", "insecure_skip_tls_verify", "auth_method", "credentials_encrypted"]
    same = all(getattr(fresh, f) == getattr(incoming, f) for f in fields[:4]) and (
        fresh.get_credentials() == incoming.get_credentials()
    )
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
        summary=f"Updated {fresh.name} from a kubeconfig (API server, TLS and credentials)",
        before=before,
        after=snapshot(fresh),
    )
    _queue_probe_on_commit(fresh.pk)
    return fresh


# ---------------------------------------------------------------------------------------------
# Probing (KubeFed cluster health semantics)


@dataclass(frozen=True)
class ProbeOutcome:
    cluster_id: int
    skipped: str = ""  # why nothing was done ("" when the probe ran)
    reachable: bool = False
    ready: bool = False
    state: str = ""
    changed_state: bool = False
    version_sampled: bool = False
    error: str = ""


def _acquire_lease(cluster_id: int, budget: float) -> bool:
    """Compare-and-set: only one probe of a cluster runs at a time (a crashed one expires)."""
    now = timezone.now()
    from django.db.models import Q

    return bool(
        Cluster.objects.filter(pk=cluster_id)
        .filter(Q(probe_lease_until__isnull=True) | Q(probe_lease_until__lt=now))
        .update(probe_lease_until=now + timedelta(seconds=budget))
    )


def probe_budget_seconds() -> float:
    """Upper bound of one probe: readyz (+healthz fallback), version, nodes, each timed out."""
    return settings.FEDPORTAL_HEALTH_TIMEOUT_SECONDS * 4 + 2


def probe_cluster(cluster: Cluster | int, *, requested_at: datetime | None = None) -> ProbeOutcome:
    """Probe one cluster: /readyz (or /healthz), /version, nodes; then move its state:

    * reachable and ready: successes += 1; Ready once successes >= FEDPORTAL_HEALTH_SUCCESS_THRESHOLD
    * reachable but not ready (5xx, not "ok", 401/403, version/node errors): NotReady
    * unreachable (DNS, refused, timeout): failures += 1; NotReady at once, Offline once
      failures >= FEDPORTAL_HEALTH_FAILURE_THRESHOLD

    Idempotent: a probe requested at ``requested_at`` is skipped when the cluster was probed since,
    and a compare-and-set lease keeps two workers from probing the same cluster at once.
    """
    cluster_id = cluster.pk if isinstance(cluster, Cluster) else int(cluster)
    row = Cluster.objects.filter(pk=cluster_id).first()
    if row is None:
        return ProbeOutcome(cluster_id, skipped="gone")
    if requested_at is not None and row.last_probe_at is not None and row.last_probe_at >= requested_at:
        return ProbeOutcome(cluster_id, skipped="already probed since requested")
    budget = probe_budget_seconds()
    if not _acquire_lease(cluster_id, budget):
        return ProbeOutcome(cluster_id, skipped="another probe is running")
    try:
        return _probe(row)
    finally:
        Cluster.objects.filter(pk=cluster_id).update(probe_lease_until=None)


def _probe(cluster: Cluster) -> ProbeOutcome:
    timeout = settings.FEDPORTAL_HEALTH_TIMEOUT_SECONDS
    reachable, ready, error = False, False, ""
    version: kube.VersionInfo | None = None
    nodes: list[kube.NodeInfo] | None = None
    started = time.monotonic()
    try:
        conn = connection_for(cluster)
        health = kube.check_ready(conn, timeout=timeout)
        reachable = True
        if not health.ok:
            error = f"Not ready: {health.detail}"
        else:
            version = kube.get_version(conn, timeout=timeout)
            nodes = kube.list_nodes(conn, timeout=timeout)
            ready = True
    except kube.KubeError as exc:
        error = exc.message
        # An HTTP answer (401, 403, 5xx...) proves the server is there; no answer counts to Offline.
        reachable = reachable or exc.kind not in kube.UNREACHABLE_KINDS
        ready = False
    except Exception as exc:  # decryption failure and the like: the cluster cannot be probed
        logger.exception("probe of %s failed", cluster.name)
        error = f"Probe failed: {type(exc).__name__}"
        reachable = False
    logger.info("probe %s reachable=%s ready=%s in %.2fs", cluster.name, reachable, ready, time.monotonic() - started)
    return _record_probe(cluster.pk, reachable=reachable, ready=ready, error=error, version=version, nodes=nodes)


def _next_state(current: str, *, reachable: bool, ready: bool, failures: int, successes: int) -> str:
    if ready:
        return ClusterState.READY if successes >= settings.FEDPORTAL_HEALTH_SUCCESS_THRESHOLD else current
    if not reachable:
        if failures >= settings.FEDPORTAL_HEALTH_FAILURE_THRESHOLD:
            return ClusterState.OFFLINE
        return ClusterState.OFFLINE if current == ClusterState.OFFLINE else ClusterState.NOT_READY
    return ClusterState.NOT_READY


def _record_probe(cluster_id, *, reachable, ready, error, version, nodes) -> ProbeOutcome:
    now = timezone.now()
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().filter(pk=cluster_id).first()
        if cluster is None:
            return ProbeOutcome(cluster_id, skipped="gone")
        if ready:
            successes, failures = cluster.consecutive_successes + 1, 0
        elif reachable:
            successes, failures = 0, 0
        else:
            successes, failures = 0, cluster.consecutive_failures + 1
        old_state = cluster.state
        new_state = _next_state(old_state, reachable=reachable, ready=ready, failures=failures, successes=successes)
        fields = {
            "consecutive_successes": successes,
            "consecutive_failures": failures,
            "last_probe_at": now,
            "last_error": error[:4000],
            "state": new_state,
        }
        if ready:
            fields["last_success_at"] = now
        sampled = False
        if version is not None and nodes is not None:
            kubelets = {node.name: node.kubelet_version for node in nodes}
            regions = Counter(node.region for node in nodes if node.region)
            fields.update(
                server_version=version.git_version,
                version_major=version.major,
                version_minor=version.minor,
                platform=version.platform,
                kubelet_versions=kubelets,
                node_count=len(nodes),
                region=regions.most_common(1)[0][0] if regions else "",
                zones=sorted({node.zone for node in nodes if node.zone}),
            )
            if (version.git_version, version.platform, kubelets) != (
                cluster.server_version,
                cluster.platform,
                cluster.kubelet_versions,
            ) or not VersionSample.objects.filter(cluster_id=cluster_id).exists():
                VersionSample.objects.create(
                    cluster_id=cluster_id,
                    sampled_at=now,
                    git_version=version.git_version,
                    version_major=version.major,
                    version_minor=version.minor,
                    platform=version.platform,
                    kubelet_versions=kubelets,
                )
                sampled = True
        changed = new_state != old_state
        if changed:
            fields["state_changed_at"] = now
            reason = error or "Probe succeeded"
            ClusterStateChange.objects.create(
                cluster_id=cluster_id, from_state=old_state, to_state=new_state, reason=reason[:2000], at=now
            )
        Cluster.objects.filter(pk=cluster_id).update(**fields)
        if changed:
            record_event(
                "cluster.state_change",
                obj=cluster,
                cluster=cluster.name,
                summary=f"{cluster.name}: {old_state} -> {new_state}" + (f" ({error[:200]})" if error else ""),
                before={"state": old_state},
                after={"state": new_state},
            )
    return ProbeOutcome(
        cluster_id,
        reachable=reachable,
        ready=ready,
        state=new_state,
        changed_state=changed,
        version_sampled=sampled,
        error=error,
    )


# ---------------------------------------------------------------------------------------------
# Poll now


def _queue_probe_on_commit(cluster_id: int) -> None:
    from clusters.tasks import probe_cluster_task

    transaction.on_commit(lambda: probe_cluster_task.apply_async((cluster_id,), expires=300))


def request_poll(*, cluster: Cluster | None = None, actor=None) -> PollRequest:
    """"Poll now" for one cluster or the whole fleet; progress is read with poll_progress()."""
    total = 1 if cluster is not None else Cluster.objects.count()
    with transaction.atomic():
        poll = PollRequest.objects.create(
            cluster=cluster, total=total, requested_by=actor if getattr(actor, "pk", None) else None
        )
        record_event(
            "cluster.poll",
            actor=actor,
            obj=cluster,
            object_type="" if cluster else "clusters.fleet",
            object_repr="" if cluster else "fleet",
            cluster=cluster.name if cluster else "",
            summary=f"Poll now: {cluster.name if cluster else f'all {total} clusters'}",
        )
        from clusters.tasks import poll_fleet_task, probe_cluster_task

        requested_at = poll.started_at.isoformat()
        if cluster is not None:
            transaction.on_commit(lambda: probe_cluster_task.apply_async((cluster.pk, requested_at), expires=300))
        else:
            transaction.on_commit(lambda: poll_fleet_task.apply_async((requested_at,), expires=300))
    return poll


@dataclass(frozen=True)
class PollProgress:
    total: int
    done: int
    failed: int

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    @property
    def percent(self) -> int:
        return 100 if not self.total else min(100, round(100 * self.done / self.total))

    @property
    def ok(self) -> int:
        return self.done - self.failed


def poll_progress(poll: PollRequest) -> PollProgress:
    """Clusters in scope probed since the poll started (two aggregate queries at most)."""
    from django.db.models import Count, Q

    scope = Cluster.objects.all() if poll.cluster_id is None else Cluster.objects.filter(pk=poll.cluster_id)
    counts = scope.aggregate(
        done=Count("id", filter=Q(last_probe_at__gte=poll.started_at)),
        failed=Count("id", filter=Q(last_probe_at__gte=poll.started_at) & ~Q(last_error="")),
        present=Count("id"),
    )
    total = min(poll.total, counts["present"]) if poll.total else counts["present"]
    return PollProgress(total=total, done=min(counts["done"], total), failed=min(counts["failed"], total))


def fan_out_probes(*, requested_at: datetime | None = None, expires: float | None = None) -> int:
    """Queue one probe task per cluster (queue "probes"); returns how many were queued."""
    from clusters.tasks import probe_cluster_task

    stamp = requested_at.isoformat() if requested_at else None
    count = 0
    for cluster_id in Cluster.objects.order_by("pk").values_list("pk", flat=True).iterator():
        args = (cluster_id, stamp) if stamp else (cluster_id,)
        probe_cluster_task.apply_async(args, expires=expires)
        count += 1
    return count


__all__ = [
    "connection_for",
    "test_connection",
    "register_cluster",
    "update_cluster",
    "rotate_credentials",
    "unjoin_cluster",
    "set_isolation",
    "register_unjoin_guard",
    "unjoin_blockers",
    "import_kubeconfig_contexts",
    "plan_kubeconfig_import",
    "probe_cluster",
    "request_poll",
    "poll_progress",
    "fan_out_probes",
    "validate_dns1123_label",
]
