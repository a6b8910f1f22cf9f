from django.contrib import admin

from clusters.models import Cluster, ClusterStateChange, VersionSample
from fedportal.admin import ReadOnlyAdmin


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    """Read-mostly: registration, edits and credential rotation go through the app (audited)."""

    list_display = ("name", "role", "state", "server_version", "region", "last_probe_at", "isolated")
    list_filter = ("role", "state", "isolated")
    search_fields = ("name", "api_server")
    exclude = ("credentials_encrypted",)
    readonly_fields = [f.name for f in Cluster._meta.fields if f.name != "credentials_encrypted"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(VersionSample)
class VersionSampleAdmin(ReadOnlyAdmin):
    list_display = ("cluster", "sampled_at", "git_version", "platform")
    list_filter = ("git_version",)


@admin.register(ClusterStateChange)
class ClusterStateChangeAdmin(ReadOnlyAdmin):
    list_display = ("cluster", "at", "from_state", "to_state", "reason")
    list_filter = ("to_state",)
