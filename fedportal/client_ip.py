"""The client's address, behind as many trusted reverse proxies as FEDPORTAL_TRUSTED_PROXIES says.

Each proxy appends the address it received the request from to ``X-Forwarded-For``; with N
trusted proxies in front of FedPortal the client is the N-th entry from the right (the one the
outermost trusted proxy wrote). Entries further left were sent by the client and are not
believed. With 0 (the default) the header is ignored and ``REMOTE_ADDR`` is the client. A header
with fewer entries than proxies, or an entry that is not an IP address, falls back to
``REMOTE_ADDR``. Used by the audit log (source address) and by django-axes (login throttling).
"""

import ipaddress

from django.conf import settings


def client_ip(request) -> str | None:
    remote = request.META.get("REMOTE_ADDR") or None
    proxies = settings.FEDPORTAL_TRUSTED_PROXIES
    if not proxies:
        return remote
    entries = [item.strip() for item in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if item.strip()]
    if len(entries) < proxies:
        return remote
    candidate = entries[-proxies]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote
