"""The one place FedPortal talks to Kubernetes API servers. The only module importing `kubernetes`.

* One ``ApiClient`` per cluster, built from its own ``Configuration`` (never the global default),
  cached by ``ClusterConnection.cache_key`` (cluster id, credential version) in a thread-safe dict.
* Every call has an explicit timeout and no urllib3 retries: a dead cluster costs one timeout, and
  retrying is the caller's decision (thresholds, Celery retries). The timeout is a deadline for the
  whole request, not for each socket read, and ``deadline()`` puts one over several requests (a
  connection test, a probe). Response bytes, list pages and list items are capped (settings
  FEDPORTAL_KUBE_MAX_*): a hostile or broken API server cannot hold a thread or fill memory
  (clusters/http_budget.py enforces the deadline and byte cap at the socket).
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
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import quote

import urllib3
from django.conf import settings
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException

from clusters import addresses, http_budget
from clusters.kube_errors import (  # noqa: F401 - re-exported: callers use kube.KubeError, kube.KIND_*
    DEFAULT_TIMEOUT,
    KIND_BAD_KUBECONFIG,
    KIND_BAD_REQUEST,
    KIND_CONFLICT,
    KIND_DNS,
    KIND_FORBIDDEN,
    KIND_INVALID,
    KIND_LABELS,
    KIND_NOT_ALLOWED,
    KIND_NOT_FOUND,
    KIND_REFUSED,
    KIND_SERVER_ERROR,
    KIND_THROTTLED,
    KIND_TIMEOUT,
    KIND_TLS,
    KIND_TOO_LARGE,
    KIND_UNAUTHORIZED,
    KIND_UNREACHABLE,
    UNREACHABLE_KINDS,
    KubeError,
    KubePermanentError,
    KubeTransientError,
    from_api_exception,
    from_transport_error,
)
from clusters.versions import parse_version

FIELD_MANAGER = "fedportal"

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


def _refuse_unsafe_target(conn: ClusterConnection) -> None:
    """Credentials never go over plain http:// except to loopback; link-local and cloud-metadata
    addresses are refused unless FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS is on."""
    if (conn.token or conn.client_key) and addresses.plain_http_to_remote(conn.api_server):
        raise KubePermanentError(
            f"Refusing to send credentials to {conn.api_server} over plain http:// "
            "(only loopback addresses may use http://).",
            kind=KIND_NOT_ALLOWED,
            reason="InsecureTransport",
        )
    if not settings.FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS:
        reason = addresses.blocked_reason(conn.api_server)
        if reason:
            raise KubePermanentError(
                f"Refusing to connect to {conn.api_server}: {reason} (FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS).",
                kind=KIND_NOT_ALLOWED,
                reason="BlockedAddress",
            )


def _build_client(conn: ClusterConnection) -> _CachedClient:
    _refuse_unsafe_target(conn)
    config = Configuration()
    config.host = conn.api_server.rstrip("/")
    config.retries = False  # no hidden urllib3 retries: one attempt, one timeout
    # straight to the API server, as the watch session goes: the client would take HTTP(S)_PROXY from
    # the environment for every host, loopback included, and drops NO_PROXY (kubernetes 35 Configuration)
    config.proxy = None
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
    http_budget.install(client.rest_client.pool_manager)
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


_deadline = threading.local()


@contextmanager
def deadline(seconds: float):
    """Every request this thread makes inside the block ends by ``seconds`` from now, whatever its
    own timeout (nested blocks: the earliest deadline wins)."""
    previous = getattr(_deadline, "at", None)
    end = time.monotonic() + seconds
    _deadline.at = end if previous is None else min(end, previous)
    try:
        yield
    finally:
        _deadline.at = previous


def _budget(timeout) -> http_budget.Budget:
    end = time.monotonic() + float(timeout if timeout is not None else DEFAULT_TIMEOUT)
    outer = getattr(_deadline, "at", None)
    return http_budget.Budget(
        end if outer is None else min(end, outer),
        settings.FEDPORTAL_KUBE_MAX_RESPONSE_BYTES,
        peer_check=None if settings.FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS else addresses.blocked_address,
    )


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
    budget = _budget(timeout)
    try:
        if budget.remaining() <= 0:
            budget.timed_out = True
            raise TimeoutError("no time left")
        with _Borrowed(conn) as client, http_budget.spending(budget):
            # kubernetes' rest client ignores a float timeout; a (connect, read) tuple is honoured
            wait = max(0.001, min(float(timeout if timeout is not None else DEFAULT_TIMEOUT), budget.remaining()))
            raw = client.call_api(
                path,
                method,
                query_params=query or [],
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=(wait, wait),
            )
            return _Response(raw.status, raw.data, raw.headers)
    except KubeError:
        raise
    except Exception as exc:  # ApiException, urllib3 / ssl / socket / bad PEM files
        if budget.refused_peer:
            raise _blocked_address(
                f"Refusing to connect to {conn.api_server}: it now resolves to {budget.refused_peer}"
            ) from None
        if budget.too_large:
            raise KubePermanentError(
                f"{conn.api_server} sent more than {settings.FEDPORTAL_KUBE_MAX_RESPONSE_BYTES} bytes; "
                "FedPortal stopped reading (FEDPORTAL_KUBE_MAX_RESPONSE_BYTES).",
                kind=KIND_TOO_LARGE,
                reason="TooLarge",
            ) from None
        if budget.timed_out:
            raise KubeTransientError(
                f"Timed out: {conn.api_server} had not answered in full by the request's deadline.", kind=KIND_TIMEOUT
            ) from None
        if isinstance(exc, ApiException):
            raise from_api_exception(conn, exc, timeout) from None
        raise from_transport_error(conn, exc, timeout) from None


# ---------------------------------------------------------------------------------------------
# Discovery, version, health, nodes


def get_version(conn: ClusterConnection, timeout: float | None = None) -> VersionInfo:
    """GET /version."""
    data = _request(conn, "GET", "/version", timeout=timeout).json()
    if not isinstance(data, dict):
        raise KubePermanentError(f"{conn.api_server}/version is not an object.", kind=KIND_BAD_REQUEST)
    git_version = str(data.get("gitVersion") or "")
    if not git_version:
        raise KubePermanentError(
            f"{conn.api_server}/version has no gitVersion.", kind=KIND_BAD_REQUEST, reason="NoVersion"
        )
    if len(git_version) > MEMBER_TEXT_LIMIT or member_text(git_version) != git_version:
        # stored as it is (64 characters, no control character): one member's must not fail the
        # database write of the probes recorded with it
        raise KubePermanentError(
            f"{conn.api_server}/version answered a gitVersion that is not a version "
            f"({member_text(git_version)[:MEMBER_TEXT_LIMIT]!r}).",
            kind=KIND_BAD_REQUEST,
            reason="InvalidVersion",
        )
    major, minor = _parse_major_minor(data.get("major"), data.get("minor"), git_version)
    return VersionInfo(
        git_version=git_version,
        major=major,
        minor=minor,
        platform=member_text(data.get("platform"))[:MEMBER_TEXT_LIMIT],
        go_version=member_text(data.get("goVersion"))[:MEMBER_TEXT_LIMIT],
        build_date=member_text(data.get("buildDate"))[:MEMBER_TEXT_LIMIT],
    )


MEMBER_TEXT_LIMIT = 64  # the version columns' length
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def member_text(value) -> str:
    """A short text a member cluster reported (a version, a platform, a node's kubelet version), as
    FedPortal stores it: a string without control characters (PostgreSQL refuses NUL in text and
    jsonb)."""
    return _CONTROL_CHARACTERS.sub("", str(value or ""))


def _parse_major_minor(major, minor, git_version: str) -> tuple[int | None, int | None]:
    def digits(value):
        match = re.match(r"\d+", str(value or ""))  # "27+" on some managed offerings
        return int(match.group()) if match else None

    parsed_major, parsed_minor = digits(major), digits(minor)
    if parsed_major is None or parsed_minor is None:
        version = parse_version(git_version)
        if version:
            parsed_major, parsed_minor = version.major, version.minor
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
                name=member_text(metadata.get("name"))[:253],
                kubelet_version=member_text((status.get("nodeInfo") or {}).get("kubeletVersion"))[:MEMBER_TEXT_LIMIT],
                region=member_text(
                    labels.get("topology.kubernetes.io/region")
                    or labels.get("failure-domain.beta.kubernetes.io/region")
                )[:MEMBER_TEXT_LIMIT],
                zone=member_text(
                    labels.get("topology.kubernetes.io/zone") or labels.get("failure-domain.beta.kubernetes.io/zone")
                )[:MEMBER_TEXT_LIMIT],
                ready=ready,
            )
        )
    return nodes


def _list_all(conn, path, *, label_selector=None, timeout=None, page_size=500) -> list[dict]:
    """Every item, page by page; at most FEDPORTAL_KUBE_MAX_LIST_PAGES pages and _ITEMS items."""
    return _list_pages(conn, path, label_selector=label_selector, timeout=timeout, page_size=page_size)[0]


def _list_pages(conn, path, *, label_selector=None, timeout=None, page_size=500) -> tuple[list[dict], str]:
    """Every item, page by page, and the first page's resourceVersion (the snapshot's); at most
    FEDPORTAL_KUBE_MAX_LIST_PAGES pages and FEDPORTAL_KUBE_MAX_LIST_ITEMS items."""
    items: list[dict] = []
    token, version = "", ""
    for _page in range(settings.FEDPORTAL_KUBE_MAX_LIST_PAGES):
        query = [("limit", str(page_size))]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if token:
            query.append(("continue", token))
        data = _request(conn, "GET", path, query=query, timeout=timeout).json()
        page = data.get("items") or []
        if not isinstance(page, list):
            raise KubePermanentError(
                f"{conn.api_server}{path}: items is not a list.", kind=KIND_BAD_REQUEST, reason="NotAList"
            )
        items += page
        if len(items) > settings.FEDPORTAL_KUBE_MAX_LIST_ITEMS:
            raise _too_large(
                conn, path, f"more than {settings.FEDPORTAL_KUBE_MAX_LIST_ITEMS} items", "FEDPORTAL_KUBE_MAX_LIST_ITEMS"
            )
        metadata = data.get("metadata") or {}
        version = version or str(metadata.get("resourceVersion") or "")
        token = metadata.get("continue") or ""
        if not token:
            return items, version
    raise _too_large(
        conn, path, f"more than {settings.FEDPORTAL_KUBE_MAX_LIST_PAGES} pages", "FEDPORTAL_KUBE_MAX_LIST_PAGES"
    )


def _too_large(conn, path: str, what: str, setting: str) -> KubePermanentError:
    return KubePermanentError(
        f"Listing {path} on {conn.api_server} returned {what}; FedPortal stopped ({setting}).",
        kind=KIND_TOO_LARGE,
        reason="TooLarge",
    )


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


APPLY_CONTENT_TYPE = "application/apply-patch+yaml; charset=utf-8"

# Characters YAML does not allow unescaped (YAML 1.2, 5.1 "c-printable"), escaped as JSON escapes them;
# json.dumps already escapes those below U+0020
_NOT_YAML_PRINTABLE = {
    code: f"\\u{code:04x}" for code in (0x7F, *range(0x80, 0xA0), *range(0xD800, 0xE000), 0xFFFE, 0xFFFF)
}


def apply_body(manifest: dict) -> bytes:
    """An apply patch's body: the manifest as JSON, which is YAML, in UTF-8. Not ``ensure_ascii``:
    that writes a character beyond U+FFFF as a surrogate pair (\\ud83d\\ude00), and the apiserver's YAML
    parser refuses a surrogate escape, so a manifest holding an emoji could not be applied. The few
    characters YAML does not allow as they are stay escaped."""
    return json.dumps(manifest, ensure_ascii=False, separators=(",", ":")).translate(_NOT_YAML_PRINTABLE).encode()


class UidApplyBodies:
    """Apply bodies of one manifest for many objects, each naming its own metadata.uid: the manifest
    is serialised once (``apply_body``) and each uid put in its place, byte for byte the body of the
    manifest naming that uid. A fan-out sends the same manifest to a thousand clusters, and
    serialising it whole for each was most of what FedPortal added to the request itself."""

    def __init__(self, manifest: dict):
        self.manifest = manifest
        marker = os.urandom(16).hex()  # a value nothing else in the body holds
        body = apply_body(self._named(marker))
        quoted = f'"{marker}"'.encode()
        self._parts = body.split(quoted) if body.count(quoted) == 1 else None

    def naming(self, uid: str) -> bytes:
        """The apply body of the manifest with metadata.uid ``uid``."""
        if self._parts is None:  # the marker turned up twice: serialise this one whole
            return apply_body(self._named(uid))
        head, tail = self._parts
        return head + apply_body(uid) + tail

    def _named(self, uid: str) -> dict:
        return {**self.manifest, "metadata": {**(self.manifest.get("metadata") or {}), "uid": uid}}


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
    body: bytes | None = None,
) -> ApplyResult:
    """Server-side apply (PATCH, application/apply-patch+yaml). Returns the live object and warnings.
    ``body``: the manifest already serialised (``UidApplyBodies.naming``), sent as it is; ``manifest``
    then names the object (its apiVersion, kind, name and namespace must be the body's)."""
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
        # Serialised here, once (apply_body): given a dict, the client first copies it value by value
        # in Python (sanitize_for_serialization), then json.dumps it. It sends a body as it is only for
        # a content type it does not serialise itself, hence the charset parameter, which the
        # apiserver drops before it reads the patch type (apiserver/pkg/endpoints/handlers/patch.go).
        body=apply_body(manifest) if body is None else body,
        content_type=APPLY_CONTENT_TYPE,
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
    conn: ClusterConnection,
    *,
    api_version: str,
    plural: str,
    namespace: str | None,
    name: str,
    uid: str | None = None,
    timeout=None,
) -> bool:
    """Delete (background propagation). False when it was already gone. ``uid``: only the object of
    that uid (a precondition: another object under the name is a 409 and stays, see
    ``precondition_failed``)."""
    options = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    if uid:
        options["preconditions"] = {"uid": uid}
    try:
        _request(
            conn,
            "DELETE",
            resource_path(api_version, plural, namespace, name),
            body=options,
            timeout=timeout,
        )
    except KubeError as exc:
        if exc.kind == KIND_NOT_FOUND:
            return False
        raise
    return True


