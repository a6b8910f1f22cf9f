"""Small helpers every endpoint module uses: role checks, CSV negotiation, shared schemas."""

from typing import Any

from ninja import Field, Schema
from pydantic import BaseModel, ConfigDict, field_validator
from pydantic_core import PydanticCustomError

from api.pagination import DEFAULT_LIMIT, MAX_LIMIT
from fedportal.roles import Role, require_role
from fedportal.text import find_text_error


class Out(BaseModel):
    """Response bodies: plain pydantic models (ninja's Schema wraps every value of a reply in a
    Django-aware getter, a third of a list page's time)."""


class In(Schema):
    """Request bodies: every string in every field (dict keys and list items included) must be
    text the database can store (fedportal.text: no NUL). A bad one is a 422 naming the field, as
    any other value the schema refuses (pydantic itself refuses a lone surrogate in a ``str``).
    An unknown field is a 422 naming it too (a typo like ``readonly`` must not be silently ignored).
    Strict types: "yes" is not a boolean nor "5" a number (lax pydantic read
    ``"insecure_skip_tls_verify": "yes"`` as true and turned off TLS verification)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("*")
    @classmethod
    def storable_text(cls, value):
        problem = find_text_error(value)
        if problem:
            raise PydanticCustomError("storable_text", problem)
        return value


class ErrorOut(Out):
    error: str
    message: str
    fields: dict[str, list[str]] = {}


class PageParams(Schema):
    cursor: str | None = Field(None, max_length=500, description="next_cursor of the previous page")
    limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)


def errors(*codes: int) -> dict[int, Any]:
    return {code: ErrorOut for code in codes}


READ_ERRORS = errors(400, 401, 403, 404, 422)
# 413: any write's body may be over the upload limit (api.errors.too_large)
WRITE_ERRORS = errors(400, 401, 403, 404, 409, 413, 422)


def require_viewer(request) -> None:
    require_role(request.user, Role.VIEWER)


def wants_csv(request) -> bool:
    return "text/csv" in request.headers.get("Accept", "")


CSV_RESPONSE = {"responses": {200: {"content": {"text/csv": {"schema": {"type": "string"}}}}}}
