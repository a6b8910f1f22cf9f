"""The profile page: who you are, your roles, and your API tokens (create — shown once — and revoke)."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from api import tokens
from api.forms import TokenCreateForm
from api.models import ApiToken
from fedportal.roles import Role, has_role

NO_ROLE = "You hold no role yet: an API token would be refused everywhere. Ask an admin for a role first."


@require_http_methods(["GET", "POST"])
def profile(request):
    form = TokenCreateForm(request.POST if request.method == "POST" else None)
    new_secret = None
    status = 200
    can_create = has_role(request.user, Role.VIEWER)  # as the API's POST /api/v1/tokens
    if request.method == "POST":
        if not can_create:
            status = 403
        elif form.is_valid():
            new = tokens.create_token(
                request.user,
                actor=request.user,
                name=form.cleaned_data["name"],
                expires_in=form.cleaned_data["expires"],
                read_only=form.cleaned_data["read_only"],
            )
            new_secret = new.secret
            form = TokenCreateForm()
        else:
            status = 400
    return render(
        request,
        "api/profile.html",
        {
            "form": form,
            "new_secret": new_secret,
            "can_create": can_create,
            "no_role": NO_ROLE,
            "tokens": list(tokens.tokens_of(request.user)[:200]),
        },
        status=status,
    )


@require_POST
def token_revoke(request, pk):
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    tokens.revoke_token(token, actor=request.user)
    messages.success(request, f"Token {token.name!r} revoked.")
    return redirect("profile")
