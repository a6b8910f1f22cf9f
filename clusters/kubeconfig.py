"""Reading kubeconfig files into contexts, each with its own credentials. Pure: no ORM, no network,
and no `kubernetes` import (only clusters/kube.py talks to API servers).

The YAML goes through fedportal.strict_yaml, the loader manifests use (no aliases, no tags, size
and node caps), and every field is type-checked: a value that is not a string where kubectl expects
one is refused, and ``insecure-skip-tls-verify`` must be a real boolean (the string "false" is an
error, not "true").
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path

from clusters.addresses import PLAIN_HTTP_REFUSAL, blocked_reason, link_local_refusal, plain_http_to_remote
from clusters.validators import url_userinfo
from fedportal.strict_yaml import StrictYAMLError, load_documents
from fedportal.text import text_error

MAX_KUBECONFIG_BYTES = 1024 * 1024


class KubeconfigError(ValueError):
    """A kubeconfig FedPortal cannot use; ``message`` is safe to show (never holds a credential)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass
class KubeconfigContext:
    name: str
    cluster_name: str
    server: str
    token: str | None = None
    client_certificate: str | None = None
    client_key: str | None = None
    ca_data: str | None = None
    insecure_skip_tls_verify: bool = False
    namespace: str = ""
    problem: str = ""  # why this context cannot be registered (exec plugin, missing user...), or ""

    @property
    def usable(self) -> bool:
        return not self.problem

    def __repr__(self):
        return f"KubeconfigContext(name={self.name!r}, server={self.server!r}, problem={self.problem!r})"


def parse_kubeconfig(
    text: str | bytes, *, base_dir: str | Path | None = None, allow_link_local: bool = False
) -> list[KubeconfigContext]:
    """Parse a kubeconfig into its contexts, each with its own credentials.

    Inline ``*-data`` fields are decoded. File references (``certificate-authority``,
    ``client-certificate``, ``tokenFile``) are read only when ``base_dir`` is given (the command
    line); an uploaded kubeconfig must embed them. Contexts whose user needs an exec plugin or an
    auth provider are returned with ``problem`` set, and so are servers FedPortal would not connect to
    (a link-local or cloud-metadata address, unless ``allow_link_local``: the setting
    FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS; names are not resolved here, the client checks them again
    when it connects). Malformed input raises ``KubeconfigError``.
    """
    try:
        documents = load_documents(text, max_bytes=MAX_KUBECONFIG_BYTES)
    except StrictYAMLError as exc:
        detail = str(exc).removeprefix("Invalid YAML: ")
        raise KubeconfigError(f"The kubeconfig is not valid YAML: {detail}") from None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise KubeconfigError("The kubeconfig must be one YAML mapping with clusters, users and contexts.")
    data = documents[0]
    if data.get("kind") not in (None, "Config"):
        raise KubeconfigError(f"kind is {data.get('kind')!r}; a kubeconfig has kind: Config.")
    base = Path(base_dir) if base_dir is not None else None
    clusters = _named(data.get("clusters"), "clusters")
    users = _named(data.get("users"), "users")
    contexts = _named(data.get("contexts"), "contexts")
    if not contexts:
        raise KubeconfigError("The kubeconfig has no contexts.")

    result = []
    for context_name, context in contexts.items():
        where = f"context {context_name!r}"
        cluster_name = _string(context, "cluster", where)
        user_name = _string(context, "user", where)
        cluster = clusters.get(cluster_name)
        if cluster is None:
            raise KubeconfigError(f"context {context_name!r} refers to cluster {cluster_name!r}, which is not defined.")
        server = _string(cluster, "server", f"cluster {cluster_name!r}")
        if not server:
            raise KubeconfigError(f"cluster {cluster_name!r} has no server URL.")
        insecure = cluster.get("insecure-skip-tls-verify")
        insecure = False if insecure is None else insecure
        if not isinstance(insecure, bool):
            raise KubeconfigError(
                f"cluster {cluster_name!r}: insecure-skip-tls-verify must be true or false (unquoted), "
                f"not {type(insecure).__name__} {insecure!r}."
            )
        server, server_problem = _checked_server(server, allow_link_local=allow_link_local)
        entry = KubeconfigContext(
            name=context_name,
            cluster_name=cluster_name,
            server=server,
            insecure_skip_tls_verify=insecure,
            namespace=_string(context, "namespace", where),
        )
        what = f"cluster {cluster_name!r}"
        if _string(cluster, "certificate-authority-data", what):
            entry.ca_data = _decode_data(cluster["certificate-authority-data"], f"{what} CA")
        elif _string(cluster, "certificate-authority", what):
            entry.ca_data = _read_file(base, cluster["certificate-authority"], f"{what} CA")

        user = users.get(user_name) if user_name else None
        if user is None:
            entry.problem = f"user {user_name!r} is not defined" if user_name else "the context has no user"
        else:
            _fill_user(entry, user, user_name, base)
        if server_problem and not entry.problem:
            entry.problem = server_problem
        if entry.ca_data and insecure and not entry.problem:  # client-go refuses this pair too
            entry.problem = "it gives a certificate authority and insecure-skip-tls-verify: give one or the other"
        result.append(entry)
    return result


