"""Cluster upgrades through the approval workflow: a change request of kind ``upgrade`` whose plan
patches a member's Cluster API objects on its management cluster, the control plane first, then each
MachineDeployment (clusters.lifecycle reads them; every call goes through clusters.kube).

    request_upgrade(member, to, *, actor, scope="all") -> ChangeRequest     drafted and submitted
    plan_steps(managed, to, scope, policy) -> (target, steps)               the rules (UpgradeRefused)
    preflight_findings(member, to) -> [{"severity", "resource", "message"}]
    HANDLER                                                                 federation.approvals.kinds

The rules, checked when drafting, at approval and when applying (the seeds: one minor at a time;
Kubernetes' version-skew policy):

* the target is a full version (v1.30.4) of a minor the shipped schemas know (the preflight needs them);
* the control plane moves at most one minor per request (1.28 -> 1.30 is refused with the path
  1.28 -> 1.29 -> 1.30) and never down;
* workers are never newer than the control plane (a workers-only request ahead of it is refused);
* while the roll goes on, every worker kubelet stays within the target's skew policy: at most
  ``kubelet_max_older`` minors behind the new control plane.

The preflight checks every federated object FedPortal applied on the member against the target
version with the API-compatibility check (drift.compat); a removed or unserved API is P0 (blocking:
approval stops unless an admin overrides it, which approvals audits), an unknown field or invalid value
P1, a deprecated API P2, an unverifiable check P3.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from datetime import timedelta

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from clusters import kube, lifecycle, schemas
from clusters.choices import ClusterRole
from clusters.models import Cluster, ManagedCluster, machine_deployment_rolling_out
from clusters.services.connections import connection_for
from clusters.versions import parse_version
from drift import compat
from drift.choices import CompatProblemCode, CompatStatus, Severity
from drift.models import UpgradePlan, VersionPolicy
from drift.skew import HOST, MEMBER, ClusterVersion, SkewPolicy, evaluate_pair
from federation.approvals import services as approvals
from federation.approvals.choices import ChangeKind, ChangeState
from federation.approvals.choices import Severity as PreflightSeverity
from federation.approvals.kinds import BUSY
from federation.approvals.models import ChangeRequest
from federation.approvals.preflight import PreflightProblem
from federation.models import PropagatedVersion
from federation.rendering import content_hash
from fedportal.audit import record_event
from fedportal.roles import Role, require_role

logger = logging.getLogger(__name__)

SCOPES = ("all", "control-plane", "workers")
SYNC_GAP = timedelta(seconds=0.8)
SYNC_LEASE = timedelta(seconds=30)
STUCK_SECONDS = 900
MAX_VERSION_LENGTH = 64  # UpgradePlan.target_version / from_version
# a field or value the target's schema refuses fails the next apply (fieldValidation=Strict): the seeds'
# P0 (resource sync fails), as the change requests' compatibility preflight blocks it
_P0_CODES = {
    CompatProblemCode.API_REMOVED,
    CompatProblemCode.API_NOT_SERVED,
    CompatProblemCode.UNKNOWN_FIELD,
    CompatProblemCode.INVALID,
}
_P1_CODES = {CompatProblemCode.UNKNOWN_KIND}


# a release as Cluster API's KubeSemver reads one (util/version/version.go, Apache-2.0), without the
# pre-release and build suffix it also takes: the plan compares (minor, patch) only
RELEASE_RE = re.compile(r"^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$", re.ASCII)


class UpgradeRefused(ValueError):
    """The upgrade may not be requested (or approved, or applied); the message says why."""


def _label(v) -> str:
    return f"{v.major}.{v.minor}"


def parse_target(text: str):
    if len((text or "").strip()) > MAX_VERSION_LENGTH:
        raise UpgradeRefused(
            f"{(text or '').strip()[:40]}… is not a Kubernetes version FedPortal can record: a version is at most "
            f"{MAX_VERSION_LENGTH} characters; give a full version like v1.30.4."
        )
    version = parse_version((text or "").strip(), full=True)
    if version is None:
        raise UpgradeRefused(f"{text!r:.40} is not a Kubernetes version: give a full version like v1.30.4.")
    if not RELEASE_RE.match(text.strip()):
        raise UpgradeRefused(
            f"{text.strip()!r:.40} is not a Kubernetes release an upgrade can target: give v, then major.minor.patch "
            "without leading zeros, like v1.30.4 (Cluster API refuses leading zeros; a pre-release or build suffix "
            "is not compared as Kubernetes orders releases, so it could hide a downgrade)."
        )
    if version.major != 1 or version.minor not in schemas.SUPPORTED_MINORS:
        known = f"v1.{schemas.SUPPORTED_MINORS[0]}–v1.{schemas.SUPPORTED_MINORS[-1]}"
        raise UpgradeRefused(
            f"v{version.major}.{version.minor} is not a Kubernetes version FedPortal's schemas know ({known}): "
            "its API-compatibility preflight cannot check it."
        )
    return version


def plan_steps(managed: ManagedCluster, to: str, scope: str = "all", policy: SkewPolicy | None = None):
    """(target gitVersion, steps) for upgrading ``managed`` to ``to``; UpgradeRefused with the reason."""
    policy = policy or SkewPolicy()
    if scope not in SCOPES:
        raise UpgradeRefused(f"Unknown scope {scope!r}: one of {', '.join(SCOPES)}.")
    target = parse_target(to)
    text = (to or "").strip()
    _refuse_unsettled(managed)
    cp_text, cp = current_control_plane(managed)
    steps = []
    if scope != "workers":
        if (target.minor, target.patch) < (cp.minor, cp.patch):
            raise UpgradeRefused(
                f"{text} is older than the control plane's {cp_text}: Kubernetes control planes are never downgraded."
            )
        if target.minor - cp.minor > 1:
            path = " → ".join(f"1.{m}" for m in range(cp.minor, target.minor + 1))
            raise UpgradeRefused(
                f"{cp_text} → {text} skips {target.minor - cp.minor - 1} minor version(s): upgrade one minor at a "
                f"time, {path} (one request per step)."
            )
        if (target.minor, target.patch) != (cp.minor, cp.patch):
            steps.append(_step("controlPlane", (managed.control_plane or {}).get("name", ""), cp_text, text))
    planes = target if scope != "workers" else cp
    if scope == "workers" and (target.minor, target.patch) > (cp.minor, cp.patch):
        raise UpgradeRefused(
            f"Workers are never newer than the control plane: {managed.name}'s control plane runs {cp_text}, "
            f"so its MachineDeployments cannot go to {text}; upgrade the control plane first."
        )
    max_older = policy.kubelet_max_older(planes)
    for md in managed.machine_deployments or []:
        md_version = parse_version(md.get("version", ""), full=True)
        if md_version is None:
            raise UpgradeRefused(f"MachineDeployment {md['name']} reports no readable version.")
        if scope != "control-plane" and (target.minor, target.patch) < (md_version.minor, md_version.patch):
            raise UpgradeRefused(f"{md['name']} runs {md['version']}: {text} would downgrade its nodes.")
        oldest_text, oldest = _oldest_kubelet(managed, md, md_version)
        behind = planes.minor - oldest.minor
        if behind > max_older:
            raise UpgradeRefused(
                f"{md['name']} runs kubelet {oldest_text}, {behind} minors behind a {_label(planes)} control plane; "
                f"the skew policy allows {max_older}: upgrade those workers first."
            )
        if scope != "control-plane" and md["version"] != text:
            steps.append(_step("machineDeployment", md["name"], md["version"], text))
    if scope != "workers":
        _refuse_probed_kubelets_behind(managed, planes, max_older)
    if not steps:
        raise UpgradeRefused(f"{managed.name} already runs {text} everywhere this request covers: nothing to upgrade.")
    return text, steps


def _refuse_probed_kubelets_behind(managed: ManagedCluster, planes, max_older: int) -> None:
    """The kubelets the member's own probe saw (its node list) against the control plane's new version:
    the Machines' reports miss nodes no MachineDeployment owns (a MachinePool's, one joined by hand),
    and a kubelet changed on a node after its Machine reported it."""
    member = managed.member
    for node, version in sorted(((member.kubelet_versions or {}) if member else {}).items()):
        parsed = parse_version(version or "", full=True)
        if parsed is not None and planes.minor - parsed.minor > max_older:
            raise UpgradeRefused(
                f"Node {node} of {member.name} runs kubelet {version}, {planes.minor - parsed.minor} minors behind a "
                f"{_label(planes)} control plane; the skew policy allows {max_older}: upgrade that node first."
            )


def _key(v) -> tuple[int, int]:
    return (v.minor, v.patch)


def _refuse_unsettled(managed: ManagedCluster) -> None:
    """Cluster API's topology controller's rule: a control plane is still upgrading while its declared
    spec.version differs from the version its status reports, or while its controller has not observed
    the latest spec (observedGeneration != generation); no new upgrade starts on top of that."""
    cp = managed.control_plane or {}
    declared, reported = cp.get("version", ""), cp.get("statusVersion", "")
    if reported and declared != reported:
        raise UpgradeRefused(
            f"{managed.name}'s control plane is still upgrading: it declares {declared:.64} but reports "
            f"{reported:.64}; wait until Cluster API has finished (or fix the stuck machines) before requesting "
            "another upgrade."
        )
    if cp.get("observedGeneration") != cp.get("generation"):
        raise UpgradeRefused(
            f"{managed.name}'s control plane has not yet acted on its latest spec (observed generation "
            f"{cp.get('observedGeneration')}, generation {cp.get('generation')}); wait until Cluster API has "
            "caught up before requesting an upgrade."
        )


def current_control_plane(managed: ManagedCluster):
    """(text, version) of what the control plane runs: the lowest of its declared spec.version, the
    version its status reports and its Machines' versions (a patched spec the controller never rolled
    out does not count as running). UpgradeRefused when the declared version cannot be read."""
    cp = managed.control_plane or {}
    declared = cp.get("version", "")
    lowest = parse_version(declared, full=True)
    if lowest is None:
        raise UpgradeRefused(f"The control plane of {managed.name} reports no readable version ({declared!r:.40}).")
    text = declared
    seen = [cp.get("statusVersion", "")]
    for m in managed.machines or []:
        if m.get("role") == "control-plane":
            seen += [m.get("version", ""), m.get("kubelet", "")]
    for candidate in seen:
        parsed = parse_version(candidate or "", full=True)
        if parsed is not None and _key(parsed) < _key(lowest):
            lowest, text = parsed, candidate
    return text, lowest


def _oldest_kubelet(managed: ManagedCluster, md: dict, declared):
    """(text, version) of the oldest kubelet of a MachineDeployment: its Machines' reported kubelet (else
    spec) versions, and its template's version."""
    text, oldest = md.get("version", ""), declared
    for m in managed.machines or []:
        if m.get("role") == "control-plane" or m.get("owner") != md.get("name"):
            continue
        candidate = m.get("kubelet") or m.get("version") or ""
        parsed = parse_version(candidate, full=True)
        if parsed is not None and _key(parsed) < _key(oldest):
            oldest, text = parsed, candidate
    return text, oldest


