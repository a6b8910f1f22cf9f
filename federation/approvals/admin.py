"""Change requests move only through services (audited); the admin only reads."""

from django.contrib import admin

from federation.approvals.models import Approval, ChangeRequest, Comment
from fedportal.admin import ReadOnlyAdmin


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
