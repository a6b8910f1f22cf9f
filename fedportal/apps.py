from django.apps import AppConfig


class FedPortalConfig(AppConfig):
    name = "fedportal"
    verbose_name = "FedPortal"

    def ready(self):
        from fedportal import admin_audit, security_events  # noqa: F401  (audit signal receivers)