def _step(kind: str, name: str, frm: str, to: str) -> dict:
    return {
        "kind": kind,
        "name": name,
        "from": frm,
        "to": to,
        "state": "pending",
        "started_at": None,
        "finished_at": None,
        "message": "",
    }


def _problem_severity(code: str) -> str:
    if code in _P0_CODES:
        return Severity.P0
    if code in _P1_CODES:
        return Severity.P1
    return Severity.P3


def preflight_findings(member: Cluster, to: str) -> list[dict]:
    """Every federated object FedPortal applied on ``member``, checked against ``to``; and the fleet's
    host/member skew rule once ``member`` runs ``to`` (``host_skew_findings``)."""
    minor = parse_target(to).minor
    findings = host_skew_findings(member, to)
    present = (
        PropagatedVersion.objects.filter(cluster=member)
        .select_related("resource")
        .order_by("resource__namespace", "resource__name")
    )
    for pv in present:
        if not pv.is_present:
            continue
        manifest = pv.applied_manifest
        where = str(pv.resource)
        result = compat.check_manifest(manifest, minor)
        if result.status == CompatStatus.UNVERIFIABLE:
            findings.append({"severity": Severity.P3, "resource": where, "message": _join(result)})
        elif result.status == CompatStatus.INCOMPATIBLE:
            for problem in result.problems:
                findings.append(
                    {"severity": _problem_severity(problem.code), "resource": where, "message": problem.message}
                )
        deprecated = schemas.deprecation_warning(minor, manifest.get("apiVersion", ""), manifest.get("kind", ""))
        if deprecated:
            findings.append({"severity": Severity.P2, "resource": where, "message": deprecated})
    return findings


