"""The Celery application. Configuration comes from Django settings (CELERY_* names)."""

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

# The embedded broker writes its message files atomically (see fedportal/broker.py).
TRANSPORT_ALIASES["filesystem"] = "fedportal.broker:Transport"

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedportal.settings")

app = Celery("fedportal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
