"""Which built-in APIs a kube-apiserver of a given minor serves: by default, and with `--runtime-config`.

Plain data in and out, shared by the fleet simulator (what discovery and OpenAPI advertise) and the
drift app (what the compatibility matrix accepts when a cluster's discovery has not been read).

The rule is kube-apiserver's ``DefaultAPIResourceConfigSource`` (pkg/controlplane/instance.go,
later pkg/controlplane/apiserver/options; Apache-2.0): every GA group-version is on, every alpha
one is off, and since KEP-3136 (1.24) a beta is off unless it is one of the "legacy" beta
resources that were on before the KEP (``legacyBetaEnabledByDefaultResources``), listed below per
minor. ``--runtime-config`` switches more on (or off): ``api/all``, ``api/ga``, ``api/beta``,
``api/alpha``, ``<group>/<version>`` (``v1`` or ``api/v1`` for the core group) and
``<group>/<version>/<resource>``, each ``true`` or ``false``.

Public API
----------
LEGACY_BETA: {minor: frozenset[(group_version, plural)]}
parse_runtime_config(raw) -> dict[str, bool]          raises ValueError on a bad key or value
config_key(config) -> tuple                            hashable, for caches
is_served(res, minor, config_key=()) -> bool
served_resources(minor, config_key=()) -> tuple[ApiResource, ...]
served_group_versions(minor, config_key=()) -> frozenset[str]
"""

from __future__ import annotations

import functools
import re

from clusters import schemas

# legacyBetaEnabledByDefaultResources per minor (kubernetes/kubernetes pkg/controlplane/instance.go
# at release-1.25 ... release-1.31, Apache-2.0): the beta resources a default apiserver still serves.
_FLOWCONTROL = "flowcontrol.apiserver.k8s.io"
_FLOW_KINDS = ("flowschemas", "prioritylevelconfigurations")


def _flow(version: str) -> set:
    return {(f"{_FLOWCONTROL}/{version}", plural) for plural in _FLOW_KINDS}


LEGACY_BETA: dict[int, frozenset] = {
    25: frozenset(
        _flow("v1beta1")
        | _flow("v1beta2")
        | {("autoscaling/v2beta2", "horizontalpodautoscalers"), ("storage.k8s.io/v1beta1", "csistoragecapacities")}
    ),
    26: frozenset(_flow("v1beta2") | _flow("v1beta3") | {("storage.k8s.io/v1beta1", "csistoragecapacities")}),
    27: frozenset(_flow("v1beta2") | _flow("v1beta3")),
    28: frozenset(_flow("v1beta2") | _flow("v1beta3")),
    29: frozenset(_flow("v1beta3")),
    30: frozenset(_flow("v1beta3")),
    31: frozenset(_flow("v1beta3")),
}  # 1.32 on: none (flowcontrol v1beta3 was removed in 1.32)

_LEVELS = ("all", "ga", "beta", "alpha")
_KEY_RE = re.compile(r"^(?:api/(all|ga|beta|alpha|v1)|v1|[a-z0-9.-]+/v\d+(?:(?:alpha|beta)\d+)?(?:/[a-z0-9-]+)?)$")


def parse_runtime_config(raw) -> dict[str, bool]:
    """A fleet file's ``runtimeConfig`` (a mapping, or the flag's ``key=value,...`` text) as
    {key: enabled}; ``api/v1`` is spelt ``v1``. ValueError names what is wrong."""
    if raw in (None, "", {}):
        return {}
    if isinstance(raw, str):
        pairs = []
        for part in raw.split(","):
            key, sep, value = part.strip().partition("=")
            pairs.append((key, value if sep else "true"))
    elif isinstance(raw, dict):
        pairs = list(raw.items())
    else:
        raise ValueError("runtimeConfig must be a mapping such as {api/beta: true, batch/v1: false}")  # noqa: TRY004
    out: dict[str, bool] = {}
    for key, value in pairs:
        key = str(key).strip()
        if not _KEY_RE.match(key):
            raise ValueError(
                f"runtimeConfig: bad key {key!r} (api/all, api/ga, api/beta, api/alpha, "
                f"<group>/<version> or <group>/<version>/<resource>)"
            )
        if isinstance(value, str) and value.lower() in ("true", "false"):
            value = value.lower() == "true"
        if not isinstance(value, bool):
            raise ValueError(f"runtimeConfig: {key} must be true or false, not {value!r}")  # noqa: TRY004
        out["v1" if key == "api/v1" else key] = value
    return out


def config_key(config: dict[str, bool] | None) -> tuple:
    return tuple(sorted((config or {}).items()))


def _stability(version: str) -> str:
    return "alpha" if "alpha" in version else "beta" if "beta" in version else "ga"


@functools.lru_cache(maxsize=16384)
def is_served(res: schemas.ApiResource, minor: int, key: tuple = ()) -> bool:
    """The apiserver's precedence: a resource's own entry, then its group-version's, then the
    stability level's (api/alpha...), then api/all, then the default."""
    config = dict(key)
    gv = res.group_version
    for name in (f"{gv}/{res.plural}", gv, f"api/{_stability(res.version)}", "api/all"):
        if name in config:
            return config[name]
    level = _stability(res.version)
    if level == "ga":
        return True
    if level == "alpha":
        return False
    return (gv, res.plural) in LEGACY_BETA.get(minor, frozenset())


@functools.lru_cache(maxsize=256)
def served_resources(minor: int, key: tuple = ()) -> tuple[schemas.ApiResource, ...]:
    return tuple(res for res in schemas.api_resources(minor) if is_served(res, minor, key))


@functools.lru_cache(maxsize=256)
def served_group_versions(minor: int, key: tuple = ()) -> frozenset[str]:
    return frozenset(res.group_version for res in served_resources(minor, key))
