from django.contrib import admin

from federation.approvals.models import Approval, ChangeRequest, Comment


class ReadOnlyAdmin(admin.ModelAdmin):
    """Change requests move only through services (audited); the admin only reads."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ChangeRequest)
class ChangeRequestAdmin(ReadOnlyAdmin):
    list_display = ("id", "title", "kind", "state", "author_name", "emergency", "created_at")
    list_filter = ("state", "kind", "emergency")
    search_fields = ("title", "resource_repr", "cluster_name", "author_name")


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = ("change_request", "approver_name", "decision", "created_at")


@admin.register(Comment)
class CommentAdmin(ReadOnlyAdmin):
    list_display = ("change_request", "author_name", "created_at")
