"""Register, edit, rotate credentials, unjoin, isolate: every change audited explicitly."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from clusters import crypto, enqueue, kube
from clusters.choices import ClusterRole
from clusters.models import Cluster
from clusters.services.connections import (
    apply_version,
    check_address,
    check_tls,
    check_tls_choice,
    check_transport,
    connection_for,
    credentials_for,
    snapshot,
    validate_cluster,
    verify_connection,
)
from clusters.validators import normalize_api_server
from fedportal.audit import record_event, record_events
from fedportal.roles import Role, require_actor_role


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
    require_actor_role(actor, Role.ADMIN)
    api_server = normalize_api_server(api_server)
    ca_bundle = (ca_bundle or "").strip()
    cluster = Cluster(
        name=(name or "").strip(),
        api_server=api_server,
        role=role,
        labels=labels or {},
        ca_bundle=ca_bundle + "\n" if ca_bundle else "",
        insecure_skip_tls_verify=insecure_skip_tls_verify,
    )
    validate_cluster(cluster)
    check_address(api_server)
    check_tls(api_server, ca_bundle, insecure_skip_tls_verify)
    check_tls_choice(ca_bundle, insecure_skip_tls_verify)
    cluster.auth_method, credentials = credentials_for(token, client_certificate, client_key)
    check_transport(api_server, credentials)
    cluster.set_credentials(credentials)
    if verify:
        result = verify_connection(connection_for(cluster))
        apply_version(cluster, result.version)
    save_new_cluster(cluster, actor=actor, probe=probe)
    return cluster


# Other apps register ``listener(cluster, reason)`` to hear that a cluster joined or that its labels
# changed (federation reconciles what the approved placements now select), and optionally
# ``many(clusters, reason)`` for a batch (an import, a bulk relabel: one message, not one per
# cluster). Called inside the saving transaction: a listener that queues work does it on commit.
_membership_listeners: dict = {}  # listener -> its batch form, or None


def register_membership_listener(listener, *, many=None) -> None:
    _membership_listeners[listener] = many


def unregister_membership_listener(listener) -> None:
    _membership_listeners.pop(listener, None)


def membership_changed(cluster: Cluster, reason: str) -> None:
    """Tell the registered listeners that ``cluster`` joined or was relabelled (``reason`` says which)."""
    for listener in list(_membership_listeners):
        listener(cluster, reason)


def memberships_changed(clusters: list[Cluster], reason: str) -> None:
    """``membership_changed`` for many clusters: a listener's batch form gets them all at once."""
    if not clusters:
        return
    for listener, many in list(_membership_listeners.items()):
        if many is not None:
            many(list(clusters), reason)
        else:
            for cluster in clusters:
                listener(cluster, reason)


def save_new_cluster(cluster: Cluster, *, actor, probe: bool) -> None:
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
                enqueue.probe_cluster(cluster.pk)
            membership_changed(cluster, "joined")
    except IntegrityError:
        # Lost a race with a concurrent registration: report it like the pre-check would.
        cluster.pk = None
        validate_cluster(cluster)
        raise


def save_new_clusters(clusters: list[Cluster], *, actor) -> None:
    """``save_new_cluster`` for many (an import): the rows saved, their audit events appended in one
    go, the membership listeners told of each; the caller queues their probes (in chunks) and holds
    the transaction. A concurrent registration of one of them rolls the whole batch back and is
    reported like the pre-check would (ValidationError)."""
    try:
        with transaction.atomic():
            for cluster in clusters:
                cluster.save()
    except IntegrityError:
        for cluster in clusters:
            cluster.pk = None
        for cluster in clusters:
            validate_cluster(cluster)
        raise
    with transaction.atomic():
        record_events(
            [
                dict(
                    action="cluster.register",
                    actor=actor,
                    obj=cluster,
                    cluster=cluster.name,
                    summary=f"Registered {cluster.role} cluster {cluster.name} ({cluster.api_server})",
                    after=snapshot(cluster),
                )
                for cluster in clusters
            ]
        )
        memberships_changed(clusters, "joined")


EDITABLE_FIELDS = ("api_server", "role", "labels", "ca_bundle", "insecure_skip_tls_verify")
CONNECTION_FIELDS = ("api_server", "ca_bundle", "insecure_skip_tls_verify")
HIDDEN_FROM_SUMMARY = {"credential_version", "auth_method", "credentials_encrypted", "credentials_rotated_at"}


