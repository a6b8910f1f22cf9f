from django.apps import AppConfig


class DriftConfig(AppConfig):
    name = "drift"