def precondition_failed(exc: KubeError) -> bool:
    """A delete naming a uid (or resourceVersion) found another object under the name: a 409 in
    rest.BeforeDelete's words ("the UID in the precondition (x) does not match the UID in record
    (y)"), the namespace registry's or the storage layer's in a race ("Precondition failed: UID in
    precondition: ...")."""
    message = (exc.message or "").lower()
    return exc.kind == KIND_CONFLICT and ("in the precondition (" in message or "precondition failed" in message)


def merge_patch_object(
    conn: ClusterConnection,
    *,
    api_version: str,
    plural: str,
    namespace: str | None,
    name: str,
    patch: dict,
    field_manager: str = FIELD_MANAGER,
    timeout=None,
) -> dict:
    """JSON merge patch (RFC 7386) of one object, validated strictly; returns the live object."""
    path = resource_path(api_version, plural, namespace, name)
    return _patch(conn, path, patch, "application/merge-patch+json", field_manager, timeout)


def json_patch_object(
    conn: ClusterConnection,
    *,
    api_version: str,
    plural: str,
    namespace: str | None,
    name: str,
    patch: list[dict],
    field_manager: str = FIELD_MANAGER,
    timeout=None,
) -> dict:
    """JSON patch (RFC 6902) of one object: a ``test`` operation that fails makes it a 422 that
    changes nothing (a compare-and-set); returns the live object."""
    path = resource_path(api_version, plural, namespace, name)
    return _patch(conn, path, patch, "application/json-patch+json", field_manager, timeout)


