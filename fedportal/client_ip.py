"""The client's address, behind as many trusted reverse proxies as FEDPORTAL_TRUSTED_PROXIES says.

Each proxy appends the address it received the request from to ``X-Forwarded-For``; with N
trusted proxies in front of FedPortal the client is the N-th entry from the right (the one the
outermost trusted proxy wrote). Entries further left were sent by the client and are not
believed. With 0 (the default) the header is ignored and ``REMOTE_ADDR`` is the client. A header
with fewer entries than proxies, or an entry that is not an IP address, falls back to
``REMOTE_ADDR`` for the audit log (source address) and django-axes (login throttling); the
/metrics allow-list takes ``forwarded_client_ip``, which refuses it instead.

Behind proxies, FedPortal's own port must be reachable only through them: a client that reaches
it directly writes the header itself.
"""

import ipaddress

from django.conf import settings


def client_ip(request) -> str | None:
    remote = request.META.get("REMOTE_ADDR") or None
    if not settings.FEDPORTAL_TRUSTED_PROXIES:
        return remote
    return forwarded_client_ip(request) or remote


def forwarded_client_ip(request) -> str | None:
    """The client as the trusted proxies name it, or None when they do not (fewer entries than
    proxies, or not an IP address). An access decision takes this, never the fallback: behind
    proxies ``REMOTE_ADDR`` is a proxy's own address, which an allow-list may well hold."""
    proxies = settings.FEDPORTAL_TRUSTED_PROXIES
    if not proxies:
        return request.META.get("REMOTE_ADDR") or None
    entries = [item.strip() for item in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if item.strip()]
    if len(entries) < proxies:
        return None
    try:
        return str(ipaddress.ip_address(entries[-proxies]))
    except ValueError:
        return None