def host_skew_findings(member: Cluster, to: str) -> list[dict]:
    """What drift.skew's host/member rule says of ``member`` running ``to``, where the upgrade takes it
    ahead of a host (a member behind a host only gets closer): P1 a member newer than the host, P0
    further ahead than the policy allows (the skew matrix's own findings, made before the upgrade;
    it was accepted and approvable, and the matrix showed the P0 once it had rolled)."""
    policy = VersionPolicy.load().as_skew_policy()
    after = ClusterVersion(member.name, MEMBER, to)
    findings = []
    hosts = Cluster.objects.filter(role=ClusterRole.HOST).exclude(pk=member.pk).only("name", "server_version")
    for host in hosts.order_by("name"):
        verdict = evaluate_pair(ClusterVersion(host.name, HOST, host.server_version), after, policy)
        for finding in verdict.findings:
            if finding.difference is not None and finding.difference < 0:  # the member ahead of the host
                findings.append(
                    {"severity": finding.severity, "resource": f"host {host.name}", "message": finding.message}
                )
    return findings


def _join(result) -> str:
    return " ".join(p.message for p in result.problems[:3]) or "cannot be verified"


# --- drafting ---------------------------------------------------------------------------------


def open_upgrade(member: Cluster, exclude: int | None = None) -> ChangeRequest | None:
    """The cluster's upgrade request that is open or applying (None: none), but for ``exclude``."""
    states = (*ChangeState.open(), ChangeState.APPLYING)
    found = ChangeRequest.objects.filter(kind=ChangeKind.UPGRADE, cluster=member, state__in=states)
    if exclude is not None:
        found = found.exclude(pk=exclude)
    return found.first()


