from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "federation.approvals"
    label = "approvals"
    verbose_name = "Change requests"
