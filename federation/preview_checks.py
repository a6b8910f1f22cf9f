"""Checks of a rendered manifest against one target cluster, which other apps add to the preview.

    from federation.preview_checks import register_manifest_check

    def check(manifest: dict, cluster) -> list[str] | None: ...
    register_manifest_check(check)     # e.g. in drift's AppConfig.ready()

The federation preview shows, per target, the warnings of the first registered check that answers
(a list, empty when the manifest is fine); a check answers None when it cannot judge that cluster.
Without any answer the preview validates the manifest's fields against the cluster's version
schema (``clusters.schemas``), as it always has. drift registers its API-compatibility check, which
adds removed apiVersions, the minimum version that accepts a field and the override that fixes it:
the same verdict as the compatibility matrix and the change request's preflight.

A check runs on the preview's thread pool: no database access. A check that raises is logged and
skipped, so a plugin's bug never breaks the preview.
"""

import logging

from clusters.schemas import schema_minor_for, validate_manifest
from federation.plugins import Registry

logger = logging.getLogger(__name__)

CHECKS = Registry()
register_manifest_check = CHECKS.register
unregister_manifest_check = CHECKS.unregister
registered_manifest_checks = CHECKS.functions


def manifest_warnings(manifest: dict, cluster) -> list[str]:
    """What the preview warns about ``manifest`` on ``cluster``."""
    for check in CHECKS.functions():
        try:
            found = check(manifest, cluster)
        except Exception:  # a plugin's bug must not break the preview
            logger.exception("manifest check %s failed", getattr(check, "__qualname__", check))
            continue
        if found is not None:
            return [str(message) for message in found]
    return _schema_warnings(manifest, cluster)


def _schema_warnings(manifest: dict, cluster) -> list[str]:
    minor = schema_minor_for(cluster.server_version or "")
    if minor is None:
        return []
    return [f"{cluster.name} ({cluster.server_version}): {p.message}" for p in validate_manifest(manifest, minor)]
