from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The automation API (/api/v1/), API tokens, and /metrics.

    It sits on top of every other app (api -> drift -> federation -> clusters -> fedportal): it only
    calls their public services and selectors, and nothing imports it back."""

    name = "api"
    verbose_name = "Automation API"
    default_auto_field = "django.db.models.BigAutoField"
