"""Change requests move only through services (audited); the admin only reads."""

import json

from django.contrib import admin
from django.utils.html import format_html

from federation.approvals.models import Approval, ChangeRequest, Comment
from fedportal.admin import ReadOnlyAdmin
from fedportal.masking import is_secret_kind, mask_secrets, scrub_message, secret_values


@admin.register(ChangeRequest)
class ChangeRequestAdmin(ReadOnlyAdmin):
    list_display = ("id", "title", "kind", "state", "author_name", "emergency", "created_at")
    list_filter = ("state", "kind", "emergency")
    search_fields = ("title", "resource_repr", "cluster_name", "author_name")
    exclude = ("outcome", "apply_error")
    readonly_fields = ("outcome_shown", "apply_error_shown")

    def _scrubbed(self, obj, value):
        """Outcome rows and errors quote API servers, which may quote a Secret's values."""
        resource = obj.resource
        if resource is None or not is_secret_kind(resource.type.kind):
            return value
        sources = [r.snapshot for r in (obj.proposed_revision, obj.base_revision) if r is not None]
        known = set().union(*(secret_values(source, secret=True) for source in sources))
        return (
            mask_secrets(value, secret=True, known=known)
            if not isinstance(value, str)
            else scrub_message(value, *sources)
        )

    @admin.display(description="outcome")
    def outcome_shown(self, obj):
        return format_html("<pre>{}</pre>", json.dumps(self._scrubbed(obj, obj.outcome), indent=2, default=str))

    @admin.display(description="apply error")
    def apply_error_shown(self, obj):
        return self._scrubbed(obj, obj.apply_error)


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = ("change_request", "approver_name", "decision", "created_at")


@admin.register(Comment)
class CommentAdmin(ReadOnlyAdmin):
    list_display = ("change_request", "author_name", "created_at")
