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
- batch/v1 Job: ``spec.selector``, ``spec.template``, ``completionMode``, ``podFailurePolicy``,
  ``backoffLimitPerIndex``, ``managedBy`` and ``successPolicy`` (pkg/apis/batch/validation,
  ``ValidateJobSpecUpdate``, v1.33; the later fields exist only on the minors that serve them), and
  ``completions``, which an Indexed Job may change from v1.27 (ElasticIndexedJob, on by default) only
  in tandem with ``parallelism`` (``validateCompletions``: "can only be modified in tandem with
  spec.parallelism"). Compared as stored: SetDefaults_Job's completions, parallelism and
  completionMode, a pod failure rule's condition status "True", the pod template's defaults
  (SetDefaults_PodSpec, SetDefaults_Container, as far as clusters.simulator.defaults models them: not
  a volume's defaultMode, a fieldRef's apiVersion or a probe's timings), a null as the field left
  out. A Job suspended that never started may change its scheduling directives
  (``validatePodTemplateUpdate``, on by default from v1.23; its scheduling gates from v1.27);
- v1 ConfigMap and Secret: once stored with ``immutable: true``, ``data``, ``binaryData`` and
  ``immutable`` itself (pkg/apis/core/validation ``ValidateConfigMapUpdate`` /
  ``ValidateSecretUpdate``: Forbidden, "field is immutable when `immutable` is set"); a Secret's
  ``type`` never changes (``ValidateImmutableField``).

The fleet simulator answers with these causes; a change request's preflight reads the same table
to say, before anything is sent, which clusters would refuse an edit.
"""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass

from clusters.simulator.defaults import default_job, default_pod_spec

IMMUTABLE = "field is immutable"
IMMUTABLE_WHEN_SET = "field is immutable when `immutable` is set"
IN_TANDEM = "can only be modified in tandem with spec.parallelism"
ELASTIC_INDEXED_JOB_MINOR = 27  # ElasticIndexedJob beta, on by default (KEP-3715)
MUTABLE_SCHEDULING_MINOR = 23  # JobMutableNodeSchedulingDirectives beta, on by default (KEP-2926)
SCHEDULING_GATES_MINOR = 27  # a suspended Job's schedulingGates may change too (KEP-3521)
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
    ("batch", "Job"): tuple(
        ("spec", name)
        for name in (
            "selector",
            "template",
            "completionMode",
            "podFailurePolicy",
            "backoffLimitPerIndex",
            "managedBy",
            "successPolicy",
        )
    ),
    ("", "Secret"): (("type",),),
}
_STATEFULSET_FIXED = (("spec", "selector"), ("spec", "serviceName"))
_STATEFULSET_FORBIDDEN_PREFIX = "updates to statefulset spec for fields other than"
# kinds whose content is frozen once stored with immutable: true
_FROZEN_WHEN_IMMUTABLE = {("", "ConfigMap"): ("data", "binaryData"), ("", "Secret"): ("data",)}


def has_rules(group: str, kind: str) -> bool:
    """Whether any field of this kind is fixed once an object exists."""
    key = (group, kind)
    return key in _ALWAYS or key in _FROZEN_WHEN_IMMUTABLE or key == ("apps", "StatefulSet")


@dataclass(frozen=True)
class ImmutableChange:
    """One field an update would change that the apiserver refuses, as its 422 cause words it."""

    field: str
    reason: str  # a StatusCause reason: FieldValueInvalid | FieldValueForbidden
    message: str


_MISSING = object()


def _at(obj: dict, path: tuple[str, ...]):
    """The value at ``path``, empty maps and lists taken for absent (as apiequality.Semantic and Go's
    omitempty see them: ``matchExpressions: []`` is no selector change), and so is an empty string
    there (a Go string field's zero value: ``serviceName: ""`` is no serviceName)."""
    node = obj
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return _MISSING if node == "" else _pruned(node)


def _pruned(value):
    if isinstance(value, dict):
        pruned = {k: v for k, v in ((k, _pruned(v)) for k, v in value.items()) if v is not _MISSING}
        return pruned or _MISSING
    if isinstance(value, list):  # an empty item stays an item (``imagePullSecrets: [{}]``), as null
        return [None if item is _MISSING else item for item in map(_pruned, value)] or _MISSING
    return _MISSING if value is None else value


def _as_stored(group: str, kind: str, obj: dict) -> dict:
    """What the apiserver compares: a Secret's stringData folded into its data (base64), its type
    defaulted to Opaque; a Job's spec defaulted (SetDefaults_Job)."""
    if (group, kind) == ("batch", "Job"):
        return _job_as_stored(obj)
    if (group, kind) != ("", "Secret"):
        return obj
    data = dict(obj.get("data") or {})
    for key, value in (obj.get("stringData") or {}).items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    return {**obj, "data": data, "type": obj.get("type") or "Opaque"}


def _job_as_stored(obj: dict) -> dict:
    spec = copy.deepcopy(obj.get("spec") or {})
    if not isinstance(spec, dict):
        return obj
    default_job(spec)
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        default_pod_spec(template["spec"])  # writing a default out is no template change
    policy = spec.get("podFailurePolicy")
    for rule in (policy.get("rules") if isinstance(policy, dict) else None) or []:
        patterns = rule.get("onPodConditions") if isinstance(rule, dict) else None
        for pattern in patterns if isinstance(patterns, list) else []:
            if isinstance(pattern, dict) and not pattern.get("status"):
                pattern["status"] = "True"
    return {**obj, "spec": spec}


def _scheduling_mutable(old: dict, minor: int | None) -> bool:
    """A Job suspended that never started may change where its pods go (validationOptionsForJob:
    old spec.suspend and no status.startTime; from v1.23, on by default)."""
    spec, status = old.get("spec"), old.get("status")
    if not isinstance(spec, dict) or not (status is None or isinstance(status, dict)):
        return False
    mutable_minor = minor is None or minor >= MUTABLE_SCHEDULING_MINOR
    return mutable_minor and spec.get("suspend") is True and not (status or {}).get("startTime")


def _with_scheduling_of(new: dict, old: dict, *, gates: bool) -> dict:
    """``old`` with ``new``'s scheduling directives (validatePodTemplateUpdate): node selector,
    tolerations, the template's labels and annotations, node affinity (only that part of the
    affinity), and from v1.27 scheduling gates."""
    new_spec = new.get("spec")
    template = copy.deepcopy(old["spec"].get("template") or {})
    new_template = (new_spec.get("template") if isinstance(new_spec, dict) else None) or {}
    if not isinstance(template, dict) or not isinstance(new_template, dict):
        return old
    pod, new_pod = template.setdefault("spec", {}), new_template.get("spec") or {}
    meta, new_meta = template.setdefault("metadata", {}), new_template.get("metadata") or {}
    if not all(isinstance(part, dict) for part in (pod, new_pod, meta, new_meta)):
        return old
    for key in ("labels", "annotations"):
        _copy_key(new_meta, meta, key)
    for key in ("nodeSelector", "tolerations", *(("schedulingGates",) if gates else ())):
        _copy_key(new_pod, pod, key)
    affinity, new_affinity = pod.get("affinity"), new_pod.get("affinity")
    if isinstance(new_affinity, dict):
        affinity = dict(affinity) if isinstance(affinity, dict) else {}
        _copy_key(new_affinity, affinity, "nodeAffinity")
        pod["affinity"] = affinity
    elif isinstance(affinity, dict):
        rest = {k: v for k, v in affinity.items() if k != "nodeAffinity"}
        if any(v is not None for v in rest.values()):
            pod["affinity"] = rest
        else:
            pod.pop("affinity", None)
    return {**old, "spec": {**old["spec"], "template": template}}


def _copy_key(source: dict, target: dict, key: str) -> None:
    if key in source:
        target[key] = copy.deepcopy(source[key])
    else:
        target.pop(key, None)


def _completions_change(new: dict, old: dict, minor: int | None) -> ImmutableChange | None:
    """validateCompletions: a change of completions is refused, but for an Indexed Job (from
    v1.27) that sets it to its parallelism."""
    path = ("spec", "completions")
    completions = _at(new, path)
    if completions == _at(old, path):
        return None
    elastic = minor is None or minor >= ELASTIC_INDEXED_JOB_MINOR
    if elastic and _at(new, ("spec", "completionMode")) == "Indexed":
        if completions is _MISSING or completions == _at(new, ("spec", "parallelism")):
            return None
        return ImmutableChange(
            "spec.completions", "FieldValueInvalid", f"Invalid value: {_shown(completions)}: {IN_TANDEM}"
        )
    return ImmutableChange(
        "spec.completions", "FieldValueInvalid", f"Invalid value: {_shown(completions)}: {IMMUTABLE}"
    )


def stored_after_apply(group: str, kind: str, manifest: dict, applied: dict) -> dict:
    """What an apply of ``manifest`` by the manager that applied ``applied`` leaves stored, as far as
    this table compares it: a field neither sets is nobody's and keeps its stored value. Only a Job's
    completions needs it (SetDefaults_Job defaults it only when parallelism is absent too: adding
    parallelism to a Job applied with neither leaves the defaulted completions as it is)."""
    if (group, kind) != ("batch", "Job"):
        return manifest
    spec, before = manifest.get("spec") or {}, applied.get("spec") or {}
    if not isinstance(spec, dict) or not isinstance(before, dict) or "completions" in spec or "completions" in before:
        return manifest
    stored = _job_as_stored(applied)["spec"].get("completions")
    return {**manifest, "spec": {**spec, "completions": stored}} if stored is not None else manifest


def _shown(value) -> str:
    return "null" if value is _MISSING else json.dumps(value, sort_keys=True, separators=(",", ":"))


def immutable_changes(
    group: str, kind: str, new: dict, old: dict, *, minor: int | None = None
) -> list[ImmutableChange]:
    """What of ``new`` (the object an update would store) kube-apiserver refuses against ``old``
    (the stored one): [] when the update may go ahead. ``minor``: the cluster's Kubernetes minor
    where a rule changed over the minors (None: the newest rules)."""
    new, old = _as_stored(group, kind, new), _as_stored(group, kind, old)
    if (group, kind) == ("batch", "Job") and _scheduling_mutable(old, minor):
        old = _with_scheduling_of(new, old, gates=minor is None or minor >= SCHEDULING_GATES_MINOR)
    changes = [
        ImmutableChange(".".join(path), "FieldValueInvalid", f"Invalid value: {_shown(_at(new, path))}: {IMMUTABLE}")
        for path in _ALWAYS.get((group, kind), ())
        if _at(new, path) != _at(old, path)
    ]
    if (group, kind) == ("batch", "Job") and (change := _completions_change(new, old, minor)):
        changes.insert(0, change)  # validateCompletions comes before the selector's check
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
    return IMMUTABLE in text or IN_TANDEM in text or _STATEFULSET_FORBIDDEN_PREFIX in text
