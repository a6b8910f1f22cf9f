"""Errors of calls to Kubernetes API servers: the two classes, their stable kinds, and how
transport failures and error answers map onto them (messages never contain the credentials).
No `kubernetes` import: clusters/kube.py hands its exceptions over and re-exports these names.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
from urllib.parse import urlsplit

import urllib3

DEFAULT_TIMEOUT = 10.0

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
KIND_TOO_LARGE = "too_large"
KIND_NOT_ALLOWED = "not_allowed"  # plain http:// with credentials, a link-local or metadata address

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
    KIND_TOO_LARGE: "Response too large",
    KIND_NOT_ALLOWED: "Address not allowed",
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


def _scrub(conn, text: str) -> str:
    text = str(text)
    for secret in (conn.token, conn.client_key):
        if secret and secret in text:
            text = text.replace(secret, "[redacted]")
    return text[:2000]


def _host(conn) -> str:
    try:
        return urlsplit(conn.api_server).hostname or conn.api_server
    except ValueError:
        return conn.api_server


def from_api_exception(conn, exc, timeout) -> KubeError:
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


def from_transport_error(conn, exc: Exception, timeout) -> KubeError:
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
        return KubeTransientError(f"{conn.api_server} closed the connection without answering.", kind=KIND_UNREACHABLE)
    if isinstance(exc, (urllib3.exceptions.ProtocolError, ConnectionError, OSError)):
        return KubeTransientError(
            _scrub(conn, f"Connection to {conn.api_server} failed: {_short(exc)}"), kind=KIND_UNREACHABLE
        )
    if isinstance(exc, urllib3.exceptions.HTTPError):
        return KubeTransientError(
            _scrub(conn, f"Connection to {conn.api_server} failed: {_short(exc)}"), kind=KIND_UNREACHABLE
        )
    return KubePermanentError(
        _scrub(conn, f"Request to {conn.api_server} failed: {_short(exc)}"), kind=KIND_BAD_REQUEST
    )
