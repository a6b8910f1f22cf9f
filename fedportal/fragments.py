"""Short-lived caching of the fleet-wide pages' results (the skew, compatibility and compliance
tables, and the cluster list's rows).

Those tables are a function of the whole fleet (1,000 clusters x 200 resources) and cost tens to
hundreds of milliseconds to compute and render; under a team's worth of dashboards they would take
both cores. The rendered results fragment is cached under a key made of:

* the page and its full query string (filters, page numbers) and what the caller passes as ``vary``:
  what the viewer may do (e.g. whether Isolate links are shown), and for the cluster list the
  probes' latest writes (newest probe time, counters), so a poll's results show on the next load;
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
from django.http import HttpResponse
from django.shortcuts import render as render_page
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

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


def render_with_cached_partial(
    request, template: str, partial: str, context: dict, compute: Callable[[], dict], *, vary=()
) -> HttpResponse:
    """The page ``template``, or (htmx) only its ``partial``, the partial's HTML coming from
    ``cached_fragment``. ``compute()`` gives the partial's own context (the expensive part), called
    only when the partial is rendered; the page gets the HTML as ``<partial>_html`` (its template
    shows that instead of rendering the partial inline)."""
    computed = {}  # the partial's context when it was computed for this request (tests read it)

    def render_partial() -> str:
        computed.update(compute())
        return render_to_string(f"{template}#{partial}", {**context, **computed}, request=request)

    html = mark_safe(cached_fragment(request, template, render_partial, vary=vary))  # noqa: S308 - our own render
    if getattr(request, "htmx", False):
        return HttpResponse(html)
    return render_page(request, template, {**context, **computed, f"{partial}_html": html})
