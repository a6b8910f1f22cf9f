"""Short-lived caching of the fleet-wide pages' results (the skew, compatibility and compliance tables).

Those tables are a function of the whole fleet (1,000 clusters x 200 resources) and cost tens to
hundreds of milliseconds to compute and render; under a team's worth of dashboards they would take
both cores. The rendered results fragment is cached under a key made of:

* the page and its full query string (filters, page numbers) and what the viewer may do (``vary``:
  e.g. whether Isolate links are shown);
* the id of the newest audit event: every user action is audited, so whoever isolates a cluster,
  edits the version policy or approves a change sees its effect on the next load;

and is recomputed when older than FEDPORTAL_FRAGMENT_CACHE_SECONDS (what the background work, polls
and propagation, may take to show). Once stale, one request recomputes it while the others are served
the previous copy (stale-while-revalidate), so a busy page never stampedes. 0 turns caching off.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable

from django.conf import settings
from django.core.cache import cache

from fedportal.models import AuditEvent

KEY_VERSION = 1
LOCK_SECONDS = 60  # a recompute that takes longer lets a second request try


def fresh_seconds() -> float:
    return float(getattr(settings, "FEDPORTAL_FRAGMENT_CACHE_SECONDS", 30))


def _key(name: str, request, vary) -> str:
    newest_event = AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    parts = [KEY_VERSION, name, sorted(request.GET.lists()), list(vary), newest_event]
    return "fragment:" + hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def cached_fragment(request, name: str, render: Callable[[], str], *, vary=()) -> str:
    """The HTML ``render()`` returns for this page, query and viewer, from the cache while fresh."""
    fresh = fresh_seconds()
    if fresh <= 0:
        return render()
    key = _key(name, request, vary)
    entry = cache.get(key)
    now = time.time()
    if entry is not None:
        computed_at, html = entry
        if now - computed_at < fresh or not cache.add(key + ":refresh", 1, LOCK_SECONDS):
            return html  # fresh, or stale while another request refreshes it
    try:
        html = render()
        cache.set(key, (now, html), max(int(fresh * 10), 60))
    finally:
        if entry is not None:
            cache.delete(key + ":refresh")
    return html
