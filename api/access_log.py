"""One log line per API call (``fedportal.api`` logger), written while the request's context is
active: with LOG_FORMAT=json it carries the request id, the user, and the cluster or change request
the path names. Ids that endpoints bind (fedportal.logs) are dropped when the call ends."""

import logging
import time
from functools import wraps

from fedportal import logs

logger = logging.getLogger("fedportal.api")
PATH_FIELDS = {"cluster_id": "cluster", "change_id": "change_request"}


def logged(view):
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        token = logs.bind_fields(**{PATH_FIELDS[k]: v for k, v in kwargs.items() if k in PATH_FIELDS})
        started = time.monotonic()
        try:
            response = view(request, *args, **kwargs)
            logger.info(
                "%s %s %s %.0fms",
                request.method,
                request.path,
                response.status_code,
                (time.monotonic() - started) * 1000,
            )
            return response
        finally:
            logs.unbind(token)

    return wrapped
