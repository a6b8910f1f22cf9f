"""Where FedPortal will send credentials: plain http:// only to loopback addresses, and never to
link-local or cloud-metadata addresses unless FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS is on.
Pure: no ORM, no `kubernetes` (clusters/kube.py enforces these on every client it builds; the
services use them for friendly form errors)."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

# Names of cloud instance-metadata services (GCE, AWS, Azure, Alibaba, OpenStack, Oracle all also
# answer on the link-local or fixed addresses below).
METADATA_HOSTS = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.internal",
        "metadata.tencentyun.com",
    }
)
BLOCKED_NETWORKS = (
    ipaddress.ip_network("169.254.0.0/16"),  # IPv4 link-local, 169.254.169.254 everywhere
    ipaddress.ip_network("fe80::/10"),  # IPv6 link-local
    ipaddress.ip_network("fd00:ec2::254/128"),  # AWS IMDS over IPv6
    ipaddress.ip_network("100.100.100.200/32"),  # Alibaba Cloud metadata
)


def host_of(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower().rstrip(".")
    except ValueError:
        return ""


def _ip(text: str):
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


def is_loopback(host: str) -> bool:
    address = _ip(host)
    return host == "localhost" or host.endswith(".localhost") or (address is not None and address.is_loopback)


PLAIN_HTTP_REFUSAL = (
    "Bearer tokens and client keys are sent only over https:// (plain http:// is allowed to loopback addresses only)."
)


def link_local_refusal(reason: str) -> str:
    """The refusal of a link-local or metadata server (``reason`` from ``blocked_reason``)."""
    return f"FedPortal does not connect to {reason} (FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS)."


def plain_http_to_remote(url: str) -> bool:
    """True for an http:// URL whose host is not a loopback address (credentials never go there)."""
    return url.strip().lower().startswith("http://") and not is_loopback(host_of(url))


def blocked_reason(url: str, *, resolve: bool = True) -> str:
    """Why ``url`` points at a link-local or metadata address ("" when it does not). A host name is
    resolved (``resolve``) and every address it has is checked; one that does not resolve is left to
    the request to report."""
    host = host_of(url)
    if not host:
        return ""
    if host in METADATA_HOSTS:
        return f"{host} is a cloud metadata service"
    literal = _ip(host)
    addresses = [literal] if literal is not None else []
    if literal is None and resolve:
        try:
            addresses = [_ip(info[4][0]) for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)]
        except (OSError, UnicodeError):
            return ""
    for address in addresses:
        if address is not None and (what := _blocked_kind(address)):
            return f"{host} is {what} ({address})"
    return ""


def blocked_address(text: str) -> str:
    """Why a connection may not go to the resolved address ``text`` ("" when it may): what each new
    connection is checked against at connect time, after the name resolved again (a name that
    resolved to a public address when the client was built can be made to resolve to the metadata
    service later: DNS rebinding)."""
    address = _ip(text)
    what = _blocked_kind(address) if address is not None else ""
    return f"{what} ({address})" if what else ""


def _blocked_kind(address) -> str:
    if not any(address in network for network in BLOCKED_NETWORKS):
        return ""
    return "a link-local address" if address.is_link_local else "a cloud metadata address"
