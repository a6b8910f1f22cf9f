"""Every change to the cluster registry happens here, with an explicit audit event.

Network calls go through clusters.kube. Bad input raises django.core.exceptions.ValidationError
(with field names where there is one) before anything is written.

A package (the module passed 800 lines); import from ``clusters.services`` as before:

    connections  connection_for, test_connection, validation shared by the others
    registry     register_cluster, update_cluster, rotate_credentials, unjoin_cluster (+ guards,
                 membership listeners: a cluster joined or was relabelled)
    (isolation: drift.services.isolate_cluster / restore_cluster, role-checked and audited)
    kubeconfig   import_kubeconfig_contexts, plan_kubeconfig_import, default_contexts
    health       request_poll, poll_progress ("poll now")
Probing (one or many clusters, KubeFed's thresholds) is clusters.probing.
"""

from clusters.services.connections import (
    AUDIT_FIELDS,
    FIELDS_READ_BY_CONNECTION_FOR,
    ConnectionTest,
    connection_for,
    snapshot,
    test_connection,
)
from clusters.services.health import PollProgress, poll_progress, request_poll
from clusters.services.kubeconfig import (
    ImportPlan,
    cluster_name_for_context,
    default_contexts,
    import_kubeconfig_contexts,
    plan_kubeconfig_import,
)
from clusters.services.registry import (
    CONNECTION_FIELDS,
    EDITABLE_FIELDS,
    UnjoinBlock,
    membership_changed,
    register_cluster,
    register_membership_listener,
    register_unjoin_guard,
    rotate_credentials,
    unjoin_blockers,
    unjoin_cluster,
    unregister_membership_listener,
    unregister_unjoin_guard,
    update_cluster,
)

__all__ = [
    "AUDIT_FIELDS",
    "CONNECTION_FIELDS",
    "EDITABLE_FIELDS",
    "FIELDS_READ_BY_CONNECTION_FOR",
    "ConnectionTest",
    "ImportPlan",
    "PollProgress",
    "UnjoinBlock",
    "cluster_name_for_context",
    "connection_for",
    "default_contexts",
    "import_kubeconfig_contexts",
    "membership_changed",
    "plan_kubeconfig_import",
    "poll_progress",
    "register_cluster",
    "register_membership_listener",
    "register_unjoin_guard",
    "request_poll",
    "rotate_credentials",
    "snapshot",
    "test_connection",
    "unjoin_blockers",
    "unjoin_cluster",
    "unregister_membership_listener",
    "unregister_unjoin_guard",
    "update_cluster",
]
