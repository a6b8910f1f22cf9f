"""Small text filters for pages: ``{{ when|ago }}`` says "just now" instead of "0 minutes ago"."""

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()


@register.filter
def ago(value) -> str:
    if not value:
        return ""
    if (timezone.now() - value).total_seconds() < 60:
        return "just now"
    return f"{timesince(value)} ago"
