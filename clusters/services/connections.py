"""Connections: decrypting a cluster's credentials, testing a connection, validating a registration."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Q

from clusters import addresses, kube
from clusters.choices import AuthMethod, ClusterRole
from clusters.models import Cluster
from clusters.validators import CA_AND_SKIP_TLS_REFUSAL, normalize_api_server, validate_port

# Fields shown in audit before/after snapshots (never credentials).
AUDIT_FIELDS = ("name", "api_server", "role", "labels", "insecure_skip_tls_verify", "auth_method", "credential_version")


def snapshot(cluster: Cluster) -> dict:
    data = {field: getattr(cluster, field) for field in AUDIT_FIELDS}
    data["has_ca_bundle"] = bool(cluster.ca_bundle)
    return data


# ---------------------------------------------------------------------------------------------
# Connections


# What ``connection_for`` reads of a cluster: a query that loads only these (and the caller's own)
# can build connections without a query per cluster for a deferred field.
FIELDS_READ_BY_CONNECTION_FOR = (
    "id",
    "name",
    "api_server",
    "credentials_encrypted",
    "credential_version",
    "ca_bundle",
    "insecure_skip_tls_verify",
)


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
    """GET /version, then list nodes (proves the credentials work). Never raises for kube errors;
    answers within FEDPORTAL_TEST_CONNECTION_SECONDS whatever the server does."""
    timeout = timeout or settings.FEDPORTAL_HEALTH_TIMEOUT_SECONDS
    try:
        with kube.deadline(settings.FEDPORTAL_TEST_CONNECTION_SECONDS):
            version = kube.get_version(conn, timeout=timeout)
            nodes = kube.list_nodes(conn, timeout=timeout)
    except kube.KubeError as exc:
        return ConnectionTest(False, error_kind=exc.kind, message=status_and_reason(conn, exc))
    return ConnectionTest(True, version=version, node_count=len(nodes))


test_connection.__test__ = False  # not a pytest test, despite the name


def status_and_reason(conn: kube.ClusterConnection, error: kube.KubeError) -> str:
    """What a connection test shows of an error: for an HTTP answer, its status and reason only
    (never the target's body, which a hostile server fills with whatever it likes); else FedPortal's
    own description (timeout, refused, DNS, TLS...)."""
    if error.status >= 400:
        reason = re.sub(r"[^A-Za-z0-9 .-]", "", error.reason or "")[:64].strip()
        return f"{conn.api_server} answered HTTP {error.status}{' ' + reason if reason else ''}."
    return error.message


def credentials_for(token=None, client_certificate=None, client_key=None) -> tuple[str, dict]:
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
        return AuthMethod.CLIENT_CERTIFICATE, {
            "client_certificate": client_certificate + "\n",
            "client_key": client_key + "\n",
        }
    raise ValidationError("Give a bearer token or a client certificate and key.", code="credentials")


def check_transport(api_server: str, credentials: dict) -> None:
    """Bearer tokens and client keys travel only over https:// (or http:// to a loopback address)."""
    if (credentials.get("token") or credentials.get("client_key")) and addresses.plain_http_to_remote(api_server):
        raise ValidationError({"api_server": addresses.PLAIN_HTTP_REFUSAL})


def check_address(api_server: str) -> None:
    """Checks of an API server URL made when it is registered or changed, not when a cluster stored
    before them is edited otherwise: a port in 1-65535 (URLValidator takes any five digits, and one
    such row stopped the Cluster API refresh), and no link-local or cloud-metadata host (unless
    FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS), as the form's connection test and the kubeconfig upload
    refuse them: the API with ``verify: false`` stored them, and nothing could reach them. Names are
    not resolved here; the client checks the addresses they resolve to at every connection."""
    try:
        validate_port(api_server)
    except ValidationError as exc:
        raise ValidationError({"api_server": exc.messages}) from None
    if settings.FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS:
        return
    if reason := addresses.blocked_reason(api_server, resolve=False):
        raise ValidationError({"api_server": addresses.link_local_refusal(reason)})


def check_tls(api_server: str, ca_bundle: str, insecure: bool) -> None:
    if ca_bundle and "BEGIN CERTIFICATE" not in ca_bundle:
        raise ValidationError({"ca_bundle": "Paste the CA bundle as PEM (-----BEGIN CERTIFICATE-----)."})
    if api_server.startswith("https://") and not ca_bundle and not insecure:
        # Without a CA bundle the system trust store is used (fine for public CAs), so this is allowed.
        return


def check_tls_choice(ca_bundle: str, insecure: bool) -> None:
    """A CA bundle or skipped verification, not both (as the form says, and as client-go refuses a
    kubeconfig with both). Checked when either is set, not when a cluster stored with both is edited
    otherwise."""
    if ca_bundle and insecure:
        raise ValidationError({"insecure_skip_tls_verify": CA_AND_SKIP_TLS_REFUSAL})


def verify_connection(conn: kube.ClusterConnection) -> ConnectionTest:
    result = test_connection(conn)
    if not result.ok:
        raise ValidationError(
            f"Cannot connect ({result.error_label}): {result.message}", code=f"connection_{result.error_kind}"
        )
    return result


@dataclass(frozen=True)
class Registered:
    """What is registered, read once for validating many clusters (an import): (pk, name, api_server,
    role) per cluster, the API server normalised (clusters.validators.normalize_api_server)."""

    rows: tuple

    @classmethod
    def read(cls) -> Registered:
        rows = Cluster.objects.values_list("pk", "name", "api_server", "role")
        return cls(tuple((pk, name, normalize_api_server(server), role) for pk, name, server, role in rows))


def validate_cluster(cluster: Cluster, *, exclude_pk=None, registered: Registered | None = None) -> None:
    """Model validation plus friendly messages for the two constraints users can hit. ``registered``:
    the registry read once by the caller (no queries per cluster)."""
    errors: dict[str, list] = {}
    try:
        cluster.full_clean(exclude=["credentials_encrypted"], validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    # full_clean normalised cluster.api_server; a stored URL is compared in the same spelling (a row
    # saved before normalisation, or by code that skipped it, may be spelled otherwise)
    api_server = normalize_api_server(cluster.api_server)
    if registered is None:
        others = Cluster.objects.exclude(pk=exclude_pk) if exclude_pk else Cluster.objects.all()
        same_host = Q(api_server__icontains=addresses.host_of(api_server) or api_server)
        rows = [
            (None, name, normalize_api_server(server), role)
            for name, server, role in others.filter(
                Q(name=cluster.name) | same_host | Q(role=ClusterRole.HOST)
            ).values_list("name", "api_server", "role")
        ]
    else:
        rows = [row for row in registered.rows if not exclude_pk or row[0] != exclude_pk]
    if cluster.name and any(name == cluster.name for _, name, _, _ in rows):
        errors.setdefault("name", []).append(f"A cluster named {cluster.name!r} is already registered.")
    if api_server:
        same = next((name for _, name, server, _ in rows if server == api_server), None)
        if same:
            errors.setdefault("api_server", []).append(f"This API server is already registered as {same}.")
    if cluster.role == ClusterRole.HOST:
        host = next((name for _, name, _, role in rows if role == ClusterRole.HOST), None)
        if host is not None:
            errors.setdefault("role", []).append(f"{host} is already the host cluster; a fleet has at most one host.")
    if errors:
        raise ValidationError(errors)


def apply_version(cluster: Cluster, version: kube.VersionInfo | None) -> None:
    if version is None:
        return
    cluster.server_version = version.git_version
    cluster.version_major = version.major
    cluster.version_minor = version.minor
    cluster.platform = version.platform