def _managed(member: Cluster) -> ManagedCluster:
    """The Cluster API cluster of ``member`` as the last poll read it (seconds old: each step's patch
    is a compare-and-set on the version the rules judged, ``_start_step``)."""
    managed = lifecycle.managed_row(member)
    if managed is None:
        raise UpgradeRefused(
            f"{member.name} is not managed by Cluster API on any registered management cluster "
            "(see the Lifecycle page): FedPortal cannot upgrade it."
        )
    return managed


def request_upgrade(member: Cluster, to: str, *, actor, scope: str = "all", description: str = "") -> ChangeRequest:
    """Draft and submit "Upgrade ``member`` to ``to``" (operators). Refused (UpgradeRefused, nothing
    written) when a rule says no; the preflight's findings go on the request."""
    require_role(actor, Role.OPERATOR)
    # one request at a time per cluster: the open-upgrade check, the draft and its submit hold the
    # cluster's row, and a refusal at submit leaves no draft behind (two requests at once left one)
    with transaction.atomic():
        Cluster.objects.select_for_update().filter(pk=member.pk).exists()
        managed = _managed(member)
        other = open_upgrade(member)
        if other is not None:
            raise UpgradeRefused(f"CR-{other.pk} already upgrades {member.name} ({other.get_state_display()}).")
        if reasons := managed.rolling_reasons:
            raise UpgradeRefused(
                f"{member.name}'s machines are still rolling ({'; '.join(reasons)}); wait until the roll has finished."
            )
        target, steps = plan_steps(managed, to, scope, VersionPolicy.load().as_skew_policy())
        findings = preflight_findings(member, target)
        cr = ChangeRequest.objects.create(
            kind=ChangeKind.UPGRADE,
            title=(f"Upgrade {member.name} to {target}" + ("" if scope == "all" else f" ({scope})"))[:200],
            description=description or "",
            author=actor,
            author_name=actor.get_username(),
            cluster=member,
            cluster_name=member.name,
        )
        plan = UpgradePlan.objects.create(
            change_request=cr,
            member=member,
            managed=managed,
            scope=scope,
            from_version=current_control_plane(managed)[0][:MAX_VERSION_LENGTH],
            target_version=target,
            steps=steps,
            findings=findings,
            stuck_seconds=STUCK_SECONDS,
        )
        ChangeRequest.objects.filter(pk=cr.pk).update(proposed_hash=HANDLER.content_hash(cr))
        record_event(
            "approvals.change.create",
            actor=actor,
            obj=cr,
            cluster=member.name,
            summary=f"Drafted CR-{cr.pk}: {cr.title}",
            after={"kind": cr.kind, "target": target, "scope": scope, "steps": _step_names(plan.steps)},
        )
        return approvals.submit(cr, actor=actor)


