"""Roles are Django groups created by a migration. Every permission check goes through here.

viewer    reads everything but credentials
operator  edits drafts, submits change requests, polls, re-syncs
approver  approves or rejects change requests
admin     clusters, credentials, types, users, emergency apply (and everything above)
"""

from functools import wraps

from django.core.exceptions import PermissionDenied
from django.db import connections, models, router


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
            names = role_groups_of(user)
            if Role.ADMIN in names:
                names = set(Role.values)
            if names:
                names.add(Role.VIEWER)
            cached = frozenset(names)
        user._fedportal_roles = cached
    return cached


def role_groups_of(user) -> set[str]:
    """The role groups ``user`` is in, read with one plain query: the ORM compiling the many-to-many
    join took seven times the CPU of running it, on every API request (0.43 ms against 0.06 ms)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    through = get_user_model().groups.through._meta
    connection = connections[router.db_for_read(Group)]
    quote = connection.ops.quote_name
    sql = (
        f"SELECT g.{quote('name')} FROM {quote(through.db_table)} ug "
        f"JOIN {quote(Group._meta.db_table)} g ON g.{quote('id')} = ug.{quote(through.get_field('group').column)} "
        f"WHERE ug.{quote(through.get_field('user').column)} = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [user.pk])
        return {name for (name,) in cursor.fetchall() if name in Role.values}


def holders_of(role: str):
    """The users who hold ``role`` now, as ``user_roles`` decides it (active; superusers, the admin
    group, or the role's group), as a queryset to filter or nest in another query."""
    from django.contrib.auth import get_user_model

    groups = {role, Role.ADMIN}
    return (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(models.Q(is_superuser=True) | models.Q(groups__name__in=sorted(groups)))
    )


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