def _patch(conn: ClusterConnection, path: str, body, content_type: str, field_manager: str, timeout) -> dict:
    """A PATCH of ``content_type``, validated strictly, as ``field_manager``; returns the live object."""
    return _request(
        conn,
        "PATCH",
        path,
        query=[("fieldManager", field_manager), ("fieldValidation", "Strict")],
        body=body,
        content_type=content_type,
        timeout=timeout,
    ).json()


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


def list_with_version(
    conn: ClusterConnection,
    *,
    api_version: str,
    plural: str,
    label_selector: str | None = None,
    timeout=None,
    page_size: int = 500,
) -> tuple[list[dict], str]:
    """Every item across namespaces and the list's resourceVersion (where a watch resumes after a
    relist, as an informer does). Same caps as list_objects."""
    return _list_pages(
        conn, resource_path(api_version, plural), label_selector=label_selector, timeout=timeout, page_size=page_size
    )


# ---------------------------------------------------------------------------------------------
# Watches (asyncio: one event loop holds thousands of them; see federation/watching)


class WatchExpired(KubePermanentError):
    """410 Gone / Expired: the resourceVersion asked for is older than the server keeps; relist."""


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: dict
    resource_version: str


def _blocked_address(refusal: str) -> KubePermanentError:
    """A connection refused at connect time (its name now resolves to a link-local or metadata address)."""
    return KubePermanentError(
        f"{refusal} (FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS); nothing was sent.",
        kind=KIND_NOT_ALLOWED,
        reason="BlockedAddress",
    )


