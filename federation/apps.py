from django.apps import AppConfig


class FederationConfig(AppConfig):
    name = "federation"