def _step_names(steps) -> list[str]:
    return [f"{s['kind']} {s['name']} {s['from']} → {s['to']}" for s in steps]


# --- the handler approvals calls --------------------------------------------------------------


def _plan(cr: ChangeRequest) -> UpgradePlan:
    return UpgradePlan.objects.select_related("managed__management", "member").get(change_request_id=cr.pk)


class UpgradeHandler:
    """federation.approvals.kinds handler of ChangeKind.UPGRADE."""

    def targets(self, cr):
        return [cr.cluster] if cr.cluster_id else []

    def content_hash(self, cr) -> str:
        plan = UpgradePlan.objects.filter(change_request_id=cr.pk).first()
        if plan is None:
            return ""
        steps = [(s["kind"], s["name"], s["to"]) for s in plan.steps]
        return content_hash({"upgrade": cr.cluster_id, "to": plan.target_version, "scope": plan.scope, "steps": steps})

    def check(self, cr) -> None:
        """The rules again (approval, apply): against what the management cluster says now."""
        plan = _plan(cr)
        if cr.cluster_id is None:
            raise UpgradeRefused("The cluster to upgrade is no longer registered.")
        managed = _managed(cr.cluster)
        if plan.managed_id != managed.pk:
            raise UpgradeRefused(
                f"{cr.cluster_name} is now linked to another Cluster API cluster ({managed}) than the one this "
                "request was drafted for; cancel it and request again."
            )
        other = open_upgrade(cr.cluster, exclude=cr.pk)
        if other is not None:
            raise UpgradeRefused(f"CR-{other.pk} already upgrades {cr.cluster_name}.")
        if reasons := managed.rolling_reasons:  # Cluster API holds a control-plane upgrade while machines roll
            raise UpgradeRefused(
                f"{cr.cluster_name}'s machines are rolling ({'; '.join(reasons)}); wait until the roll has finished."
            )
        _target, steps = plan_steps(managed, plan.target_version, plan.scope, VersionPolicy.load().as_skew_policy())
        if [(s["kind"], s["name"], s["from"]) for s in steps] != [
            (s["kind"], s["name"], s["from"]) for s in plan.steps
        ]:
            raise UpgradeRefused(
                f"{cr.cluster_name}'s versions or machines changed since the request was drafted; cancel it and request again."
            )

    def start(self, cr, *, actor) -> None:
        """Approved -> Applying, inside the approval's transaction: nothing is sent from here. The
        first step's patch was made while that transaction held the database's write lock (every write
        of the portal waited on the management cluster), and a worker killed after the patch rolled the
        request back to Approved with the roll going on unwatched. The first sync, after the commit,
        starts it (``_advance``: a pending step), as it starts every later one."""
        plan = _plan(cr)
        plan.last_progress_at = timezone.now()
        plan.save()

    def sync(self, cr):
        """One pass; BUSY (and no follow-up) when another pass holds the plan or ran within
        SYNC_GAP: duplicate sync chains (a beat safety net, a repeated apply) die out here."""
        now = timezone.now()
        taken = (
            UpgradePlan.objects.filter(change_request_id=cr.pk)
            .filter(Q(synced_at__isnull=True) | Q(synced_at__lt=now - SYNC_GAP))
            .update(synced_at=now + SYNC_LEASE)
        )
        if not taken:
            return BUSY
        plan = _plan(cr)
        try:
            return _advance(plan)
        finally:
            plan.synced_at = timezone.now()
            plan.save()


HANDLER = UpgradeHandler()


def _audit_step(plan: UpgradePlan, action: str, step: dict, summary: str, actor=None) -> None:
    record_event(
        f"lifecycle.upgrade.{action}",
        actor=actor,
        obj=plan.change_request,
        cluster=plan.member.name if plan.member else "",
        summary=summary,
        after={k: step.get(k) for k in ("kind", "name", "from", "to", "state", "message")},
    )


