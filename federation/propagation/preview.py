"""Preview: per target cluster, the rendered manifest and its diff against the live object."""

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from clusters import kube
from clusters.models import Cluster
from clusters.services import connection_for
from federation.choices import (
    TargetAction,
)
from federation.diffs import (
    SERVER_POPULATED,
    diff_desired_live,
    strip_server_fields,
    unified_yaml_diff,
)
from federation.manifests import dump_yaml
from federation.models import FederatedResource, Revision
from federation.overrides import OverrideError
from federation.preview_checks import manifest_warnings
from federation.preview_groups import without_own_metadata
from federation.propagation.common import kube_timeout, read_live, render_args
from federation.propagation.namespaces import missing_namespaces
from federation.propagation.planning import ClusterPlan, plan_targets
from federation.rendering import (
    MANAGED_LABEL,
    render_manifest,
)
from fedportal.masking import is_secret_kind, mask_secrets, secret_values

# --- preview -----------------------------------------------------------------------------------------


@dataclass
class ClusterPreview:
    cluster: Cluster
    action: str  # create / update / unchanged / delete / orphan / skip / error
    rendered_yaml: str = ""
    diff: str = ""
    replicas: int | None = None
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    live_replicas: int | None = None  # spec.replicas of the live object, to show replica moves


def preview_revision(resource: FederatedResource, revision: Revision | None = None) -> list[ClusterPreview]:
    """Per target cluster: the rendered YAML and its diff against the live object, or what would be
    created/deleted. Unreachable clusters are shown as errors, never raised."""
    revision = revision or resource.current_revision
    ftype = resource.type
    plans = plan_targets(resource, revision)
    secret = is_secret_kind(ftype.kind)
    known = secret_values(revision.snapshot, secret=True) if secret else ()

    def shown_preview(plan: ClusterPlan) -> ClusterPreview:
        preview = one(plan)
        if secret:  # an error message could quote a value (an override's, an API server's)
            preview.message = mask_secrets(preview.message, known=known)
            preview.warnings = mask_secrets(list(preview.warnings), secret=True, known=known)
        return preview

    no_namespace = missing_namespaces(resource, revision, plans)

    def one(plan: ClusterPlan) -> ClusterPreview:
        cluster = plan.cluster
        if plan.action == TargetAction.SKIP:
            return ClusterPreview(cluster, "skip", message=f"{plan.reason}: {plan.message}")
        try:
            conn = connection_for(cluster)
            live = read_live(conn, resource, timeout=min(kube_timeout(), 5.0))
        except (kube.KubeError, ValueError) as exc:
            return ClusterPreview(cluster, "error", message=f"Cannot read the live object: {exc}")
        preview = one_preview(plan, live)
        live_replicas = ((live or {}).get("spec") or {}).get("replicas")
        preview.live_replicas = live_replicas if isinstance(live_replicas, int) else None
        return preview

    def one_preview(plan: ClusterPlan, live) -> ClusterPreview:
        cluster = plan.cluster
        if plan.action in (TargetAction.DELETE, TargetAction.ORPHAN):
            verb = "delete" if plan.action == TargetAction.DELETE else "orphan"
            text = "will be deleted" if verb == "delete" else "will be left in place (retention Orphan)"
            return ClusterPreview(
                cluster, verb, message=f"Left the placement: {text}." if live else "Left the placement; nothing there."
            )
        try:
            manifest = render_manifest(
                overrides=revision.overrides,
                replicas=plan.replicas,
                **render_args(resource, revision, cluster, live=live),
            )
        except OverrideError as exc:
            return ClusterPreview(cluster, "error", message=str(exc))
        warnings = manifest_warnings(manifest, cluster)
        if cluster.name in no_namespace:
            warnings.insert(0, no_namespace[cluster.name])
        shown = without_own_metadata(mask_secrets(manifest, secret=secret))
        if live is None:
            message = (
                f"Cannot be created until namespace {resource.namespace} exists (NamespaceNotFederated)."
                if cluster.name in no_namespace
                else "Will be created."
            )
            return ClusterPreview(
                cluster,
                "create",
                dump_yaml(shown),
                unified_yaml_diff(None, shown, after_label="rendered"),
                plan.replicas,
                message,
                warnings,
            )
        if ((live.get("metadata") or {}).get("labels") or {}).get(MANAGED_LABEL) != "true":
            return ClusterPreview(
                cluster,
                "error",
                dump_yaml(shown),
                "",
                plan.replicas,
                "An object with this name exists and was not created by FedPortal (AlreadyExists).",
                warnings,
            )
        changes = diff_desired_live(manifest, live, ignore=SERVER_POPULATED)
        live_view = without_own_metadata(mask_secrets(_project(strip_server_fields(live), manifest), secret=secret))
        diff = unified_yaml_diff(live_view, shown, before_label="live", after_label="rendered")
        return ClusterPreview(
            cluster,
            "update" if changes else "unchanged",
            dump_yaml(shown),
            diff,
            plan.replicas,
            _change_message(changes, manifest, live),
            warnings,
        )

    # I/O-bound (one GET per cluster): a thread pool, results in plan order
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(plans)))) as pool:
        return list(pool.map(shown_preview, plans))


def _change_message(changes: list, manifest: dict, live: dict) -> str:
    """What the approver reads beside the diff. The diff leaves FedPortal's own labels and
    annotations out; when they are all that changes (a placement-only edit moves the revision
    annotation), "1 field(s) change." stood beside an empty diff."""
    if not changes:
        return "No change."
    if not diff_desired_live(without_own_metadata(manifest), without_own_metadata(live), ignore=SERVER_POPULATED):
        return "No change to the object: only FedPortal's own labels and annotations (the revision it records)."
    return f"{len(changes)} field(s) change."


def _project(live, desired):
    """The parts of ``live`` that ``desired`` sets, so a diff shows only what we manage."""
    if isinstance(live, dict) and isinstance(desired, dict):
        return {k: _project(live[k], desired[k]) for k in desired if k in live}
    if isinstance(live, list) and isinstance(desired, list) and len(live) == len(desired):
        return [_project(a, b) for a, b in zip(live, desired)]
    return live
