from django.contrib import admin

from federation.models import FederatedResource, FederatedType, PropagatedVersion, PropagationRun, Revision


class ReadOnlyAdmin(admin.ModelAdmin):
    """Read-only: every change goes through the app's services (validated and audited)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(FederatedType)
class FederatedTypeAdmin(ReadOnlyAdmin):
    list_display = ("kind", "group", "version", "plural", "scope", "propagation", "status_collection")


@admin.register(FederatedResource)
class FederatedResourceAdmin(ReadOnlyAdmin):
    list_display = ("type", "namespace", "name", "current_revision", "retention", "drift_policy")
    list_filter = ("type", "retention", "drift_policy")
    search_fields = ("namespace", "name")


@admin.register(Revision)
class RevisionAdmin(ReadOnlyAdmin):
    list_display = ("resource", "number", "author", "created_at", "content_hash")


@admin.register(PropagationRun)
class PropagationRunAdmin(ReadOnlyAdmin):
    list_display = ("resource", "revision", "trigger", "state", "started_at", "finished_at")
    list_filter = ("state", "trigger")


@admin.register(PropagatedVersion)
class PropagatedVersionAdmin(ReadOnlyAdmin):
    list_display = ("resource", "cluster", "status", "sync_state", "version", "propagated_at")
    list_filter = ("status", "sync_state")