def _checked_server(server: str, *, allow_link_local: bool) -> tuple[str, str]:
    """The server URL to show, and why FedPortal would not register it ("" when it would): a
    user:password@ in it is cut out here (the contexts table showed it back), a scheme other than
    https:// or http://, plain http:// to another machine (credentials never go there) and a
    link-local or cloud-metadata host are refused before the contexts are offered."""
    if userinfo := url_userinfo(server):
        return server.replace(userinfo, "", 1), "the server URL holds a user name or password (user:password@host)"
    scheme = server.partition("://")[0].lower() if "://" in server else ""
    if scheme not in ("https", "http"):
        return server, "the server URL must start with https:// (or http:// to this machine)"
    if plain_http_to_remote(server):
        return server, PLAIN_HTTP_REFUSAL.rstrip(".")
    if not allow_link_local and (reason := blocked_reason(server, resolve=False)):
        return server, link_local_refusal(reason).rstrip(".")
    return server, ""


def _string(mapping: dict, key: str, where: str) -> str:
    """``mapping[key]`` as a string ("" when absent or null); anything but a string is refused."""
    value = mapping.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise KubeconfigError(f"{where}: {key} must be a string, not {type(value).__name__}.")
    return value


def _decode_data(value: str, what: str) -> str:
    try:
        text = base64.b64decode(value.strip(), validate=False).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise KubeconfigError(f"{what} is not valid base64-encoded PEM.") from None
    return _storable(text, what)


def _storable(text: str, what: str) -> str:
    """Decoded or read text is checked as the YAML's own strings are: a NUL cannot be stored."""
    if problem := text_error(text):
        raise KubeconfigError(f"{what}: {problem}")
    return text


def _read_file(base_dir: Path | None, path: str, what: str) -> str:
    if base_dir is None:
        raise KubeconfigError(
            f"{what} refers to a file ({path}); uploaded kubeconfigs must embed it "
            "(`kubectl config view --flatten --minify`)."
        )
    target = (base_dir / path).expanduser()
    try:
        return _storable(target.read_text(), what)
    except OSError as exc:
        raise KubeconfigError(f"{what}: cannot read {target}: {exc.strerror}.") from None


def _named(entries, section: str) -> dict[str, dict]:
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise KubeconfigError(f"'{section}' must be a list.")
    found = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise KubeconfigError(f"every entry of '{section}' needs a name.")
        body = entry.get(section[:-1])
        if body is not None and not isinstance(body, dict):
            raise KubeconfigError(f"{section[:-1]} {entry['name']!r} must be a mapping.")
        found[entry["name"]] = body or {}
    return found


def _fill_user(entry: KubeconfigContext, user: dict, user_name: str, base: Path | None) -> None:
    what = f"user {user_name!r}"
    if _string(user, "token", what):
        entry.token = user["token"].strip()
    elif _string(user, "tokenFile", what):
        entry.token = _read_file(base, user["tokenFile"], f"{what} tokenFile").strip()
    if _string(user, "client-certificate-data", what):
        entry.client_certificate = _decode_data(user["client-certificate-data"], f"{what} certificate")
    elif _string(user, "client-certificate", what):
        entry.client_certificate = _read_file(base, user["client-certificate"], f"{what} certificate")
    if _string(user, "client-key-data", what):
        entry.client_key = _decode_data(user["client-key-data"], f"{what} key")
    elif _string(user, "client-key", what):
        entry.client_key = _read_file(base, user["client-key"], f"{what} key")
    if bool(entry.client_certificate) != bool(entry.client_key):
        entry.problem = f"{what} has a client certificate without a key (or a key without a certificate)"
    elif not entry.token and not entry.client_certificate:
        if user.get("exec") or user.get("auth-provider"):
            entry.problem = (
                f"{what} authenticates with an exec plugin or auth provider; "
                "FedPortal needs a bearer token or a client certificate"
            )
        else:
            entry.problem = f"{what} has neither a token nor a client certificate"
