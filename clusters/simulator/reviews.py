"""SelfSubjectAccessReview and SelfSubjectReview, answered for the two identities a simulated
cluster has: the read-write token (cluster-admin) and the read-only token (get, list, watch).

As on a real cluster, every authenticated user may create both (the system:basic-user and
system:public-info-viewer roles); they are answered, never stored.
"""

from __future__ import annotations

READ_VERBS = ("get", "list", "watch")
SELF_REVIEWS = ("SelfSubjectAccessReview", "SelfSubjectReview", "SelfSubjectRulesReview")
ADMIN_USER = "system:serviceaccount:fleet:admin"
READONLY_USER = "system:serviceaccount:fleet:readonly"
_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:fleet", "system:authenticated"]


def user_info(can_write: bool) -> dict:
    return {
        "username": ADMIN_USER if can_write else READONLY_USER,
        "uid": "fleet-admin" if can_write else "fleet-readonly",
        "groups": list(_GROUPS),
    }


def access(spec: dict, can_write: bool) -> dict:
    """The status of a SelfSubjectAccessReview: the admin may do anything; the read-only user may
    read (resources and non-resource URLs) and nothing else (no opinion: allowed false, no reason)."""
    attributes = spec.get("resourceAttributes") or spec.get("nonResourceAttributes") or {}
    verb = attributes.get("verb", "")
    if can_write:
        return {
            "allowed": True,
            "reason": 'RBAC: allowed by ClusterRoleBinding "fleet-admin" of ClusterRole '
            '"cluster-admin" to ServiceAccount "admin/fleet"',
        }
    if verb in READ_VERBS:
        return {
            "allowed": True,
            "reason": 'RBAC: allowed by ClusterRoleBinding "fleet-readonly" of ClusterRole '
            '"view" to ServiceAccount "readonly/fleet"',
        }
    return {"allowed": False}


def answer(kind: str, obj: dict, can_write: bool) -> dict:
    """The review ``obj`` with its status filled in (metadata as the apiserver returns it)."""
    meta = obj.get("metadata") or {}
    obj["metadata"] = {k: v for k, v in meta.items() if k in ("name", "generateName")} or {}
    if kind == "SelfSubjectAccessReview":
        obj.setdefault("spec", {})
        obj["status"] = access(obj["spec"], can_write)
    elif kind == "SelfSubjectRulesReview":
        verbs = ["*"] if can_write else list(READ_VERBS)
        obj["status"] = {
            "resourceRules": [{"verbs": verbs, "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": verbs, "nonResourceURLs": ["*"]}],
            "incomplete": False,
        }
    elif kind == "SelfSubjectReview":
        obj["status"] = {"userInfo": user_info(can_write)}
    return obj
