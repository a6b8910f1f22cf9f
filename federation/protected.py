"""Protected namespaces: objects FedPortal propagates only through an admin's audited emergency apply.

Setting ``FEDPORTAL_PROTECTED_NAMESPACES`` (default kube-system, kube-public, kube-node-lease): a
resource in one of them, or a federated Namespace of that name, gets no change request and no
ordinary propagation run (apply, delete, re-sync); ``emergency_apply`` still propagates it.
"""

from django.conf import settings

DEFAULT_PROTECTED_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")


def protected_namespaces() -> frozenset[str]:
    value = getattr(settings, "FEDPORTAL_PROTECTED_NAMESPACES", DEFAULT_PROTECTED_NAMESPACES)
    if isinstance(value, str):
        value = value.split(",")
    return frozenset(name.strip() for name in value if name and name.strip())


def protected_namespace_of(resource) -> str:
    """The protected namespace ``resource`` lives in (or is), else ""."""
    protected = protected_namespaces()
    if resource.namespace in protected:
        return resource.namespace
    if resource.type.kind == "Namespace" and not resource.namespace and resource.name in protected:
        return resource.name
    return ""


def protected_namespace_refusal(resource, *, emergency: bool = False) -> str:
    """Why ``resource`` may not be propagated this way ("" when it may)."""
    namespace = protected_namespace_of(resource)
    if not namespace or emergency:
        return ""
    return (
        f"{namespace} is a protected namespace: FedPortal propagates {resource} only through an admin's "
        "emergency apply, which is audited."
    )