def _start_step(plan: UpgradePlan, step: dict, *, actor=None) -> None:
    """Patch the CAPI object of ``step`` on the management cluster (through clusters.kube)."""
    managed = plan.managed
    if managed is None:
        raise UpgradeRefused("The Cluster API cluster is no longer known.")
    conn = connection_for(managed.management)
    api_version, plural, path = _object_of(step)
    # a JSON patch whose test makes it a compare-and-set: it changes the version only while the object
    # still declares the one the rules judged (a kubectl edit meanwhile would otherwise be overwritten,
    # a downgrade included: Cluster API's webhook does not refuse one)
    operations = [
        {"op": "test", "path": path, "value": step["from"]},
        {"op": "replace", "path": path, "value": step["to"]},
    ]
    try:
        kube.json_patch_object(
            conn,
            api_version=api_version,
            plural=plural,
            namespace=managed.namespace,
            name=step["name"],
            patch=operations,
        )
    except kube.KubeError as exc:
        if _declares(conn, managed, api_version, plural, step["name"], path) != step["to"]:
            raise UpgradeRefused(
                f"Patching {plural} {step['name']} on {managed.management.name} failed: {exc.message} (it is "
                f"changed only while it still declares {step['from']}: was it changed outside FedPortal?)"
            ) from exc
        # it declares the target already: this step's patch landed, and its record did not (a worker
        # killed in between, a database error): the step is started
    step.update(state="running", started_at=timezone.now().isoformat(), message="")
    plan.last_progress_at = timezone.now()
    plan.progress_marker = ""
    _audit_step(plan, "step_started", step, f"CR-{plan.change_request_id}: {_step_names([step])[0]} started", actor)


def _object_of(step: dict) -> tuple[str, str, str]:
    """The API version, resource and version field of the object ``step`` patches."""
    if step["kind"] == "controlPlane":
        return lifecycle.CP_GV, "kubeadmcontrolplanes", "/spec/version"
    return lifecycle.CAPI_GV, "machinedeployments", "/spec/template/spec/version"


def _declares(conn, managed: ManagedCluster, api_version: str, plural: str, name: str, path: str) -> str | None:
    """The version the object declares at ``path`` now (None when it cannot be read)."""
    try:
        obj = kube.get_object(conn, api_version=api_version, plural=plural, namespace=managed.namespace, name=name)
    except Exception:  # noqa: BLE001 - unreadable: the patch's own failure is what is reported
        return None
    for key in path.strip("/").split("/"):
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj if isinstance(obj, str) else None


def _step_done(managed: ManagedCluster, step: dict) -> bool:
    """Cluster API's own "rolled out": the status observed this generation, every replica updated
    and ready, no extra machine left (status.replicas == spec.replicas)."""
    if step["kind"] == "controlPlane":
        cp = managed.control_plane or {}
        machines = [m for m in managed.machines if m["role"] == "control-plane"]
        return (
            cp.get("version") == step["to"]
            and cp.get("statusVersion") == step["to"]
            and cp.get("observedGeneration") == cp.get("generation")
            and cp.get("replicas") == cp.get("statusReplicas") == cp.get("updatedReplicas") == cp.get("readyReplicas")
            and all(m["phase"] == "Running" and m["version"] == step["to"] for m in machines)
        )
    md = next((d for d in managed.machine_deployments if d["name"] == step["name"]), None)
    return md is not None and md["version"] == step["to"] and not machine_deployment_rolling_out(md)


def _declared_now(managed: ManagedCluster, step: dict) -> str | None:
    """The version the running step's object declares as last read (None: not there to read)."""
    if step["kind"] == "controlPlane":
        return (managed.control_plane or {}).get("version")
    md = next((d for d in managed.machine_deployments if d["name"] == step["name"]), None)
    return md["version"] if md is not None else None


def _upgraded_parts(plan: UpgradePlan) -> str:
    """What the finished plan upgraded, in words: the control plane, the workers, or both."""
    kinds = {s["kind"] for s in plan.steps}
    if kinds == {"controlPlane"}:
        return "control plane; workers not upgraded"
    if "controlPlane" not in kinds:
        return "workers"
    return "control plane and workers"


def _marker(managed: ManagedCluster) -> str:
    phases = sorted((m["name"], m["phase"]) for m in managed.machines)
    return hashlib.sha256(json.dumps(phases).encode()).hexdigest()[:32]