class BlockedAddress(OSError):
    """A watch's API server name resolved to a link-local or metadata address (``checked_resolver``)."""


def checked_resolver():
    """An aiohttp resolver that refuses a name resolving to a link-local or metadata address when the
    watch connects (``addresses.blocked_address``, as the blocking client checks each connection's
    peer), unless FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS is on."""
    from aiohttp.abc import AbstractResolver
    from aiohttp.resolver import DefaultResolver

    class CheckedResolver(AbstractResolver):
        def __init__(self):
            self.inner = DefaultResolver()

        async def resolve(self, host, port=0, family=socket.AF_INET):
            found = await self.inner.resolve(host, port, family)
            if not settings.FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS:
                for entry in found:
                    if reason := addresses.blocked_address(entry["host"]):
                        raise BlockedAddress(f"Refusing to connect to {host}: it now resolves to {reason}")
            return found

        async def close(self):
            await self.inner.close()

    return CheckedResolver()


class WatchSession:
    """An aiohttp session for the watches of many clusters, with one TLS context per distinct CA and
    client certificate (built once, from the same kubeconfig fields as the blocking client)."""

    def __init__(self):
        import aiohttp

        self._aiohttp = aiohttp
        self.resolver = checked_resolver()  # every name a watch connects to goes through it
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=0, limit_per_host=0, enable_cleanup_closed=True, resolver=self.resolver
            ),
            auto_decompress=True,
        )
        self._contexts: dict[tuple, object] = {}

    def ssl_for(self, conn: ClusterConnection):
        if not conn.api_server.startswith("https"):
            return None
        # keyed by the TLS material alone: the clusters of one CA share a context and its certificate
        # store (not one per cluster; the certificate and the hostname are still checked per connection)
        key = hashlib.sha256(
            "\x00".join(
                (
                    conn.ca_data or "",
                    conn.client_certificate or "",
                    conn.client_key or "",
                    "insecure" if conn.insecure_skip_tls_verify else "verify",
                )
            ).encode()
        ).hexdigest()
        if key not in self._contexts:
            import ssl

            if conn.insecure_skip_tls_verify:
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            else:
                context = ssl.create_default_context(cadata=conn.ca_data or None)
            if conn.client_certificate and conn.client_key:
                # the context holds them once loaded: the files (the private key among them) are
                # removed at once, not kept until the process exits (one pair per rotation piled up)
                cert = _write_private(conn.client_certificate, ".crt")
                key_file = _write_private(conn.client_key, ".key")
                try:
                    context.load_cert_chain(cert, key_file)
                finally:
                    for path in (cert, key_file):
                        os.unlink(path)
            self._contexts[key] = context
        return self._contexts[key]

    async def close(self) -> None:
        await self.session.close()
        await self.resolver.close()  # given to the connector, which does not close it


