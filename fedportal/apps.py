from django.apps import AppConfig


class FedPortalConfig(AppConfig):
    name = "fedportal"
    verbose_name = "FedPortal"

    def ready(self):
        from django.urls import register_converter

        from fedportal import admin_audit, security_events  # noqa: F401  (audit signal receivers)
        from fedportal.text import TextConverter

        # before any URLconf is read: every app's urls may use <text:name>
        register_converter(TextConverter, "text")
