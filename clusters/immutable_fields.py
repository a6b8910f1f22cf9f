"""Fields kube-apiserver refuses to change on an object that exists (422 Invalid), per kind.

Data carried over from Kubernetes (Apache-2.0), the registry strategies' ValidateUpdate and the
validation they call:
- apps/v1 Deployment, ReplicaSet, DaemonSet: ``spec.selector`` (pkg/registry/apps/*/strategy.go,
  "disallow mutation of selector": ``ValidateImmutableField``, "field is immutable");
- apps/v1 StatefulSet: only a few spec fields may change (pkg/apis/apps/validation,
  ``ValidateStatefulSetUpdate``: one Forbidden cause on ``spec``, "updates to statefulset spec for
  fields other than ... are forbidden"; the list grew over the minors, and its wording with it). Only
  ``selector`` and ``serviceName`` are modelled, forbidden in every minor and never defaulted (a
  defaulted field such as podManagementPolicy would turn writing its default into a change); the
  message is the v1.27-v1.33 one;
- batch/v1 Job: ``spec.selector`` and ``spec.template`` (pkg/apis/batch/validation,
  ``ValidateJobSpecUpdate``; the scheduling directives a suspended Job may change are not modelled);
- v1 ConfigMap and Secret: once stored with ``immutable: true``, ``data``, ``binaryData`` and
  ``immutable`` itself (pkg/apis/core/validation ``ValidateConfigMapUpdate`` /
  ``ValidateSecretUpdate``: Forbidden, "field is immutable when `immutable` is set"); a Secret's
  ``type`` never changes (``ValidateImmutableField``).

The fleet simulator answers with these causes; a change request's preflight reads the same table
to say, before anything is sent, which clusters would refuse an edit.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

IMMUTABLE = "field is immutable"
IMMUTABLE_WHEN_SET = "field is immutable when `immutable` is set"
STATEFULSET_FORBIDDEN = (
    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', "
    "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
)

_SELECTOR = (("spec", "selector"),)
# (group, kind) -> paths that never change once the object exists
_ALWAYS: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {
    ("apps", "Deployment"): _SELECTOR,
    ("apps", "ReplicaSet"): _SELECTOR,
    ("apps", "DaemonSet"): _SELECTOR,
    ("batch", "Job"): (("spec", "selector"), ("spec", "template")),
    ("", "Secret"): (("type",),),
}
_STATEFULSET_FIXED = (("spec", "selector"), ("spec", "serviceName"))
_STATEFULSET_FORBIDDEN_PREFIX = "updates to statefulset spec for fields other than"
# kinds whose content is frozen once stored with immutable: true
_FROZEN_WHEN_IMMUTABLE = {("", "ConfigMap"): ("data", "binaryData"), ("", "Secret"): ("data",)}


@dataclass(frozen=True)
class ImmutableChange:
    """One field an update would change that the apiserver refuses, as its 422 cause words it."""

    field: str
    reason: str  # a StatusCause reason: FieldValueInvalid | FieldValueForbidden
    message: str


_MISSING = object()


def _at(obj: dict, path: tuple[str, ...]):
    """The value at ``path``, empty maps and lists taken for absent (as apiequality.Semantic and Go's
    omitempty see them: ``matchExpressions: []`` is no selector change)."""
    node = obj
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return _pruned(node)


def _pruned(value):
    if isinstance(value, dict):
        pruned = {k: v for k, v in ((k, _pruned(v)) for k, v in value.items()) if v is not _MISSING}
        return pruned or _MISSING
    if isinstance(value, list):
        return [_pruned(v) for v in value] or _MISSING
    return _MISSING if value is None else value


def _as_stored(group: str, kind: str, obj: dict) -> dict:
    """What the apiserver compares: a Secret's stringData folded into its data (base64), its type
    defaulted to Opaque."""
    if (group, kind) != ("", "Secret"):
        return obj
    data = dict(obj.get("data") or {})
    for key, value in (obj.get("stringData") or {}).items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    return {**obj, "data": data, "type": obj.get("type") or "Opaque"}


def _shown(value) -> str:
    return "null" if value is _MISSING else json.dumps(value, sort_keys=True, separators=(",", ":"))


def immutable_changes(group: str, kind: str, new: dict, old: dict) -> list[ImmutableChange]:
    """What of ``new`` (the object an update would store) kube-apiserver refuses against ``old``
    (the stored one): [] when the update may go ahead."""
    new, old = _as_stored(group, kind, new), _as_stored(group, kind, old)
    changes = [
        ImmutableChange(".".join(path), "FieldValueInvalid", f"Invalid value: {_shown(_at(new, path))}: {IMMUTABLE}")
        for path in _ALWAYS.get((group, kind), ())
        if _at(new, path) != _at(old, path)
    ]
    if (group, kind) == ("apps", "StatefulSet") and any(
        _at(new, path) != _at(old, path) for path in _STATEFULSET_FIXED
    ):
        changes.append(ImmutableChange("spec", "FieldValueForbidden", f"Forbidden: {STATEFULSET_FORBIDDEN}"))
    frozen = _FROZEN_WHEN_IMMUTABLE.get((group, kind))
    if frozen and old.get("immutable") is True:
        if new.get("immutable") is not True:
            changes.append(ImmutableChange("immutable", "FieldValueForbidden", f"Forbidden: {IMMUTABLE_WHEN_SET}"))
        changes.extend(
            ImmutableChange(key, "FieldValueForbidden", f"Forbidden: {IMMUTABLE_WHEN_SET}")
            for key in frozen
            if (new.get(key) or {}) != (old.get(key) or {})
        )
    return changes


def is_immutable_refusal(message: str) -> bool:
    """An apiserver's 422 says the update changed a field that cannot change."""
    text = message or ""
    return IMMUTABLE in text or _STATEFULSET_FORBIDDEN_PREFIX in text
