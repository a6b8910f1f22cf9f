"""Admin: compliance snapshots, read-only (history: never added, changed or deleted by hand). The version policy is edited only through the audited
drift:policy_edit page (drift.services.update_version_policy), so it is not registered here."""

from django.contrib import admin

from drift.models import ComplianceSnapshot
from fedportal.admin import ReadOnlyAdmin


@admin.register(ComplianceSnapshot)
class ComplianceSnapshotAdmin(ReadOnlyAdmin):
    list_display = ("taken_at", "clusters_compliant", "clusters_total", "open_drift", "findings_p0")
    date_hierarchy = "taken_at"
