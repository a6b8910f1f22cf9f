"""Every change to the cluster registry happens here, with an explicit audit event.

Network calls go through clusters.kube. Bad input raises django.core.exceptions.ValidationError
(with field names where there is one) before anything is written.

A package (the module passed 800 lines); import from ``clusters.services`` as before:

    connections  connection_for, test_connection, validation shared by the others
    registry     register_cluster, update_cluster, rotate_credentials, unjoin_cluster (+ guards), set_isolation
    kubeconfig   import_kubeconfig_contexts, plan_kubeconfig_import, default_contexts
    health       probe_cluster (KubeFed thresholds), request_poll, poll_progress, fan_out_probes
"""

from clusters.services.connections import (
    AUDIT_FIELDS,
    FIELDS_READ_BY_CONNECTION_FOR,
    ConnectionTest,
    _apply_version,
    _check_tls,
    _credentials,
    _validate_cluster,
    _verify,
    connection_for,
    snapshot,
    test_connection,
)
from clusters.services.health import (
    PollProgress,
    ProbeOutcome,
    _acquire_lease,
    _next_state,
    _queue_probe_on_commit,
    _record_probe,
    fan_out_probes,
    poll_progress,
    probe_budget_seconds,
    probe_cluster,
    request_poll,
)
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
    _unjoin_guards,
    register_cluster,
    register_unjoin_guard,
    rotate_credentials,
    set_isolation,
    unjoin_blockers,
    unjoin_cluster,
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
    "ProbeOutcome",
    "UnjoinBlock",
    "cluster_name_for_context",
    "connection_for",
    "default_contexts",
    "fan_out_probes",
    "import_kubeconfig_contexts",
    "plan_kubeconfig_import",
    "poll_progress",
    "probe_budget_seconds",
    "probe_cluster",
    "register_cluster",
    "register_unjoin_guard",
    "request_poll",
    "rotate_credentials",
    "set_isolation",
    "snapshot",
    "test_connection",
    "unjoin_blockers",
    "unjoin_cluster",
    "update_cluster",
    # used by clusters.probing (batch probes share the single probe's semantics)
    "_acquire_lease",
    "_apply_version",
    "_check_tls",
    "_credentials",
    "_next_state",
    "_queue_probe_on_commit",
    "_record_probe",
    "_unjoin_guards",
    "_validate_cluster",
    "_verify",
]
