"""`{% htmx_script %}` without django-htmx's debug error handler.

With DEBUG on, django-htmx adds a script that replaces the whole document with any 400/403/404/500
answer to an htmx request. That defeats the base template's htmx-config, which swaps 4xx answers in
place so a refused form shows its reason where it was submitted. This tag loads the same htmx build
(with the CSP nonce, as django-htmx does) and, with DEBUG on, our own handler that shows only
server errors (5xx) full page, which is what the debug handler is there for.
"""

from django import template
from django.conf import settings
from django.templatetags.static import static
from django.utils.html import format_html
from django.utils.safestring import mark_safe

register = template.Library()


def script_tag(path: str, nonce) -> str:
    if nonce is not None:
        return format_html('<script src="{}" defer nonce="{}"></script>', static(path), nonce)
    return format_html('<script src="{}" defer></script>', static(path))


@register.simple_tag(takes_context=True)
def htmx_script(context) -> str:
    nonce = context.get("csp_nonce")
    tags = [script_tag("django_htmx/htmx-2.min.js", nonce)]
    if settings.DEBUG:
        tags.append(script_tag("js/htmx-debug-errors.js", nonce))
    return mark_safe("".join(tags))