def update_cluster(
    cluster: Cluster,
    *,
    actor=None,
    verify: bool = True,
    token: str | None = None,
    client_certificate: str | None = None,
    client_key: str | None = None,
    **changes,
) -> Cluster:
    """Edit api_server, role, labels, CA bundle, skip-TLS. Connection changes are tested first and
    bump credential_version (so the cached ApiClient is replaced).

    A new API server needs new credentials (``token``, or ``client_certificate`` and ``client_key``):
    the stored ones are never sent to another host. Credentials given without a new server replace
    the stored ones too."""
    require_actor_role(actor, Role.ADMIN)
    unknown = set(changes) - set(EDITABLE_FIELDS)
    if unknown:
        raise ValueError(f"not editable: {sorted(unknown)}")
    if "api_server" in changes:
        changes["api_server"] = normalize_api_server(changes["api_server"])
    if "ca_bundle" in changes:
        ca = (changes["ca_bundle"] or "").strip()
        changes["ca_bundle"] = ca + "\n" if ca else ""
    fresh = Cluster.objects.get(pk=cluster.pk)
    read_version = fresh.credential_version
    before = snapshot(fresh)
    changed = [f for f, v in changes.items() if getattr(fresh, f) != v]
    new_credentials = bool(token or client_certificate or client_key)
    if not changed and not new_credentials:
        return fresh
    if "api_server" in changed and not new_credentials:
        raise ValidationError(
            {
                "api_server": "A new API server needs its credentials: enter the bearer token or "
                "client certificate and key for it (the stored ones are not sent to "
                "another host)."
            }
        )
    for field_name in changed:
        setattr(fresh, field_name, changes[field_name])
    validate_cluster(fresh, exclude_pk=fresh.pk)
    # checked on what changes: a cluster stored before these checks stays editable otherwise
    if "api_server" in changed:
        check_address(fresh.api_server)
    check_tls(fresh.api_server, fresh.ca_bundle, fresh.insecure_skip_tls_verify)
    if {"ca_bundle", "insecure_skip_tls_verify"} & set(changed):
        check_tls_choice(fresh.ca_bundle, fresh.insecure_skip_tls_verify)
    if new_credentials:
        fresh.auth_method, credentials = credentials_for(token, client_certificate, client_key)
        fresh.set_credentials(credentials)
        fresh.credentials_rotated_at = timezone.now()
        changed += ["auth_method", "credentials_encrypted", "credentials_rotated_at"]
    connection_changed = new_credentials or any(f in CONNECTION_FIELDS for f in changed)
    if connection_changed:
        # the stored credentials are read only when the connection changes: a labels or role edit
        # works even when they cannot be decrypted (a key retired too soon)
        check_transport(fresh.api_server, readable_credentials(fresh))
        fresh.credential_version += 1
        changed.append("credential_version")
        if verify:
            verify_connection(connection_for(fresh))
    with transaction.atomic():
        if connection_changed:
            refuse_concurrent_connection_change(fresh, read_version)
        fresh.save(update_fields=[*changed, "updated_at"])
        record_event(
            "cluster.edit",
            actor=actor,
            obj=fresh,
            cluster=fresh.name,
            summary=f"Edited {fresh.name}: {', '.join(sorted(set(changed) - HIDDEN_FROM_SUMMARY))}"
            + (" and credentials" if new_credentials else ""),
            before=before,
            after=snapshot(fresh),
        )
        if connection_changed:
            enqueue.probe_cluster(fresh.pk)
        if "labels" in changed:
            membership_changed(fresh, "labels changed")
    return fresh


def readable_credentials(cluster: Cluster) -> dict:
    """The stored credentials, or a ValidationError saying to enter them again when no configured
    FEDPORTAL_ENCRYPTION_KEYS opens them."""
    try:
        return cluster.get_credentials()
    except crypto.CredentialDecryptError:
        raise ValidationError(
            "The stored credentials cannot be decrypted with the configured FEDPORTAL_ENCRYPTION_KEYS "
            "(was the key that encrypted them removed?): enter the bearer token or client certificate and key again."
        ) from None


def refuse_concurrent_connection_change(cluster: Cluster, read_version: int) -> None:
    """Inside the caller's transaction: lock the cluster's row and refuse when its connection (API
    server, TLS settings, credentials) changed since ``read_version`` was read, so a rotation and a
    change of API server made at once cannot leave one server with the other's credentials."""
    current = Cluster.objects.select_for_update().filter(pk=cluster.pk).values_list("credential_version", flat=True)
    if list(current) != [read_version]:
        raise ValidationError(
            f"{cluster.name}'s API server or credentials were changed by someone else meanwhile: "
            "reload the page and make your change again."
        )


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
    require_actor_role(actor, Role.ADMIN)
    fresh = Cluster.objects.get(pk=cluster.pk)
    read_version = fresh.credential_version
    before = snapshot(fresh)
    fresh.auth_method, credentials = credentials_for(token, client_certificate, client_key)
    check_transport(fresh.api_server, credentials)
    fresh.set_credentials(credentials)
    fresh.credential_version += 1
    fresh.credentials_rotated_at = timezone.now()
    if verify:
        verify_connection(connection_for(fresh))
    with transaction.atomic():
        refuse_concurrent_connection_change(fresh, read_version)
        fresh.save(
            update_fields=[
                "auth_method",
                "credentials_encrypted",
                "credential_version",
                "credentials_rotated_at",
                "updated_at",
            ]
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
        enqueue.probe_cluster(fresh.pk)
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


def unregister_unjoin_guard(guard) -> None:
    """Undo register_unjoin_guard (tests, and apps that stop guarding)."""
    if guard in _unjoin_guards:
        _unjoin_guards.remove(guard)


def unjoin_blockers(cluster: Cluster) -> list[UnjoinBlock]:
    return [block for guard in list(_unjoin_guards) if (block := guard(cluster)) is not None]


def unjoin_cluster(cluster: Cluster, *, actor=None, respect_guards: bool = False, note: str = "") -> None:
    """Remove the cluster from the registry: it leaves every list and is no longer polled.
    (What happens to resources propagated to it is the federation app's business: with
    ``respect_guards`` the registered unjoin guards can refuse, e.g. while it holds our objects.)
    ``note``: appended to the audit summary (the change request that decided it)."""
    require_actor_role(actor, Role.ADMIN)
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
            summary=f"Unjoined {fresh.role} cluster {fresh.name}" + (f" {note}" if note else ""),
            before=snapshot(fresh),
        )
        key = fresh.cache_key
        fresh.delete()
    kube.forget_client(key)
