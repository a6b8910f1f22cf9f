from django.apps import AppConfig


class DriftConfig(AppConfig):
    name = "drift"

    def ready(self):
        # Change requests run drift's API-compatibility check as a preflight (blocking when a
        # target's Kubernetes version rejects the proposed manifest).
        # The federation preview shows the same verdict per target.
        from drift.preflight import compat_preflight, compat_preview_check
        from federation.approvals.preflight import register_preflight
        from federation.preview_checks import register_manifest_check

        register_preflight(compat_preflight)

        # Cluster API upgrades are change requests of kind "upgrade" that drift.upgrades plans and runs
        from drift.upgrades import HANDLER, upgrade_preflight
        from federation.approvals.choices import ChangeKind
        from federation.approvals.kinds import register_kind

        register_kind(ChangeKind.UPGRADE, HANDLER)
        register_preflight(upgrade_preflight)
        register_manifest_check(compat_preview_check)

        # the first compliance snapshot as soon as the first probe completes (drift.first_snapshot)
        from celery.signals import task_success

        from drift.first_snapshot import after_task_success

        task_success.connect(after_task_success, weak=False, dispatch_uid="drift.first_snapshot")
