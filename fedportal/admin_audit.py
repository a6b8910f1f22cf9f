"""Privilege and schedule changes are audited wherever they are made (the Django admin, the shell,
``createsuperuser``): receivers on the save, delete and many-to-many signals of users, groups, their
memberships and permissions, and django-celery-beat's schedules. The events go into the same
hash chain as everything else, with the acting user and address from the request context.

Events: ``auth.user.create`` / ``.update`` (user name, active, staff, superuser, password set) /
``.delete``; ``auth.user.groups`` and ``auth.user.permissions`` (added / removed / cleared, named);
``auth.group.create`` / ``.update`` / ``.delete`` and ``auth.group.permissions``;
``beat.<model>.create`` / ``.update`` / ``.delete`` (a periodic task or its schedule). Beat's own
bookkeeping (last run, run count) is not a change and is not audited.
"""

from datetime import tzinfo

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save
from django.dispatch import receiver
from django_celery_beat.models import (
    ClockedSchedule,
    CrontabSchedule,
    IntervalSchedule,
    PeriodicTask,
    SolarSchedule,
)

from fedportal.audit import record_event

User = get_user_model()
USER_FIELDS = ("username", "is_active", "is_staff", "is_superuser")
BEAT_MODELS = (PeriodicTask, IntervalSchedule, CrontabSchedule, SolarSchedule, ClockedSchedule)
BEAT_BOOKKEEPING = {"last_run_at", "total_run_count", "date_changed"}
BEFORE = "fedportal_audit_before"  # instance attribute: the row as it was before this save


def _values(instance, names) -> dict:
    return {name: getattr(instance, name) for name in names}


def _changes(before: dict, after: dict) -> tuple[dict, dict]:
    changed = [name for name in after if before.get(name) != after[name]]
    return {name: before.get(name) for name in changed}, {name: after[name] for name in changed}


# --- users -------------------------------------------------------------------------------------


@receiver(pre_save, sender=User, dispatch_uid="fedportal_audit_user_pre_save")
def _user_before(sender, instance, update_fields=None, **kwargs):
    if instance.pk is None or (update_fields is not None and set(update_fields) <= {"last_login"}):
        return
    row = sender._default_manager.filter(pk=instance.pk).values(*USER_FIELDS, "password").first()
    if row is not None:
        instance.__dict__[BEFORE] = row


@receiver(post_save, sender=User, dispatch_uid="fedportal_audit_user_post_save")
def _user_saved(sender, instance, created, **kwargs):
    before_row = instance.__dict__.pop(BEFORE, None)
    name = instance.get_username()
    if created:
        record_event(
            "auth.user.create", obj=instance, summary=f"user {name} created", after=_values(instance, USER_FIELDS)
        )
        return
    if before_row is None:
        return
    before, after = _changes({k: before_row[k] for k in USER_FIELDS}, _values(instance, USER_FIELDS))
    password_set = before_row["password"] != instance.password
    if not after and not password_set:
        return
    what = [f"{field} {before[field]!r} -> {after[field]!r}" for field in after]
    if password_set:
        what.append("password set")
    record_event(
        "auth.user.update",
        obj=instance,
        summary=f"user {name}: {', '.join(what)}",
        before=before or None,
        after=after or None,
    )


@receiver(post_delete, sender=User, dispatch_uid="fedportal_audit_user_delete")
def _user_deleted(sender, instance, **kwargs):
    record_event(
        "auth.user.delete",
        object_type="auth.user",
        object_id=instance.pk,
        object_repr=instance.get_username(),
        summary=f"user {instance.get_username()} deleted",
        before=_values(instance, USER_FIELDS),
    )


# --- groups ------------------------------------------------------------------------------------


@receiver(pre_save, sender=Group, dispatch_uid="fedportal_audit_group_pre_save")
def _group_before(sender, instance, **kwargs):
    if instance.pk is not None:
        instance.__dict__[BEFORE] = sender.objects.filter(pk=instance.pk).values_list("name", flat=True).first()


@receiver(post_save, sender=Group, dispatch_uid="fedportal_audit_group_post_save")
def _group_saved(sender, instance, created, **kwargs):
    old_name = instance.__dict__.pop(BEFORE, None)
    if created:
        record_event(
            "auth.group.create", obj=instance, summary=f"group {instance.name} created", after={"name": instance.name}
        )
    elif old_name is not None and old_name != instance.name:
        record_event(
            "auth.group.update",
            obj=instance,
            summary=f"group {old_name} renamed to {instance.name}",
            before={"name": old_name},
            after={"name": instance.name},
        )


@receiver(post_delete, sender=Group, dispatch_uid="fedportal_audit_group_delete")
def _group_deleted(sender, instance, **kwargs):
    record_event(
        "auth.group.delete",
        object_type="auth.group",
        object_id=instance.pk,
        object_repr=instance.name,
        summary=f"group {instance.name} deleted",
        before={"name": instance.name},
    )


