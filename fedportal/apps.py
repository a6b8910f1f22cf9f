from django.apps import AppConfig


class FedPortalConfig(AppConfig):
    name = "fedportal"
    verbose_name = "FedPortal"

    def ready(self):
        from fedportal import security_events  # noqa: F401  (auth signal receivers)
