import json

from django.contrib import admin
from django.utils.html import format_html

from federation.models import FederatedResource, FederatedType, PropagatedVersion, PropagationRun, Revision
from fedportal.admin import ReadOnlyAdmin
from fedportal.masking import is_secret_kind, mask_secrets, scrub_message


@admin.register(FederatedType)
class FederatedTypeAdmin(ReadOnlyAdmin):
    list_display = ("kind", "group", "version", "plural", "scope", "propagation", "status_collection")


@admin.register(FederatedResource)
class FederatedResourceAdmin(ReadOnlyAdmin):
    list_display = ("type", "namespace", "name", "current_revision", "retention", "drift_policy")
    list_filter = ("type", "retention", "drift_policy")
    search_fields = ("namespace", "name")


def masked_json(value, *, secret: bool):
    """A JSON field as the admin shows it: Secret values masked (fedportal.masking)."""
    return format_html(
        "<pre>{}</pre>", json.dumps(mask_secrets(value, secret=secret), indent=2, sort_keys=True, default=str)
    )


@admin.register(Revision)
class RevisionAdmin(ReadOnlyAdmin):
    list_display = ("resource", "number", "author", "created_at", "content_hash")
    exclude = ("template", "overrides")
    readonly_fields = ("template_shown", "overrides_shown")

    @admin.display(description="template")
    def template_shown(self, obj):
        return masked_json(obj.template, secret=is_secret_kind(obj.resource.type.kind))

    @admin.display(description="overrides")
    def overrides_shown(self, obj):
        return masked_json(obj.overrides, secret=is_secret_kind(obj.resource.type.kind))


@admin.register(PropagationRun)
class PropagationRunAdmin(ReadOnlyAdmin):
    list_display = ("resource", "revision", "trigger", "state", "started_at", "finished_at")
    list_filter = ("state", "trigger")


@admin.register(PropagatedVersion)
class PropagatedVersionAdmin(ReadOnlyAdmin):
    list_display = ("resource", "cluster", "status", "sync_state", "version", "propagated_at")
    list_filter = ("status", "sync_state")
    exclude = ("applied_manifest", "drift", "message")
    readonly_fields = ("message_shown", "applied_manifest_shown", "drift_shown")

    @admin.display(description="message")
    def message_shown(self, obj):
        """A message written before API servers' refusals were scrubbed on write may quote a value."""
        if not is_secret_kind(obj.resource.type.kind):
            return obj.message
        revision = obj.resource.current_revision
        source = {"template": revision.template, "overrides": revision.overrides} if revision else {}
        return scrub_message(obj.message, obj.applied_manifest, source)

    @admin.display(description="applied manifest")
    def applied_manifest_shown(self, obj):
        return masked_json(obj.applied_manifest, secret=is_secret_kind(obj.resource.type.kind))

    @admin.display(description="drift")
    def drift_shown(self, obj):
        return masked_json(obj.drift, secret=is_secret_kind(obj.resource.type.kind))
