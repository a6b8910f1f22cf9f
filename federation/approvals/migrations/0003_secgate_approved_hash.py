"""Open change requests move to the new approved-content hash (federation.approvals.content:
the revision's hash plus retention and drift policy; for a delete, the retention; for an unjoin,
the retention of what is on the cluster). Approvals given for the old hash of an open request are
carried over, so an upgrade does not void approvals in flight. The hash is written out here (not
imported) so this migration keeps meaning what it meant."""

import hashlib
import json

from django.db import migrations

OPEN = ("Draft", "Submitted", "Approved")
GONE = ("Removed", "Orphaned")


def _hash(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def _new_hash(cr, PropagatedVersion) -> str:
    if cr.kind == "unjoin":
        retention = {}
        if cr.cluster_id:
            for pv in PropagatedVersion.objects.filter(cluster_id=cr.cluster_id).select_related("resource").order_by("resource_id"):
                if pv.status not in GONE and pv.applied_manifest:
                    retention[str(pv.resource_id)] = pv.resource.retention
        return _hash({"unjoin": cr.cluster_id, "retention": retention})
    resource = cr.resource
    if cr.kind == "delete":
        return _hash({"delete": cr.resource_id, "retention": resource.retention if resource else None})
    if cr.proposed_revision is None or resource is None:
        return cr.proposed_hash
    return _hash({"revision": cr.proposed_revision.content_hash, "retention": resource.retention,
                  "drift_policy": resource.drift_policy})


def forward(apps, schema_editor):
    ChangeRequest = apps.get_model("approvals", "ChangeRequest")
    Approval = apps.get_model("approvals", "Approval")
    PropagatedVersion = apps.get_model("federation", "PropagatedVersion")
    for cr in ChangeRequest.objects.filter(state__in=OPEN).select_related("resource", "proposed_revision"):
        old, new = cr.proposed_hash, _new_hash(cr, PropagatedVersion)
        if new == old:
            continue
        Approval.objects.filter(change_request=cr, content_hash=old).update(content_hash=new)
        fields = {"proposed_hash": new}
        if cr.preflight_override_hash == old:
            fields["preflight_override_hash"] = new
        ChangeRequest.objects.filter(pk=cr.pk).update(**fields)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0002_sync_schedule"),
        ("federation", "0005_secgate_settings_change"),
    ]

    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
