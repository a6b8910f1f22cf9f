from django.contrib import admin

from fedportal.models import AuditEvent


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shown, never added, changed or deleted in the admin: these rows change only through the
    app's audited services (or are history). Every app's read-only admins derive from it."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    """Read-only: the audit log has no edit or delete path in the app."""

    list_display = ("created_at", "actor_name", "action", "object_repr", "cluster", "shown_summary")
    # what the app's pages show: no URL's user name or password (AuditEvent.shown_*)
    fields = (
        "created_at",
        "actor_name",
        "action",
        "object_type",
        "object_id",
        "object_repr",
        "cluster",
        "shown_summary",
        "shown_before",
        "shown_after",
        "request_id",
        "source_ip",
        "prev_hash",
        "hash",
    )
    readonly_fields = fields
    list_filter = ("action",)
    search_fields = ("actor_name", "object_repr", "summary", "cluster")
