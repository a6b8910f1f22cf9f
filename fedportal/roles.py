"""Roles are Django groups created by a migration. Every permission check goes through here.

viewer    reads everything but credentials
operator  edits drafts, submits change requests, polls, re-syncs
approver  approves or rejects change requests
admin     clusters, credentials, types, users, emergency apply (and everything above)
"""

from functools import wraps

from django.core.exceptions import PermissionDenied
from django.db import models


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    OPERATOR = "operator", "Operator"
    APPROVER = "approver", "Approver"
    ADMIN = "admin", "Admin"


def user_roles(user) -> frozenset[str]:
    """The roles a user holds, cached on the user object for the request."""
    if user is None or not user.is_authenticated or not user.is_active:
        return frozenset()
    cached = getattr(user, "_fedportal_roles", None)
    if cached is None:
        if user.is_superuser:
            cached = frozenset(Role.values)
        else:
            names = set(user.groups.filter(name__in=Role.values).values_list("name", flat=True))
            if Role.ADMIN in names:
                names = set(Role.values)
            if names:
                names.add(Role.VIEWER)
            cached = frozenset(names)
        user._fedportal_roles = cached
    return cached


def has_role(user, role: str) -> bool:
    return role in user_roles(user)


def require_role(user, role: str) -> None:
    """Raise PermissionDenied (HTTP 403) unless the user holds the role. Services call this too."""
    if not has_role(user, role):
        raise PermissionDenied(f"This action needs the {Role(role).label.lower()} role.")


def require_actor_role(actor, role: str) -> None:
    """Services call this with their ``actor``: a user must hold ``role``. ``None`` is the system
    itself (beat, migrations, management commands run by whoever has shell access) and passes."""
    if actor is not None:
        require_role(actor, role)


def role_required(role: str):
    """View decorator: 403 with a reason unless request.user holds the role."""

    def decorator(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            require_role(request.user, role)
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


class RoleRequiredMixin:
    """Class-based views: ``required_role`` for reads, ``write_role`` for POST/PUT/PATCH/DELETE."""

    required_role = Role.VIEWER
    write_role: str | None = None

    def dispatch(self, request, *args, **kwargs):
        role = self.required_role
        if request.method not in ("GET", "HEAD", "OPTIONS") and self.write_role:
            role = self.write_role
        require_role(request.user, role)
        return super().dispatch(request, *args, **kwargs)