async def watch_objects(
    session: WatchSession,
    conn: ClusterConnection,
    *,
    api_version: str,
    plural: str,
    resource_version: str,
    label_selector: str | None = None,
    timeout_seconds: int = 300,
    connect_timeout: float | None = None,
    gate=None,
    on_open=None,
):
    """Watch one resource across namespaces from ``resource_version`` with bookmarks; an async
    iterator of WatchEvent until the server ends the watch (after ``timeout_seconds``). Raises
    WatchExpired on 410, KubeTransientError / KubePermanentError as the blocking calls do. ``gate``
    (an asyncio.Semaphore) bounds how many watches are opening their connection at once; ``on_open``
    is called once the server has accepted the watch (200), before any event."""
    aiohttp = session._aiohttp
    _refuse_unsafe_target(conn)
    query = {
        "watch": "true",
        "allowWatchBookmarks": "true",
        "resourceVersion": resource_version,
        "timeoutSeconds": str(int(timeout_seconds)),
    }
    if label_selector:
        query["labelSelector"] = label_selector
    headers = {"Accept": "application/json", "User-Agent": "fedportal-watch"}
    if conn.token:
        headers["Authorization"] = f"Bearer {conn.token}"
    connect = float(connect_timeout if connect_timeout is not None else DEFAULT_TIMEOUT)
    # a silent connection is noticed: bookmarks come at least every minute or so on a healthy watch
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=float(timeout_seconds) + 90)
    url = conn.api_server.rstrip("/") + resource_path(api_version, plural)
    limit = settings.FEDPORTAL_KUBE_MAX_RESPONSE_BYTES
    try:
        if gate is not None:
            await gate.acquire()
        try:
            # no redirect is followed: only the registered API server passed the address policy
            response = await session.session.get(
                url,
                params=query,
                headers=headers,
                ssl=session.ssl_for(conn),
                timeout=timeout,
                read_bufsize=1 << 20,
                allow_redirects=False,
            )
        finally:
            if gate is not None:
                gate.release()
        try:
            if response.status != 200:
                body = (await response.content.read(65536)).decode("utf-8", "replace")
                raise _watch_error(conn, response.status, response.reason or "", body, timeout_seconds)
            if on_open is not None:
                on_open()
            while True:
                try:
                    line = await response.content.readline()
                except ValueError:  # aiohttp: a line past its buffer's high-water mark
                    raise _too_large(
                        conn, url, "a watch event over the read buffer", "FEDPORTAL_KUBE_MAX_RESPONSE_BYTES"
                    ) from None
                if not line:
                    return
                if len(line) > limit:
                    raise _too_large(
                        conn, url, f"a watch event over {limit} bytes", "FEDPORTAL_KUBE_MAX_RESPONSE_BYTES"
                    )
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    raise KubeTransientError(
                        f"{conn.api_server} sent a watch event that is not JSON.", kind=KIND_UNREACHABLE
                    ) from None
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    status = int(obj.get("code") or 500)
                    raise _watch_error(conn, status, obj.get("reason") or "", json.dumps(obj), timeout_seconds)
                yield WatchEvent(kind, obj, str((obj.get("metadata") or {}).get("resourceVersion") or ""))
        finally:
            response.close()  # never back to the pool: a watch cut short must end on the server too
    except KubeError:
        raise
    except TimeoutError:
        raise KubeTransientError(f"The watch on {conn.api_server} went silent.", kind=KIND_TIMEOUT) from None
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, BlockedAddress):  # as the blocking client refuses it: not transient
            raise _blocked_address(str(exc.os_error)) from None
        raise from_transport_error(conn, exc.os_error or ConnectionError(str(exc)), connect) from None
    except (aiohttp.ClientError, OSError) as exc:
        raise KubeTransientError(
            f"The watch on {conn.api_server} was cut: {type(exc).__name__}.", kind=KIND_UNREACHABLE
        ) from None


def _watch_error(conn, status: int, reason: str, body: str, timeout) -> KubeError:
    if status == 410:
        return WatchExpired(
            f"410 Gone from {conn.api_server}: the resourceVersion is too old.", kind=KIND_NOT_FOUND, status=410
        )
    return from_api_exception(conn, _StatusError(status, reason, body), timeout)


@dataclass
class _StatusError:  # what from_api_exception reads of an ApiException
    status: int
    reason: str
    body: str


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
