"""/api/v1/tokens: the caller's own API tokens (list, create — the secret is in the reply once — revoke)."""

from datetime import datetime

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from django.utils import timezone
from ninja import Field, Router, Status

from api import tokens
from api.auth import needs, token_from_request
from api.common import READ_ERRORS, WRITE_ERRORS, In, Out
from api.idempotency import NO_REPLAY
from api.models import ApiToken
from fedportal.roles import Role, require_role

router = Router(tags=["tokens"])


class TokenOut(Out):
    id: int
    name: str
    prefix: str
    read_only: bool
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None


class NewTokenOut(TokenOut):
    token: str = Field(..., description="The secret: shown only in this reply")


class TokenIn(In):
    name: str = Field("api", min_length=1, max_length=100)
    expires: str = Field("", max_length=8, description="lifetime like 30d, 12h, 2w; empty: never")
    read_only: bool = False


def token_out(t: ApiToken) -> dict:
    return {name: getattr(t, name) for name in TokenOut.model_fields}


@router.get("", response={200: list[TokenOut], **READ_ERRORS}, summary="Your API tokens")
def list_tokens(request):
    require_role(request.user, Role.VIEWER)
    return [token_out(t) for t in tokens.tokens_of(request.user)[:200]]


@router.post(
    "", response={201: NewTokenOut, **WRITE_ERRORS}, auth=needs(Role.VIEWER), summary="Create a token for yourself"
)
def create_token(request, body: TokenIn):
    require_role(request.user, Role.VIEWER)
    try:
        expires_in = tokens.parse_duration(body.expires) if body.expires else None
    except ValidationError as exc:
        raise ValidationError({"expires": exc.messages}) from None
    _within_the_callers_lifetime(token_from_request(request), expires_in)
    new = tokens.create_token(
        request.user, actor=request.user, name=body.name, expires_in=expires_in, read_only=body.read_only
    )
    # the secret is shown once: an Idempotency-Key retry must not replay it (nor create a second token)
    setattr(request, NO_REPLAY, "The token was created and its secret was shown once; create another token.")
    return Status(201, {**token_out(new.token), "token": new.secret})


def _within_the_callers_lifetime(caller: ApiToken | None, expires_in) -> None:
    """A token creates tokens that expire no later than itself: a leaked short-lived token must not
    buy access that outlives it (a browser session, or a token without expiry, may ask for any)."""
    if caller is None or caller.expires_at is None:
        return
    if expires_in is None or timezone.now() + expires_in > caller.expires_at:
        raise ValidationError(
            {
                "expires": [
                    f"This request is authenticated by a token that expires at {caller.expires_at:%Y-%m-%d %H:%M} "
                    "UTC; a token it creates must expire by then. Give a shorter lifetime, or create the token "
                    "from your profile page."
                ]
            }
        )


@router.delete(
    "/{int:token_id}",
    response={200: TokenOut, **WRITE_ERRORS},
    auth=needs(Role.VIEWER),
    summary="Revoke one of your tokens",
)
def revoke_token(request, token_id: int):
    require_role(request.user, Role.VIEWER)
    token = get_object_or_404(ApiToken, pk=token_id, user=request.user)
    return token_out(tokens.revoke_token(token, actor=request.user))
