from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "federation.approvals"
    label = "approvals"
    verbose_name = "Change requests"

    def ready(self):
        from clusters.services import register_unjoin_guard
        from federation.approvals.guards import unjoin_needs_change_request
        from federation.approvals.namespace_preflight import namespace_preflight
        from federation.approvals.preflight import register_preflight

        register_unjoin_guard(unjoin_needs_change_request)

        from federation.approvals.services import resource_settings_changed
        from federation.content_hooks import register_settings_hook

        register_settings_hook(resource_settings_changed)

        from federation.approvals.value_preflight import apiserver_value_check

        register_preflight(apiserver_value_check)
        register_preflight(namespace_preflight)

        from federation.approvals.wave_preflight import unknown_wave_clusters

        register_preflight(unknown_wave_clusters)

        from federation.approvals.immutable_preflight import immutable_field_check

        register_preflight(immutable_field_check)
