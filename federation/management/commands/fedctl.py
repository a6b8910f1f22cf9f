"""fedctl: KubeFed-style command line for federated resources.

    fedctl apply -f FILE [--cluster-map cluster1=east,cluster2=west] [--dry-run]
    fedctl plan NS/NAME [--kind KIND] [-o json]     where it goes, with how many replicas, and why
    fedctl get [-o table|json|yaml]
    fedctl propagate NS/NAME --as ADMIN [--reason TEXT] [--kind KIND] [--wait] [--timeout SECONDS]
        the audited emergency path: propagates without approval, flagged in the change-request list
    fedctl submit NS/NAME --as USER [--kind KIND]        drafts and submits a change request; prints its id
    fedctl approve ID --as USER [--comment TEXT]
    fedctl reject ID --as USER --comment TEXT
    fedctl requests [--state STATE] [-o table|json]
    fedctl status NS/NAME [--kind KIND] [-o json|yaml]
    fedctl upgrade CLUSTER --to VERSION --as USER [--scope all|control-plane|workers]
        a Cluster API upgrade through approvals; the change request id is the last line
    fedctl lifecycle CLUSTER [-o json|table]     control plane, MachineDeployments, Machines
    fedctl enable KIND --group GROUP --version VERSION [--plural PLURAL] [--cluster-scoped]
    fedctl rollout status CR_ID [-o json] [--watch]     a staged rollout's waves, clusters and failed gate
    fedctl rollout pause|resume|abort|rollback|approve CR_ID --as USER [--reason TEXT]

Cluster-scoped resources (Namespace) are named without a namespace: ``fedctl status shop --kind Namespace``.
"""

import argparse
import json
import sys
import time

import yaml
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from federation import propagation, selectors, services, watching
from federation.approvals import services as approvals
from federation.approvals.models import ChangeRequest
from federation.health import shown_sync_state
from federation.manifests import MAX_MANIFEST_BYTES
from fedportal.masking import is_secret_kind, mask_secrets, secret_values


def _cluster_map(text: str) -> dict[str, str]:
    mapping = {}
    for pair in filter(None, (p.strip() for p in (text or "").split(","))):
        source, sep, target = pair.partition("=")
        if not sep or not source.strip() or not target.strip():
            raise CommandError(f"--cluster-map entries look like cluster1=east, got {pair!r}.")
        mapping[source.strip()] = target.strip()
    return mapping


def positive_id(text: str) -> int:
    """A change request's id for argparse: a positive whole number (-1 was read, and "CR--1 has no
    staged rollout" said)."""
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a change request id (a positive whole number)")
    return int(text)


def _read_capped(filename: str) -> bytes:
    """The file's (or stdin's) bytes, at most one past the manifest limit (the loader then refuses it
    with the limit): ``-f /dev/zero`` read without end."""
    limit = MAX_MANIFEST_BYTES + 1
    if filename == "-":
        return getattr(sys.stdin, "buffer", sys.stdin).read(limit)
    with open(filename, "rb") as stream:
        return stream.read(limit)