# --- memberships and permissions (either side of the relation) ---------------------------------------


def _names(model, pks) -> list[str]:
    if model is Permission:
        rows = model.objects.filter(pk__in=pks).select_related("content_type")
        return sorted(f"{p.content_type.app_label}.{p.codename}" for p in rows)
    if model is Group:
        return sorted(model.objects.filter(pk__in=pks).values_list("name", flat=True))
    return sorted(str(u.get_username()) for u in model._default_manager.filter(pk__in=pks))


# m2m "through" model -> (event action, owning model, relation name on the owner)
MEMBERSHIPS = {
    User.groups.through: ("auth.user.groups", User, "groups"),
    User.user_permissions.through: ("auth.user.permissions", User, "user_permissions"),
    Group.permissions.through: ("auth.group.permissions", Group, "permissions"),
}


def _membership_changed(sender, instance, action, reverse, model, pk_set, **kwargs):
    """One receiver for every membership relation, from the owner's side (``user.groups.add(group)``)
    or the other (``group.user_set.add(user)``): the event is always written on the owner."""
    owner_action, owner_model, relation = MEMBERSHIPS[sender]
    if action == "pre_clear":
        instance.__dict__[BEFORE + relation] = (
            set(getattr(instance, relation).values_list("pk", flat=True))
            if not reverse
            else set(_reverse_manager(instance, owner_model, relation).values_list("pk", flat=True))
        )
        return
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if action == "post_clear":
        pk_set = instance.__dict__.pop(BEFORE + relation, set())
    if not pk_set:
        return
    verb = {"post_add": "added", "post_remove": "removed", "post_clear": "removed"}[action]
    if not reverse:  # owner.relation.add(things)
        owners, things = [instance], _names(model, pk_set)
    else:  # thing.owner_set.add(owners)
        owners, things = list(owner_model._default_manager.filter(pk__in=pk_set)), [_label(instance)]
    for owner in owners:
        label = _label(owner)
        record_event(
            owner_action,
            obj=owner,
            summary=f"{label}: {relation.replace('_', ' ')} {verb}: {', '.join(things)}",
            after={verb: things},
        )


def _label(obj) -> str:
    if isinstance(obj, Permission):
        return f"{obj.content_type.app_label}.{obj.codename}"
    return obj.get_username() if hasattr(obj, "get_username") else str(obj)


def _reverse_manager(instance, owner_model, relation):
    field = owner_model._meta.get_field(relation)
    return owner_model._default_manager.filter(**{field.name: instance})


for _through, (_action, _owner, _relation) in MEMBERSHIPS.items():
    m2m_changed.connect(_membership_changed, sender=_through, dispatch_uid=f"fedportal_audit_{_action}")


# --- beat schedules --------------------------------------------------------------------------------


def _beat_fields(model) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields if f.attname not in BEAT_BOOKKEEPING and not f.primary_key]


def _beat_values(row: dict) -> dict:
    """A schedule's values as the audit log can store them: a crontab's timezone (a ZoneInfo, which
    made saving any crontab schedule fail) by its name."""
    return {name: str(value) if isinstance(value, tzinfo) else value for name, value in row.items()}


def _beat_before(sender, instance, **kwargs):
    if instance.pk is not None:
        row = sender._default_manager.filter(pk=instance.pk).values(*_beat_fields(sender)).first()
        if row is not None:
            instance.__dict__[BEFORE] = _beat_values(row)


def _beat_saved(sender, instance, created, **kwargs):
    before_row = instance.__dict__.pop(BEFORE, None)
    action = f"beat.{sender._meta.model_name}"
    after_row = _beat_values(_values(instance, _beat_fields(sender)))
    if created:
        record_event(
            f"{action}.create", obj=instance, summary=f"{sender._meta.verbose_name} {instance} created", after=after_row
        )
        return
    if before_row is None:
        return
    before, after = _changes(before_row, after_row)
    if after:
        record_event(
            f"{action}.update",
            obj=instance,
            summary=f"{sender._meta.verbose_name} {instance}: {', '.join(sorted(after))} changed",
            before=before,
            after=after,
        )


def _beat_deleted(sender, instance, **kwargs):
    record_event(
        f"beat.{sender._meta.model_name}.delete",
        object_type=sender._meta.label_lower,
        object_id=instance.pk,
        object_repr=str(instance),
        summary=f"{sender._meta.verbose_name} {instance} deleted",
        before=_beat_values(_values(instance, _beat_fields(sender))),
    )


for _model in BEAT_MODELS:
    uid = f"fedportal_audit_{_model._meta.model_name}"
    pre_save.connect(_beat_before, sender=_model, dispatch_uid=uid + "_pre_save")
    post_save.connect(_beat_saved, sender=_model, dispatch_uid=uid + "_post_save")
    post_delete.connect(_beat_deleted, sender=_model, dispatch_uid=uid + "_delete")
