"""Full page or htmx partial: the one way views answer both a browser and an htmx request."""

from django.shortcuts import redirect, render
from django_htmx.http import HttpResponseClientRedirect


def render_page(request, template: str, context: dict, partial: str | None = None, status: int = 200):
    """``template`` as a whole page, or, for an htmx request, only its ``partial`` (django-template-
    partials' ``template#partial``)."""
    name = f"{template}#{partial}" if partial and request.htmx else template
    return render(request, name, context, status=status)


def redirect_page(request, url: str):
    """Go to ``url``: an HX-Redirect for htmx (a full navigation), a 302 otherwise."""
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