def _advance(plan: UpgradePlan):
    """One look at the roll: the running step done -> the next one starts; no progress for
    ``stuck_seconds`` -> the upgrade halts with the reason. Returns None while working."""
    step = plan.current_step
    if step is None:
        return ChangeState.APPLIED, f"{plan.member.name if plan.member else 'cluster'} runs {plan.target_version}."
    managed = plan.managed
    if managed is None:
        return _fail(plan, step, "The Cluster API cluster (or its management cluster) is no longer registered.")
    read_error = ""
    try:
        lifecycle.refresh(managed.management)
    except kube.KubeError as exc:
        logger.warning("upgrade CR-%s: reading %s failed: %s", plan.change_request_id, managed.management.name, exc)
        read_error = f"cannot read the Cluster API objects on {managed.management.name} ({exc.message.rstrip('.')})"
    managed = ManagedCluster.objects.select_related("management").filter(pk=managed.pk).first()
    if managed is None:
        plan.managed = None
        return _fail(plan, step, "The Cluster API cluster (or its management cluster) is no longer registered.")
    plan.managed = managed
    if managed.gone:
        return _fail(plan, step, f"{managed} is no longer on its management cluster {managed.management.name}.")
    now = timezone.now()
    if step["state"] == "pending":
        return _start_or_fail(plan, step)
    if _step_done(managed, step):
        step.update(state="done", finished_at=now.isoformat(), message="")
        _audit_step(plan, "step_done", step, f"CR-{plan.change_request_id}: {_step_names([step])[0]} done")
        following = plan.current_step
        if following is None:
            return ChangeState.APPLIED, f"{managed.name} runs {plan.target_version} ({_upgraded_parts(plan)})."
        return _start_or_fail(plan, following)
    declared = _declared_now(managed, step)
    if not read_error and declared is not None and declared != step["to"]:
        # read again from the cluster itself: the stored summary may be a poll's that listed before our patch
        api_version, plural, path = _object_of(step)
        declared = _declares(connection_for(managed.management), managed, api_version, plural, step["name"], path)
    if not read_error and declared is not None and declared != step["to"]:
        # changed after our patch (a kubectl edit, a downgrade): the roll it waits for will never come
        return _fail(
            plan,
            step,
            f"{_step_names([step])[0]}: {step['name']} now declares {declared}, not {step['to']}: it was changed "
            "outside FedPortal after the upgrade set it. The upgrade is halted; find out who changed it, then "
            "request the rest again.",
        )
    marker = _marker(managed)
    if marker != plan.progress_marker:
        plan.progress_marker, plan.last_progress_at = marker, now
        return None
    idle = (now - (plan.last_progress_at or now)).total_seconds()
    if idle >= plan.stuck_seconds and read_error:
        # what FedPortal last read shows no progress because it cannot read: say that, not "fix the machines"
        return _fail(
            plan,
            step,
            f"{_step_names([step])[0]}: {read_error}; nothing seen of the roll for {int(idle)} s. The upgrade is "
            "halted here (Cluster API may still be rolling it): check the management cluster, then request the "
            "rest again.",
        )
    if idle >= plan.stuck_seconds:
        waiting = [f"{m['name']} ({m['phase']})" for m in managed.machines if m["phase"] != "Running"]
        reason = (
            f"{_step_names([step])[0]}: no machine changed phase for {int(idle)} s"
            + (f"; waiting on {', '.join(waiting[:5])}" if waiting else "")
            + ". The upgrade is halted; fix the machines, then request the rest again."
        )
        return _fail(plan, step, reason)
    return None


def _fail(plan: UpgradePlan, step: dict, reason: str):
    """The step failed: the upgrade halts (the request ends Failed with ``reason``); the steps after it
    are never started (``skipped``: shown as pending they read as still to come)."""
    step.update(state="failed", finished_at=timezone.now().isoformat(), message=reason)
    for later in plan.steps[plan.steps.index(step) + 1 :]:
        if later["state"] == "pending":
            later.update(state="skipped", message=f"Not started: the upgrade halted at {step['kind']} {step['name']}.")
    _audit_step(plan, "step_failed", step, f"CR-{plan.change_request_id}: {reason}")
    return ChangeState.FAILED, reason


