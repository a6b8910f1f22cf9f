"""The one place FedPortal talks to Kubernetes API servers. The only module importing `kubernetes`.

* One ``ApiClient`` per cluster, built from its own ``Configuration`` (never the global default),
  cached by ``ClusterConnection.cache_key`` (cluster id, credential version) in a thread-safe dict.
* Every call has an explicit timeout (``_request_timeout``) and no urllib3 retries: a dead cluster
  costs one timeout, and retrying is the caller's decision (thresholds, Celery retries).
* Plain dataclasses and dicts out, never ``V1*`` objects.
* Our own errors out: ``KubeTransientError`` (timeout, refused, DNS, 5xx, 429: worth trying again)
  and ``KubePermanentError`` (401/403/400/404/409/422, TLS, bad kubeconfig: will not fix itself).
  Messages never contain the credentials.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import socket
import ssl
import tempfile
import threading
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

import urllib3
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException

DEFAULT_TIMEOUT = 10.0
FIELD_MANAGER = "fedportal"

# ---------------------------------------------------------------------------------------------
# Errors


class KubeError(Exception):
    """A failed call. ``kind`` is one of KIND_*; ``status`` the HTTP status (0 when none)."""

    transient = False

    def __init__(self, message: str, *, kind: str, status: int = 0, reason: str = ""):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.status = status
        self.reason = reason

    def __str__(self):
        return self.message

    def __repr__(self):
        return f"{type(self).__name__}(kind={self.kind!r}, status={self.status}, message={self.message!r})"


class KubeTransientError(KubeError):
    """Timeouts, refused connections, DNS failures, 5xx, 429: may work next time."""

    transient = True


class KubePermanentError(KubeError):
    """401/403/400/404/409/422, TLS failures, malformed kubeconfig: will not fix itself."""


# Error kinds (stable strings; the UI and the services switch on them).
KIND_DNS = "dns"
KIND_REFUSED = "refused"
KIND_UNREACHABLE = "unreachable"
KIND_TLS = "tls"
KIND_UNAUTHORIZED = "unauthorized"
KIND_FORBIDDEN = "forbidden"
KIND_TIMEOUT = "timeout"
KIND_SERVER_ERROR = "server_error"
KIND_THROTTLED = "throttled"
KIND_BAD_REQUEST = "bad_request"
KIND_NOT_FOUND = "not_found"
KIND_CONFLICT = "conflict"
KIND_INVALID = "invalid"
KIND_BAD_KUBECONFIG = "bad_kubeconfig"

# Kinds that mean "we never got an HTTP answer": these count towards Offline.
UNREACHABLE_KINDS = frozenset({KIND_DNS, KIND_REFUSED, KIND_UNREACHABLE, KIND_TIMEOUT})

KIND_LABELS = {
    KIND_DNS: "DNS lookup failed",
    KIND_REFUSED: "Connection refused",
    KIND_UNREACHABLE: "Unreachable",
    KIND_TLS: "TLS error",
    KIND_UNAUTHORIZED: "401 Unauthorized",
    KIND_FORBIDDEN: "403 Forbidden",
    KIND_TIMEOUT: "Timed out",
    KIND_SERVER_ERROR: "Server error",
    KIND_THROTTLED: "429 Too Many Requests",
    KIND_BAD_REQUEST: "400 Bad Request",
    KIND_NOT_FOUND: "404 Not Found",
    KIND_CONFLICT: "409 Conflict",
    KIND_INVALID: "422 Invalid",
    KIND_BAD_KUBECONFIG: "Bad kubeconfig",
}

_STATUS_KINDS = {
    400: KIND_BAD_REQUEST,
    401: KIND_UNAUTHORIZED,
    403: KIND_FORBIDDEN,
    404: KIND_NOT_FOUND,
    409: KIND_CONFLICT,
    422: KIND_INVALID,
    429: KIND_THROTTLED,
}


# ---------------------------------------------------------------------------------------------
# Data out


@dataclass
class ClusterConnection:
    """Everything needed to reach one API server. Build it with clusters.services.connection_for()."""

    name: str
    api_server: str
    token: str | None = None
    client_certificate: str | None = None  # PEM
    client_key: str | None = None  # PEM
    ca_data: str | None = None  # PEM
    insecure_skip_tls_verify: bool = False
    cache_key: tuple | None = None  # (cluster id, credential_version); None = do not cache

    def __repr__(self):  # never show credentials, even in tracebacks
        return f"ClusterConnection(name={self.name!r}, api_server={self.api_server!r}, cache_key={self.cache_key!r})"


@dataclass(frozen=True)
class VersionInfo:
    git_version: str
    major: int | None
    minor: int | None
    platform: str = ""
    go_version: str = ""
    build_date: str = ""

    @property
    def minor_version(self) -> str:
        return f"{self.major}.{self.minor}" if self.major is not None and self.minor is not None else ""


@dataclass(frozen=True)
class HealthResult:
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class NodeInfo:
    name: str
    kubelet_version: str = ""
    region: str = ""
    zone: str = ""
    ready: bool = False


@dataclass
class ApplyResult:
    object: dict
    warnings: list[str] = field(default_factory=list)
    created: bool = False  # the apply created the object (201)


# ---------------------------------------------------------------------------------------------
# Clients


class _CachedClient:
    def __init__(self, client: ApiClient, files: list[str]):
        self.client = client
        self.files = files

    def close(self):
        try:
            self.client.rest_client.pool_manager.clear()
            self.client.close()
        finally:
            for path in self.files:
                try:
                    os.unlink(path)
                except OSError:
                    pass


# cluster id -> (full key, client): one client per cluster, found without scanning the others
_cache: dict[object, tuple[tuple, _CachedClient]] = {}
_cache_lock = threading.Lock()
_tmpdir: str | None = None


def _private_dir() -> str:
    global _tmpdir
    if _tmpdir is None or not os.path.isdir(_tmpdir):
        _tmpdir = tempfile.mkdtemp(prefix="fedportal-kube-")
        os.chmod(_tmpdir, 0o700)
        atexit.register(shutil.rmtree, _tmpdir, True)
    return _tmpdir


def _write_private(content: str, suffix: str) -> str:
    fd, path = tempfile.mkstemp(suffix=suffix, dir=_private_dir())
    with os.fdopen(fd, "w") as handle:
        handle.write(content)
    os.chmod(path, 0o600)
    return path


def _build_client(conn: ClusterConnection) -> _CachedClient:
    config = Configuration()
    config.host = conn.api_server.rstrip("/")
    config.retries = False  # no hidden urllib3 retries: one attempt, one timeout
    config.verify_ssl = not conn.insecure_skip_tls_verify
    files: list[str] = []
    if conn.ca_data and not conn.insecure_skip_tls_verify:
        config.ssl_ca_cert = _write_private(conn.ca_data, ".crt")
        files.append(config.ssl_ca_cert)
    if conn.client_certificate and conn.client_key:
        config.cert_file = _write_private(conn.client_certificate, ".crt")
        config.key_file = _write_private(conn.client_key, ".key")
        files += [config.cert_file, config.key_file]
    if conn.token:
        config.api_key = {"authorization": conn.token}
        config.api_key_prefix = {"authorization": "Bearer"}
    if conn.insecure_skip_tls_verify:
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    client = ApiClient(configuration=config)
    client.user_agent = "fedportal"
    return _CachedClient(client, files)


def _fingerprint(conn: ClusterConnection) -> str:
    parts = (
        conn.api_server,
        conn.token or "",
        conn.client_certificate or "",
        conn.client_key or "",
        conn.ca_data or "",
        "insecure" if conn.insecure_skip_tls_verify else "verify",
    )
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


class _Borrowed:
    """Context manager: a cached client (kept) or a one-off client (closed afterwards)."""

    def __init__(self, conn: ClusterConnection):
        self.conn = conn
        self.entry: _CachedClient | None = None
        self.owned = conn.cache_key is None

    def __enter__(self) -> ApiClient:
        if self.owned:
            self.entry = _build_client(self.conn)
            return self.entry.client
        # The fingerprint guards against a reused cluster id (SQLite reuses the highest deleted id):
        # a client is only ever reused for exactly the same server, CA and credentials.
        key = (*tuple(self.conn.cache_key), _fingerprint(self.conn))
        with _cache_lock:
            found = _cache.get(key[0])
            if found is not None and found[0] == key:
                entry = found[1]
            else:
                if found is not None:  # a new credential version replaces the old client of the same cluster
                    found[1].close()
                entry = _build_client(self.conn)
                _cache[key[0]] = (key, entry)
        self.entry = entry
        return entry.client

    def __exit__(self, *exc):
        if self.owned and self.entry is not None:
            self.entry.close()
        return False


def forget_client(cache_key) -> None:
    """Drop a cluster's cached client (after unjoin). Keys are (cluster id, credential_version)."""
    if cache_key is None:
        return
    with _cache_lock:
        found = _cache.pop(tuple(cache_key)[0], None)
        if found is not None:
            found[1].close()