class Command(BaseCommand):
    help = "Apply KubeFed/plain YAML, list, propagate and inspect federated resources."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="verb", required=True)
        apply = sub.add_parser("apply", help="Create or update federated resources from a YAML file.")
        apply.add_argument("-f", "--filename", required=True, help="YAML file ('-' for stdin).")
        apply.add_argument("--cluster-map", default="", help="Map KubeFed cluster names: cluster1=east,cluster2=west")
        apply.add_argument("--dry-run", action="store_true", help="Validate only; save nothing.")
        get = sub.add_parser("get", help="List federated resources.")
        get.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table")
        prop = sub.add_parser(
            "propagate", help="Admin emergency path: propagate the current revision without approval."
        )
        prop.add_argument("target", help="NS/NAME (or NAME for cluster-scoped)")
        prop.add_argument("--kind", default="")
        prop.add_argument("--as", dest="username", required=True, help="An admin; the bypass is audited as theirs.")
        prop.add_argument(
            "--reason", default="emergency propagation with fedctl", help="Recorded on the flagged request."
        )
        prop.add_argument(
            "--wait", action="store_true", help="Wait until every cluster is done or failed (needs a worker)."
        )
        prop.add_argument("--timeout", type=float, default=300.0)
        status = sub.add_parser("status", help="Per-cluster status, message and propagated version.")
        status.add_argument("target")
        status.add_argument("--kind", default="")
        status.add_argument("-o", "--output", choices=["json", "yaml"], default="yaml")
        plan = sub.add_parser(
            "plan",
            help="Where the resource goes and why: per cluster weight, min, max, current, "
            "capacity, planned replicas, overflow and the reason.",
        )
        plan.add_argument("target", help="NS/NAME (or NAME for cluster-scoped)")
        plan.add_argument("--kind", default="")
        plan.add_argument("-o", "--output", choices=["table", "json"], default="table")
        # Change requests: the same verbs as `manage.py changes`, which does the work.
        submit = sub.add_parser("submit", help="Draft and submit a change request for the current revision.")
        submit.add_argument("target")
        submit.add_argument("--kind", default="")
        submit.add_argument("--as", dest="username", required=True)
        for verb, needs_comment in (("approve", False), ("reject", True)):
            decide = sub.add_parser(verb, help=f"{verb.capitalize()} a submitted change request.")
            decide.add_argument("id", type=int)
            decide.add_argument("--as", dest="username", required=True)
            decide.add_argument("--comment", default="", required=needs_comment)
        sub.choices["approve"].add_argument(
            "--content-hash",
            default=None,
            help="What you reviewed (the request's content hash): refused if it changed.",
        )
        upgrade = sub.add_parser("upgrade", help="Request a Cluster API upgrade of a cluster (change request).")
        upgrade.add_argument("cluster")
        upgrade.add_argument("--to", required=True, dest="to")
        upgrade.add_argument("--as", dest="username", required=True)
        upgrade.add_argument("--scope", choices=["all", "control-plane", "workers"], default="all")
        lifecycle = sub.add_parser(
            "lifecycle", help="A cluster's Cluster API control plane, MachineDeployments, Machines."
        )
        lifecycle.add_argument("cluster")
        lifecycle.add_argument("-o", "--output", choices=["table", "json"], default="table")
        requests = sub.add_parser("requests", help="List change requests.")
        requests.add_argument("--state", default="")
        requests.add_argument("-o", "--output", choices=["table", "json"], default="table")
        rollout = sub.add_parser("rollout", help="A staged rollout: status, pause, resume, abort, rollback, approve.")
        rollout.add_argument("action", choices=["status", "pause", "resume", "abort", "rollback", "approve"])
        rollout.add_argument("id", type=positive_id, help="The change request's id.")
        rollout.add_argument("--as", dest="username", default="", help="Who acts (every action but status).")
        rollout.add_argument("--reason", default="", help="Recorded with abort and rollback.")
        rollout.add_argument(
            "--wave", default=None, help="approve: the wave you saw waiting (refused if another waits)."
        )
        rollout.add_argument("-o", "--output", choices=["table", "json"], default="table")
        rollout.add_argument("--watch", action="store_true", help="Print again every 2 s until the rollout ends.")
        rollout.add_argument("--timeout", type=float, default=3600.0, help="How long --watch waits at most.")
        watchers = sub.add_parser(
            "watchers", help="Each fleet watcher, its clusters and their watch health (connected, last event, ...)."
        )
        watchers.add_argument("--unhealthy", action="store_true", help="Only clusters whose watch is not healthy.")
        watchers.add_argument("-o", "--output", choices=["table", "json"], default="table")
        enable = sub.add_parser("enable", help="Enable a federated type (like kubefedctl enable).")
        enable.add_argument("kind")
        enable.add_argument("--group", default="")
        enable.add_argument("--version", dest="type_version", required=True)
        enable.add_argument("--plural", default="")
        enable.add_argument("--cluster-scoped", action="store_true")

    def handle(self, *args, verb, **options):
        return getattr(self, f"do_{verb}")(**options) or None

    # -- verbs -------------------------------------------------------------------------------
    def do_apply(self, *, filename, cluster_map, dry_run, **_):
        try:
            text = _read_capped(filename)
        except OSError as exc:
            raise CommandError(f"Cannot read {filename}: {exc.strerror}.") from exc
        try:
            outcomes = services.apply_kubefed_file(text, cluster_map=_cluster_map(cluster_map), dry_run=dry_run)
        except services.FederationError as exc:
            raise CommandError(f"{filename}: {exc} Nothing was changed.") from exc
        for outcome in outcomes:
            self.stdout.write(f"{outcome}{' (dry run)' if dry_run else ''}")

    def do_get(self, *, output, **_):
        rows = []
        for resource in selectors.resources():
            rows.append(
                {
                    "kind": resource.type.kind,
                    "namespace": resource.namespace,
                    "name": resource.name,
                    "revision": resource.current_revision.number if resource.current_revision else None,
                    "propagatedRevision": resource.propagated_revision.number if resource.propagated_revision else None,
                    "condition": str(selectors.condition_from_counts(resource)),
                    "clusters": f"{resource.clusters_ok}/{resource.clusters_total}",
                }
            )
        if output == "json":
            self.stdout.write(json.dumps(rows, indent=2))
        elif output == "yaml":
            self.stdout.write(yaml.safe_dump(rows, sort_keys=False))
        else:
            header = ("KIND", "NAMESPACE", "NAME", "REVISION", "PROPAGATED", "CONDITION", "CLUSTERS OK")
            table = [header] + [
                tuple(
                    str(r[k] if r[k] is not None else "-")
                    for k in ("kind", "namespace", "name", "revision", "propagatedRevision", "condition", "clusters")
                )
                for r in rows
            ]
            widths = [max(len(row[i]) for row in table) for i in range(len(header))]
            for row in table:
                self.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())

    def do_watchers(self, *, unhealthy, output, **_):
        def when(value):
            return value.isoformat(timespec="seconds") if value else None

        result = {
            "watchers": [
                {
                    "name": w.name,
                    "host": w.host,
                    "pid": w.pid,
                    "alive": w.alive,
                    "heartbeat": when(w.heartbeat_at),
                    "clusters": w.clusters,
                    "connected": w.connected,
                }
                for w in watching.watcher_rows()
            ],
            "clusters": [
                {
                    "cluster": cw.cluster.name,
                    "watcher": cw.watcher.name if cw.watcher else None,
                    "healthy": not cw.unhealthy,
                    "connected": cw.connected,
                    "watches": cw.watches,
                    "lastEvent": when(cw.last_event_at),
                    "lastBookmark": when(cw.last_bookmark_at),
                    "reconnects": cw.reconnects,
                    "lastError": cw.last_error,
                }
                for cw in watching.cluster_watches(unhealthy_only=unhealthy).iterator()
            ],
        }
        if output == "json":
            self.stdout.write(json.dumps(result, indent=2))
            return
        if not result["watchers"]:
            self.stdout.write("No watcher is running (start one with: python manage.py watch_fleet).")
        for w in result["watchers"]:
            state = "alive" if w["alive"] else "SILENT"
            self.stdout.write(
                f"watcher {w['name']} ({w['host']} pid {w['pid']}): {state}, heartbeat {w['heartbeat']}, "
                f"{w['connected']}/{w['clusters']} clusters connected"
            )
        header = ("CLUSTER", "WATCHER", "HEALTHY", "WATCHES", "LAST EVENT", "LAST BOOKMARK", "RECONNECTS", "LAST ERROR")
        table = [header] + [
            (
                c["cluster"],
                c["watcher"] or "-",
                "yes" if c["healthy"] else "NO",
                str(c["watches"]),
                c["lastEvent"] or "-",
                c["lastBookmark"] or "-",
                str(c["reconnects"]),
                (c["lastError"] or "")[:80],
            )
            for c in result["clusters"]
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        for row in table:
            self.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())

    def _resource(self, target: str, kind: str):
        found = selectors.find_resources(target, kind=kind)
        if not found:
            raise CommandError(f"No federated resource {target}{' of kind ' + kind if kind else ''}.")
        if len(found) > 1:
            kinds = ", ".join(sorted(r.type.kind for r in found))
            raise CommandError(f"{target} names several resources ({kinds}); pick one with --kind.")
        return found[0]

    def do_propagate(self, *, target, kind, wait, timeout, username, reason, **_):
        resource = self._resource(target, kind)
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"No active user {username!r}.")
        try:
            request = approvals.emergency_apply(resource, actor=user, reason=reason)
        except PermissionDenied as exc:
            raise CommandError(
                f"Permission denied: {exc} (fedctl propagate is the admins' emergency path; "
                f"others use `fedctl submit`)."
            ) from exc
        except approvals.TransitionError as exc:
            raise CommandError(str(exc)) from exc
        run = request.runs.order_by("-pk").first()
        self.stderr.write(f"EMERGENCY change request CR-{request.pk} (audited).")
        self.stdout.write(
            f"Propagating revision {run.revision.number} of {resource} (run {run.pk}, {run.targets.count()} cluster(s))."
        )
        if not wait:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run.refresh_from_db()
            if run.finished_at:
                break
            time.sleep(0.5)
        else:
            progress = propagation.run_progress(run)
            raise CommandError(
                f"Timed out after {timeout:g}s: {progress.done} done, {progress.failed} failed, {progress.pending} pending."
            )
        for target_row in run.targets.select_related("cluster").order_by("cluster__name"):
            self.stdout.write(
                f"  {target_row.cluster.name}: {target_row.reason or target_row.state} {target_row.message}".rstrip()
            )
        self.stdout.write(f"Run {run.pk}: {run.state}")
        if run.state != "Succeeded":
            raise CommandError(f"Propagation {run.state}.")

    def do_submit(self, *, target, kind, username, **_):
        call_command(
            "changes", "submit", target, "--kind", kind, "--as", username, stdout=self.stdout, stderr=self.stderr
        )

    def do_approve(self, *, id, username, comment, content_hash=None, **_):
        call_command(
            "changes",
            "approve",
            str(id),
            "--as",
            username,
            "--comment",
            comment,
            *(["--content-hash", content_hash] if content_hash is not None else []),
            stdout=self.stdout,
            stderr=self.stderr,
        )

    def do_reject(self, *, id, username, comment, **_):
        call_command(
            "changes", "reject", str(id), "--as", username, "--comment", comment, stdout=self.stdout, stderr=self.stderr
        )

    def do_upgrade(self, *, cluster, to, username, scope, **_):
        # drift runs upgrades (drift.upgrades); fedctl passes the request on, as it does to `changes`
        call_command(
            "upgrades",
            "request",
            cluster,
            "--to",
            to,
            "--as",
            username,
            "--scope",
            scope,
            stdout=self.stdout,
            stderr=self.stderr,
        )

    def do_lifecycle(self, *, cluster, output, **_):
        call_command("upgrades", "lifecycle", cluster, "-o", output, stdout=self.stdout, stderr=self.stderr)

    def do_rollout(self, *, action, id, username, reason, output, watch, timeout, wave=None, **_):
        from federation.approvals import rollout as rollouts
        from federation.approvals.choices import RolloutState

        if action != "status":
            user = get_user_model().objects.filter(username=username, is_active=True).first()
            if user is None:
                raise CommandError(f"No active user {username!r} (give --as USER).")
            calls = {
                "pause": lambda: rollouts.pause_rollout(id, actor=user),
                "resume": lambda: rollouts.resume_rollout(id, actor=user),
                "abort": lambda: rollouts.abort_rollout(id, actor=user, reason=reason),
                "rollback": lambda: rollouts.rollback_rollout(id, actor=user, reason=reason),
                "approve": lambda: rollouts.approve_wave(id, actor=user, comment=reason, wave_name=wave),
            }
            try:
                calls[action]()
            except PermissionDenied as exc:
                raise CommandError(f"{username}: {exc}") from exc
            except rollouts.RolloutError as exc:
                raise CommandError(str(exc)) from exc
        deadline = time.monotonic() + timeout
        while True:
            status = rollouts.rollout_status(id)
            if status is None:
                if not ChangeRequest.objects.filter(pk=id).exists():
                    raise CommandError(f"There is no change request CR-{id}.")
                raise CommandError(f"CR-{id} has no staged rollout.")
            self._print_rollout(status, output)
            if not watch or status["state"] in RolloutState.terminal() or time.monotonic() > deadline:
                return
            time.sleep(2)

    def _print_rollout(self, status: dict, output: str) -> None:
        if output == "json":
            self.stdout.write(json.dumps(status, indent=2))
            return
        self.stdout.write(
            f"CR-{status['changeRequest']} rollout {status['state']}"
            + (f": {status['haltReason']}" if status["haltReason"] else "")
        )
        for index, wave in enumerate(status["waves"], 1):
            extra = f" bake {wave['bakeRemaining']}s left" if wave["bakeRemaining"] is not None else ""
            self.stdout.write(f"  {index}. {wave['name']:<16} {wave['state']:<10} {wave['progress']:>3}%{extra}")
            for name, state in wave["clusters"].items():
                self.stdout.write(f"       {name:<24} {state}")
            if wave["failedGate"]:
                self.stdout.write(f"     failed gate: {wave['failedGate']}")

    def do_requests(self, *, state, output, **_):
        call_command("changes", "list", "--state", state, "-o", output, stdout=self.stdout, stderr=self.stderr)

    def do_status(self, *, target, kind, output, **_):
        resource = self._resource(target, kind)
        rows = selectors.cluster_rows(resource)
        data = {
            "kind": resource.type.kind,
            "apiVersion": resource.type.api_version,
            "namespace": resource.namespace,
            "name": resource.name,
            "revision": resource.current_revision.number if resource.current_revision else None,
            "propagatedRevision": resource.propagated_revision.number if resource.propagated_revision else None,
            "condition": str(propagation.aggregate_condition(rows)),
            "clusters": [
                {
                    "cluster": row.cluster.name,
                    "status": row.status,
                    "message": row.message,
                    "version": row.version,
                    "revision": row.revision.number if row.revision else None,
                    "syncState": shown_sync_state(row.sync_state, row.cluster.state),
                    "lastSyncState": row.sync_state,
                    "drift": row.drift,
                    "remoteStatus": row.remote_status,
                    "propagatedAt": row.propagated_at.isoformat() if row.propagated_at else None,
                }
                for row in rows
            ],
        }
        if is_secret_kind(resource.type.kind):  # messages and drift never carry a Secret's values
            known = secret_values(
                [
                    resource.current_revision.snapshot if resource.current_revision else None,
                    *[row.applied_manifest for row in rows],
                ],
                secret=True,
            )
            data = mask_secrets(data, secret=True, known=known)
        self.stdout.write(json.dumps(data, indent=2) if output == "json" else yaml.safe_dump(data, sort_keys=False))

    def do_plan(self, *, target, kind, output, **_):
        from federation import schedule

        resource = self._resource(target, kind)
        revision = resource.current_revision
        if revision is None:
            raise CommandError(f"{target} has no revision to plan.")
        data = schedule.decision_as_dict(resource, revision, schedule.decide_for(resource, revision))
        if output == "json":
            self.stdout.write(json.dumps(data, indent=2))
            return
        self.stdout.write(
            f"{resource.type.kind} {resource.qualified_name}, revision {revision.number}: "
            + (f"placed on {', '.join(data['targets'])}" if data["targets"] else "placed on no cluster")
        )
        for line in (data["notPlaced"], data["note"]):
            if line:
                self.stdout.write(line)
        for name, why in sorted(data["excluded"].items()):
            self.stdout.write(f"  not placed on {name}: {why}")
        if not data["clusters"]:
            if not revision.scheduling:
                self.stdout.write("No replica scheduling preference: every cluster gets the template's replicas.")
            return
        header = ("CLUSTER", "WEIGHT", "MIN", "MAX", "CURRENT", "CAPACITY", "PLANNED", "OVERFLOW", "REPLICAS", "REASON")
        keys = (
            "cluster",
            "weight",
            "minReplicas",
            "maxReplicas",
            "current",
            "capacity",
            "planned",
            "overflow",
            "replicas",
            "reason",
        )
        table = [header] + [tuple("-" if row[k] is None else str(row[k]) for k in keys) for row in data["clusters"]]
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        for row in table:
            self.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())

    def do_enable(self, *, kind, group, type_version, plural, cluster_scoped, **_):
        from django.core.exceptions import ValidationError

        try:
            ftype = services.enable_type(
                kind=kind, group=group, version=type_version, plural=plural, namespaced=not cluster_scoped
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(f"Federated type {ftype.name} ({ftype.api_version} {ftype.kind}) is enabled.")