def _start_or_fail(plan: UpgradePlan, step: dict):
    try:
        _start_step(plan, step)
    except (UpgradeRefused, kube.KubeError) as exc:
        message = getattr(exc, "message", "") or str(exc)
        reason = f"{_step_names([step])[0]}: {message.rstrip('.')}. The upgrade is halted; request the rest again."
        return _fail(plan, step, reason)
    return None


# --- the preflight approvals runs -------------------------------------------------------------


def upgrade_preflight(cr) -> list[PreflightProblem]:
    """An upgrade's findings at drafting and approval: P0 blocks (admin override), the rest warn; the
    rules are re-checked too (a rule broken since drafting blocks)."""
    if cr.kind != ChangeKind.UPGRADE:
        return []
    plan = UpgradePlan.objects.filter(change_request_id=cr.pk).select_related("member").first()
    if plan is None or plan.member is None:
        return []
    try:
        findings = preflight_findings(plan.member, plan.target_version)
    except UpgradeRefused as exc:
        return [PreflightProblem(cr.cluster_name, PreflightSeverity.BLOCKING, str(exc))]
    UpgradePlan.objects.filter(pk=plan.pk).update(findings=findings)
    return [
        PreflightProblem(
            cr.cluster_name,
            PreflightSeverity.BLOCKING if f["severity"] == Severity.P0 else PreflightSeverity.WARNING,
            f"{f['severity']} {f['resource']} at {plan.target_version}: {f['message']}",
        )
        for f in findings
    ]


def refuse_reason(exc: Exception) -> str:
    if isinstance(exc, PermissionDenied):
        return str(exc) or "Permission denied."
    return str(exc)


# --- the compliance report's lifecycle sections -------------------------------------------------


def lifecycle_compliance() -> dict:
    """ "Clusters behind the fleet's target version" and "upgrades in progress".

    The fleet's target version is the newest control-plane version among the CAPI-managed members
    (what the fleet has shown it can run); a member whose control plane is older is behind it."""
    managed = list(ManagedCluster.objects.filter(gone=False, member__isnull=False).select_related("member"))
    versions = {m.member.name: (m.control_plane or {}).get("version", "") for m in managed}
    parsed = {name: parse_version(v, full=True) for name, v in versions.items()}
    known = [v for v in parsed.values() if v is not None]
    target = max(known, key=lambda v: (v.major, v.minor, v.patch)) if known else None
    target_text = next((versions[n] for n, v in parsed.items() if v is not None and v == target), "")
    behind = []
    if target is not None:
        for name in sorted(parsed):
            v = parsed[name]
            if v is None or (v.major, v.minor, v.patch) < (target.major, target.minor, target.patch):
                behind.append(
                    {
                        "cluster": name,
                        "version": versions[name] or "unknown",
                        "target": target_text,
                        "minors_behind": (target.minor - v.minor) if v is not None else None,
                    }
                )
    running = []
    plans = {
        plan.change_request_id: plan
        for plan in UpgradePlan.objects.filter(
            change_request__kind=ChangeKind.UPGRADE, change_request__state=ChangeState.APPLYING
        ).only("change_request_id", "target_version", "steps")
    }
    for cr in (
        ChangeRequest.objects.filter(kind=ChangeKind.UPGRADE, state=ChangeState.APPLYING)
        .only("pk", "cluster_name")
        .order_by("pk")
    ):
        plan = plans.get(cr.pk)
        step = plan.current_step if plan else None
        running.append(
            {
                "change_request": cr.pk,
                "cluster": cr.cluster_name,
                "target": plan.target_version if plan else "",
                "step": _step_names([step])[0] if step else "",
                "done": sum(1 for s in (plan.steps if plan else []) if s["state"] == "done"),
                "steps": len(plan.steps) if plan else 0,
            }
        )
    return {"target": target_text, "behind": behind, "in_progress": running}


def lifecycle_csv_rows(data: dict):
    yield ["section", "cluster", "version", "target", "detail"]
    for row in data["behind"]:
        yield [
            "behind target",
            row["cluster"],
            row["version"],
            row["target"],
            f"{row['minors_behind']} minor(s) behind",
        ]
    for row in data["in_progress"]:
        yield [
            "upgrade in progress",
            row["cluster"],
            "",
            row["target"],
            f"CR-{row['change_request']}: step {row['done'] + 1} of {row['steps']}, {row['step']}",
        ]