def clear_client_cache() -> None:
    with _cache_lock:
        while _cache:
            _cache.popitem()[1][1].close()


def cached_client_count() -> int:
    with _cache_lock:
        return len(_cache)


# ---------------------------------------------------------------------------------------------
# Requests


@dataclass
class _Response:
    status: int
    body: bytes
    headers: object  # urllib3 HTTPHeaderDict

    def json(self) -> dict:
        try:
            return json.loads(self.body or b"{}")
        except ValueError:
            raise KubePermanentError(
                "The server answered with something that is not JSON (is this a Kubernetes API server?).",
                kind=KIND_BAD_REQUEST,
                status=self.status,
                reason="NotJSON",
            ) from None

    def text(self) -> str:
        return self.body.decode("utf-8", "replace").strip()

    def warnings(self) -> list[str]:
        values = self.headers.getlist("Warning") if hasattr(self.headers, "getlist") else []
        found = []
        for value in values:
            matches = re.findall(r'\d{3} \S+ "((?:[^"\\]|\\.)*)"', value)
            found += [m.replace('\\"', '"').replace("\\\\", "\\") for m in matches] or [value]
        return found


def _timeout(timeout) -> tuple[float, float]:
    # kubernetes' rest client ignores a float timeout; a (connect, read) tuple is always honoured.
    value = float(timeout if timeout is not None else DEFAULT_TIMEOUT)
    return (value, value)


