"""Status and kind strings for clusters; no status string is spelled anywhere else."""

from django.db import models


class ClusterRole(models.TextChoices):
    HOST = "host", "Host"
    MEMBER = "member", "Member"


class ClusterState(models.TextChoices):
    """KubeFed's cluster conditions (KubeFedCluster status)."""

    READY = "Ready", "Ready"
    NOT_READY = "NotReady", "NotReady"
    OFFLINE = "Offline", "Offline"
    UNKNOWN = "Unknown", "Unknown"


class AuthMethod(models.TextChoices):
    TOKEN = "token", "Bearer token"
    CLIENT_CERTIFICATE = "client_certificate", "Client certificate"


class PollState(models.TextChoices):
    """Progress of a "poll now" request (one cluster or the whole fleet)."""

    RUNNING = "running", "Running"
    DONE = "done", "Done"
