"""A workload's selector against its pod template's labels, as apps/v1 validation checks them on
every create and update (Kubernetes pkg/apis/apps/validation, Apache-2.0: ValidateDeploymentSpec,
ValidateReplicaSetSpec, ValidateDaemonSetSpec, ValidateStatefulSetSpec): a selector with neither
matchLabels nor matchExpressions is invalid ("empty selector is invalid for deployment"), and the
template's labels must match it ("`selector` does not match template `labels`"). The fleet simulator
answers with these causes; FedPortal refuses such a template when it is saved."""

from __future__ import annotations

import json
from dataclasses import dataclass

from clusters.labels import label_selector_requirements, matches

# kind -> the word its validation uses in "empty selector is invalid for <word>" (ReplicaSet's says deployment)
_EMPTY_WORD = {
    "Deployment": "deployment",
    "ReplicaSet": "deployment",
    "DaemonSet": "daemonset",
    "StatefulSet": "statefulset",
}
MISMATCH = "`selector` does not match template `labels`"


@dataclass(frozen=True)
class SelectorProblem:
    field: str
    value: object
    detail: str

    @property
    def cause(self) -> dict:
        """The apiserver's 422 cause."""
        shown = json.dumps(self.value, sort_keys=True, separators=(",", ":"))
        return {"reason": "FieldValueInvalid", "field": self.field, "message": f"Invalid value: {shown}: {self.detail}"}


def selector_problems(group: str, kind: str, obj) -> list[SelectorProblem]:
    """What apps/v1 validation refuses in ``obj``'s selector; [] for other kinds, a missing selector
    (the schema's required field) or one that is not well formed (reported elsewhere)."""
    if group != "apps" or kind not in _EMPTY_WORD or not isinstance(obj, dict):
        return []
    spec = obj.get("spec")
    selector = spec.get("selector") if isinstance(spec, dict) else None
    requirements = label_selector_requirements(selector)
    if requirements is None:
        return []
    if not requirements:
        return [SelectorProblem("spec.selector", selector, f"empty selector is invalid for {_EMPTY_WORD[kind]}")]
    template = spec.get("template")
    metadata = template.get("metadata") if isinstance(template, dict) else None
    labels = (metadata.get("labels") if isinstance(metadata, dict) else None) or {}
    if not isinstance(labels, dict) or matches(labels, requirements):
        return []
    return [SelectorProblem("spec.template.metadata.labels", labels, MISMATCH)]
