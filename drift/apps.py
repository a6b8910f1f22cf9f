from django.apps import AppConfig


class DriftConfig(AppConfig):
    name = "drift"

    def ready(self):
        # Change requests run drift's API-compatibility check as a preflight (blocking when a
        # target's Kubernetes version rejects the proposed manifest).
        from federation.approvals.preflight import register_preflight

        from drift.preflight import compat_preflight

        register_preflight(compat_preflight)