def _request(
    conn: ClusterConnection,
    method: str,
    path: str,
    *,
    query: list[tuple[str, str]] | None = None,
    body=None,
    content_type: str | None = None,
    timeout: float | None = None,
) -> _Response:
    headers = {"Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type
    try:
        with _Borrowed(conn) as client:
            raw = client.call_api(
                path,
                method,
                query_params=query or [],
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=_timeout(timeout),
            )
            return _Response(raw.status, raw.data, raw.headers)
    except ApiException as exc:
        raise _from_api_exception(conn, exc, timeout) from None
    except KubeError:
        raise
    except Exception as exc:  # urllib3 / ssl / socket / bad PEM files
        raise _from_transport_error(conn, exc, timeout) from None


def _scrub(conn: ClusterConnection, text: str) -> str:
    text = str(text)
    for secret in (conn.token, conn.client_key):
        if secret and secret in text:
            text = text.replace(secret, "[redacted]")
    return text[:2000]


def _host(conn: ClusterConnection) -> str:
    try:
        return urlsplit(conn.api_server).hostname or conn.api_server
    except ValueError:
        return conn.api_server


def _from_api_exception(conn: ClusterConnection, exc: ApiException, timeout) -> KubeError:
    status = exc.status or 0
    if status == 0:
        # kubernetes' rest client wraps urllib3's SSLError as ApiException(status=0).
        detail = (exc.reason or "").replace("SSLError\n", "").strip()
        return KubePermanentError(
            _scrub(conn, f"TLS handshake with {conn.api_server} failed: {_short(detail)}"),
            kind=KIND_TLS,
            reason="TLSError",
        )
    body = exc.body.decode("utf-8", "replace") if isinstance(exc.body, bytes) else (exc.body or "")
    reason, message = exc.reason or "", body.strip()
    try:
        parsed = json.loads(body)
        if isinstance(parsed, dict) and parsed.get("kind") == "Status":
            reason = parsed.get("reason") or reason
            message = parsed.get("message") or message
    except ValueError:
        pass
    kind = _STATUS_KINDS.get(status) or (KIND_SERVER_ERROR if status >= 500 else KIND_BAD_REQUEST)
    if status == 401:
        message = message or "the token or client certificate was rejected"
    text = f"{KIND_LABELS.get(kind, status)} from {conn.api_server}: {message or reason or status}"
    if kind == KIND_SERVER_ERROR:
        text = f"{status} {reason or 'Server error'} from {conn.api_server}: {message or reason}"
    error_class = KubeTransientError if status >= 500 or status == 429 else KubePermanentError
    return error_class(_scrub(conn, text), kind=kind, status=status, reason=reason)


def _short(text: str) -> str:
    text = re.sub(r"\s+", " ", str(text)).strip()
    return text[:300]


def _from_transport_error(conn: ClusterConnection, exc: Exception, timeout) -> KubeError:
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        exc = exc.reason
    seconds = f"{float(timeout if timeout is not None else DEFAULT_TIMEOUT):g}"
    host = _host(conn)
    if isinstance(exc, urllib3.exceptions.NameResolutionError) or (
        isinstance(exc, (urllib3.exceptions.NewConnectionError, socket.gaierror))
        and re.search(r"resolv|Name or service|nodename|getaddrinfo", str(exc), re.I)
    ):
        return KubeTransientError(f"DNS lookup failed: cannot resolve host {host!r}.", kind=KIND_DNS)
    if isinstance(exc, urllib3.exceptions.NewConnectionError):
        # checked before timeouts: urllib3 makes NewConnectionError a ConnectTimeoutError subclass
        if "refused" in str(exc).lower():
            return KubeTransientError(f"Connection refused by {conn.api_server}.", kind=KIND_REFUSED)
        return KubeTransientError(
            _scrub(conn, f"Cannot connect to {conn.api_server}: {_short(exc)}"), kind=KIND_UNREACHABLE
        )
    if isinstance(exc, (urllib3.exceptions.ConnectTimeoutError, urllib3.exceptions.ReadTimeoutError)) or isinstance(
        exc, (TimeoutError, socket.timeout)
    ):
        return KubeTransientError(f"Timed out after {seconds}s waiting for {conn.api_server}.", kind=KIND_TIMEOUT)
    if isinstance(exc, ConnectionRefusedError):
        return KubeTransientError(f"Connection refused by {conn.api_server}.", kind=KIND_REFUSED)
    if isinstance(exc, (urllib3.exceptions.SSLError, ssl.SSLError)):
        return KubePermanentError(
            _scrub(conn, f"TLS handshake with {conn.api_server} failed: {_short(exc)}"), kind=KIND_TLS
        )
    if isinstance(exc, (urllib3.exceptions.LocationParseError, urllib3.exceptions.LocationValueError)):
        return KubePermanentError(f"{conn.api_server!r} is not a valid API server URL.", kind=KIND_INVALID)
    if isinstance(exc, urllib3.exceptions.ProtocolError) and re.search(
        r"RemoteDisconnected|Connection aborted|reset by peer", str(exc)
    ):
        return KubeTransientError(
            f"{conn.api_server} closed the connection without answering.", kind=KIND_UNREACHABLE
        )
    if isinstance(exc, (urllib3.exceptions.ProtocolError, ConnectionError, OSError)):
        return KubeTransientError(
            _scrub(conn, f"Connection to {conn.api_server} failed: {_short(exc)}"), kind=KIND_UNREACHABLE
        )
    if isinstance(exc, urllib3.exceptions.HTTPError):
        return KubeTransientError(
            _scrub(conn, f"Connection to {conn.api_server} failed: {_short(exc)}"), kind=KIND_UNREACHABLE
        )
    return KubePermanentError(_scrub(conn, f"Request to {conn.api_server} failed: {_short(exc)}"), kind=KIND_BAD_REQUEST)


# ---------------------------------------------------------------------------------------------
# Discovery, version, health, nodes


def get_version(conn: ClusterConnection, timeout: float | None = None) -> VersionInfo:
    """GET /version."""
    data = _request(conn, "GET", "/version", timeout=timeout).json()
    git_version = str(data.get("gitVersion") or "")
    if not git_version:
        raise KubePermanentError(
            f"{conn.api_server}/version has no gitVersion.", kind=KIND_BAD_REQUEST, reason="NoVersion"
        )
    major, minor = _parse_major_minor(data.get("major"), data.get("minor"), git_version)
    return VersionInfo(
        git_version=git_version,
        major=major,
        minor=minor,
        platform=str(data.get("platform") or ""),
        go_version=str(data.get("goVersion") or ""),
        build_date=str(data.get("buildDate") or ""),
    )


def _parse_major_minor(major, minor, git_version: str) -> tuple[int | None, int | None]:
    def digits(value):
        match = re.match(r"\d+", str(value or ""))  # "27+" on some managed offerings
        return int(match.group()) if match else None

    parsed_major, parsed_minor = digits(major), digits(minor)
    if parsed_major is None or parsed_minor is None:
        match = re.match(r"v?(\d+)\.(\d+)", git_version)
        if match:
            parsed_major, parsed_minor = int(match.group(1)), int(match.group(2))
    return parsed_major, parsed_minor


def check_ready(conn: ClusterConnection, timeout: float | None = None) -> HealthResult:
    """GET /readyz (falling back to /healthz on 404). A 5xx answer is "reachable but not ready"."""
    for path in ("/readyz", "/healthz"):
        try:
            response = _request(conn, "GET", path, timeout=timeout)
        except KubeError as exc:
            if exc.kind == KIND_NOT_FOUND and path == "/readyz":
                continue
            if exc.kind in (KIND_SERVER_ERROR, KIND_THROTTLED):
                return HealthResult(False, exc.message)
            raise
        text = response.text()
        return HealthResult(text.lower() == "ok" or text == "", text[:500] or "ok")
    return HealthResult(False, "neither /readyz nor /healthz exists")


def list_nodes(conn: ClusterConnection, timeout: float | None = None) -> list[NodeInfo]:
    """GET /api/v1/nodes (paged): name, kubelet version, topology region/zone, Ready condition."""
    nodes = []
    for item in _list_all(conn, "/api/v1/nodes", timeout=timeout):
        metadata = item.get("metadata") or {}
        labels = metadata.get("labels") or {}
        status = item.get("status") or {}
        conditions = status.get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        nodes.append(
            NodeInfo(
                name=metadata.get("name", ""),
                kubelet_version=(status.get("nodeInfo") or {}).get("kubeletVersion", ""),
                region=labels.get("topology.kubernetes.io/region")
                or labels.get("failure-domain.beta.kubernetes.io/region", ""),
                zone=labels.get("topology.kubernetes.io/zone") or labels.get("failure-domain.beta.kubernetes.io/zone", ""),
                ready=ready,
            )
        )
    return nodes


def _list_all(conn, path, *, label_selector=None, timeout=None, page_size=500) -> list[dict]:
    items: list[dict] = []
    token = ""
    while True:
        query = [("limit", str(page_size))]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if token:
            query.append(("continue", token))
        data = _request(conn, "GET", path, query=query, timeout=timeout).json()
        items += data.get("items") or []
        token = (data.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


# ---------------------------------------------------------------------------------------------
# Objects


def resource_path(api_version: str, plural: str, namespace: str | None = None, name: str | None = None) -> str:
    """/api/v1/namespaces/ns/configmaps/name or /apis/apps/v1/deployments ..."""
    path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    if namespace:
        path += f"/namespaces/{quote(namespace, safe='')}"
    path += f"/{quote(plural, safe='')}"
    if name:
        path += f"/{quote(name, safe='')}"
    return path


def apply_object(
    conn: ClusterConnection,
    manifest: dict,
    *,
    plural: str,
    namespaced: bool,
    field_manager: str = FIELD_MANAGER,
    field_validation: str = "Strict",
    force: bool = True,
    timeout: float | None = None,
) -> ApplyResult:
    """Server-side apply (PATCH, application/apply-patch+yaml). Returns the live object and warnings."""
    metadata = manifest.get("metadata") or {}
    name = metadata.get("name")
    api_version = manifest.get("apiVersion")
    if not name or not api_version or not manifest.get("kind"):
        raise KubePermanentError(
            "A manifest needs apiVersion, kind and metadata.name.", kind=KIND_INVALID, reason="Invalid"
        )
    namespace = metadata.get("namespace") if namespaced else None
    if namespaced and not namespace:
        raise KubePermanentError(
            f"{manifest['kind']} {name} is namespaced: metadata.namespace is required.",
            kind=KIND_INVALID,
            reason="Invalid",
        )
    query = [("fieldManager", field_manager), ("fieldValidation", field_validation)]
    if force:
        query.append(("force", "true"))
    response = _request(
        conn,
        "PATCH",
        resource_path(api_version, plural, namespace, name),
        query=query,
        body=manifest,  # JSON is YAML: the client json.dumps it for apply-patch+yaml
        content_type="application/apply-patch+yaml",
        timeout=timeout,
    )
    return ApplyResult(object=response.json(), warnings=response.warnings(), created=response.status == 201)


def get_object(
    conn: ClusterConnection, *, api_version: str, plural: str, namespace: str | None, name: str, timeout=None
) -> dict | None:
    try:
        return _request(conn, "GET", resource_path(api_version, plural, namespace, name), timeout=timeout).json()
    except KubeError as exc:
        if exc.kind == KIND_NOT_FOUND:
            return None
        raise


def delete_object(
    conn: ClusterConnection, *, api_version: str, plural: str, namespace: str | None, name: str, timeout=None
) -> bool:
    """Delete (background propagation). False when it was already gone."""
    try:
        _request(
            conn,
            "DELETE",
            resource_path(api_version, plural, namespace, name),
            body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
            timeout=timeout,
        )
    except KubeError as exc:
        if exc.kind == KIND_NOT_FOUND:
            return False
        raise
    return True


def list_objects(
    conn: ClusterConnection,
    *,
    api_version: str,
    plural: str,
    namespace: str | None = None,
    label_selector: str | None = None,
    timeout=None,
) -> list[dict]:
    return _list_all(
        conn, resource_path(api_version, plural, namespace), label_selector=label_selector, timeout=timeout
    )


def get_discovery(conn: ClusterConnection, timeout=None) -> list[str]:
    """The group-versions the server serves ("v1", "apps/v1", ...)."""
    core = _request(conn, "GET", "/api", timeout=timeout).json()
    groups = _request(conn, "GET", "/apis", timeout=timeout).json()
    found = list(core.get("versions") or [])
    for group in groups.get("groups") or []:
        found += [v.get("groupVersion") for v in group.get("versions") or [] if v.get("groupVersion")]
    return found


def fingerprint(text: str) -> str:
    """Short, non-reversible id of a credential (for "which token is this" in audit events)."""
    return hashlib.sha256(text.encode()).hexdigest()[:12] if text else ""
