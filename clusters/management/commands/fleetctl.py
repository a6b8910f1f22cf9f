"""python manage.py fleetctl ... — switch faults, edit objects and change versions of a running
fleet simulator through its admin endpoint.

  fleetctl [--state PATH | --admin-url URL --admin-token T] list
  fleetctl down CLUSTER [--mode refused|503]      fleetctl up CLUSTER
  fleetctl drop-watches CLUSTER                    # cut every watch connection of the cluster
  fleetctl latency CLUSTER MS                      fleetctl errors CLUSTER SHARE
  fleetctl version CLUSTER v1.30.2                 fleetctl rollout CLUSTER SECONDS
  fleetctl capacity CLUSTER PODS|none             # schedulable pods; Deployments beyond it stay unready
  fleetctl rollout-fail CLUSTER on|off             # Deployments never become available
  fleetctl image-fail CLUSTER 'shop/web:2.*'|off  # Deployments with a matching image never pull it
  fleetctl kubelets CLUSTER v1.30.2 [--node NAME ...]   # a node upgrade (default: every node)
  fleetctl edit CLUSTER --api-version apps/v1 --kind Deployment -n NS NAME --patch '{"spec":{"replicas":5}}'
  fleetctl get CLUSTER --api-version apps/v1 --kind Deployment -n NS NAME
  fleetctl delete CLUSTER --api-version apps/v1 --kind Deployment -n NS NAME   # out-of-band deletion
  fleetctl stats

The state file defaults to $FLEET_STATE, else the first existing of var/demo/kubeconfig.state.json
(`make demo`), var/fleet/kubeconfig.state.json, var/fleet.state.json (runfleet writes
<kubeconfig stem>.state.json next to the kubeconfig).
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from clusters.simulator.kubeconfig import state_path_for


def pods_or_none(text: str) -> int | None:
    if text.lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of pods or 'none'") from None
    if value < 0:
        raise argparse.ArgumentTypeError("capacity cannot be negative")
    return value


def admin_call(
    admin_url: str,
    token: str,
    method: str,
    path: str,
    body: dict | None = None,
    ca_path: str | None = None,
    timeout: float = 10.0,
) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        admin_url.rstrip("/") + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    ctx = ssl.create_default_context(cafile=ca_path) if ca_path and admin_url.startswith("https") else None
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            payload = json.loads(exc.read())
            message = payload.get("message", str(payload))
        except ValueError:
            message = str(exc)
        raise CommandError(f"{exc.code}: {message}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise CommandError(f"cannot reach the fleet admin endpoint {admin_url}: {exc}") from exc


class Command(BaseCommand):
    requires_system_checks: list = []  # the simulator must not depend on the rest of the project loading
    help = "Control a running fleet simulator (faults, external edits, versions)."

    def add_arguments(self, parser):
        parser.add_argument("--state", default=os.environ.get("FLEET_STATE", ""))
        parser.add_argument("--admin-url", default="")
        parser.add_argument("--admin-token", default="")
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list")
        sub.add_parser("stats")
        down = sub.add_parser("down")
        down.add_argument("cluster")
        down.add_argument("--mode", choices=["refused", "503"], default="refused")
        sub.add_parser("up").add_argument("cluster")
        sub.add_parser("drop-watches", help="Cut every open watch connection of a cluster.").add_argument("cluster")
        latency = sub.add_parser("latency")
        latency.add_argument("cluster")
        latency.add_argument("ms", type=int)
        errors = sub.add_parser("errors")
        errors.add_argument("cluster")
        errors.add_argument("share", type=float)
        version = sub.add_parser("version")
        version.add_argument("cluster")
        version.add_argument("git_version")
        kubelets = sub.add_parser("kubelets")
        kubelets.add_argument("cluster")
        kubelets.add_argument("git_version")
        kubelets.add_argument("--node", action="append", dest="nodes", help="a node to upgrade (repeatable)")
        rollout = sub.add_parser("rollout")
        rollout.add_argument("cluster")
        rollout.add_argument("seconds", type=float)
        rollout_fail = sub.add_parser("rollout-fail", help="Deployments on the cluster never become available.")
        rollout_fail.add_argument("cluster")
        rollout_fail.add_argument("switch", choices=["on", "off"])
        image_fail = sub.add_parser(
            "image-fail", help="Deployments whose image matches PATTERN (a glob) never pull it; 'off' clears it."
        )
        image_fail.add_argument("cluster")
        image_fail.add_argument("pattern")
        capacity = sub.add_parser("capacity", help="Schedulable pods of a cluster (none: no limit).")
        capacity.add_argument("cluster")
        capacity.add_argument("pods", type=pods_or_none)
        for name in ("edit", "get", "delete"):
            p = sub.add_parser(name)
            p.add_argument("cluster")
            p.add_argument("name")
            p.add_argument("--api-version", required=True)
            p.add_argument("--kind", required=True)
            p.add_argument("-n", "--namespace", default="")
            if name == "edit":
                p.add_argument("--patch", required=True, help="JSON merge patch")
                p.add_argument("--field-manager", default="kubectl-edit")

    def _target(self, opts) -> tuple[str, str, str | None]:
        if opts["admin_url"] and opts["admin_token"]:
            return opts["admin_url"], opts["admin_token"], None
        if opts["state"]:
            state = Path(opts["state"])
        else:
            candidates = [
                state_path_for(Path(p)) for p in ("var/demo/kubeconfig", "var/fleet/kubeconfig", "var/fleet.kubeconfig")
            ]
            state = next((p for p in candidates if p.exists()), candidates[0])
        try:
            data = json.loads(state.read_text())
        except (OSError, ValueError) as exc:
            raise CommandError(
                f"cannot read fleet state {state}: {exc} (give --state or --admin-url/--admin-token)"
            ) from exc
        return data["adminUrl"], data["adminToken"], data.get("caPath")

    def handle(self, *args, **opts):
        url, token, ca = self._target(opts)
        action = opts["action"]

        def call(method, path, body=None):
            return admin_call(url, token, method, path, body, ca)

        if action == "list":
            result = call("GET", "/clusters")
            for c in result["clusters"]:
                f = c["faults"]
                self.stdout.write(
                    f"{c['name']:<24} {c['role']:<7} {c['version']:<10} objects={c['objects']:<5} "
                    f"down={f['down'] or '-'} latency={f['latencyMs']}ms errors={f['errorRate']}"
                )
            return
        if action == "stats":
            self.stdout.write(json.dumps(call("GET", "/stats"), indent=1))
            return
        cluster = urllib.parse.quote(opts["cluster"], safe="")
        if action == "down":
            result = call("POST", f"/clusters/{cluster}/faults", {"down": opts["mode"]})
        elif action == "up":
            result = call("POST", f"/clusters/{cluster}/faults", {"down": None})
        elif action == "drop-watches":
            result = call("POST", f"/clusters/{cluster}/drop-watches", {})
        elif action == "latency":
            result = call("POST", f"/clusters/{cluster}/faults", {"latencyMs": opts["ms"]})
        elif action == "errors":
            result = call("POST", f"/clusters/{cluster}/faults", {"errorRate": opts["share"]})
        elif action == "version":
            result = call("POST", f"/clusters/{cluster}/version", {"gitVersion": opts["git_version"]})
        elif action == "kubelets":
            body = {"kubeletVersion": opts["git_version"]}
            if opts["nodes"]:
                body["nodes"] = opts["nodes"]
            result = call("POST", f"/clusters/{cluster}/kubelets", body)
        elif action == "rollout":
            result = call("POST", f"/clusters/{cluster}/rollout", {"seconds": opts["seconds"]})
        elif action == "rollout-fail":
            result = call("POST", f"/clusters/{cluster}/faults", {"rolloutFail": opts["switch"] == "on"})
        elif action == "image-fail":
            pattern = "" if opts["pattern"] == "off" else opts["pattern"]
            result = call("POST", f"/clusters/{cluster}/faults", {"imageFail": pattern})
        elif action == "capacity":
            result = call("POST", f"/clusters/{cluster}/capacity", {"pods": opts["pods"]})
        elif action == "edit":
            try:
                patch = json.loads(opts["patch"])
            except ValueError as exc:
                raise CommandError(f"--patch is not JSON: {exc}") from exc
            result = call(
                "POST",
                f"/clusters/{cluster}/edit",
                {
                    "apiVersion": opts["api_version"],
                    "kind": opts["kind"],
                    "namespace": opts["namespace"],
                    "name": opts["name"],
                    "mergePatch": patch,
                    "fieldManager": opts["field_manager"],
                },
            )
        elif action == "delete":
            result = call(
                "POST",
                f"/clusters/{cluster}/delete",
                {
                    "apiVersion": opts["api_version"],
                    "kind": opts["kind"],
                    "namespace": opts["namespace"],
                    "name": opts["name"],
                },
            )
        else:  # get
            query = urllib.parse.urlencode(
                {
                    "apiVersion": opts["api_version"],
                    "kind": opts["kind"],
                    "namespace": opts["namespace"],
                    "name": opts["name"],
                }
            )
            result = call("GET", f"/clusters/{cluster}/object?{query}")
        self.stdout.write(json.dumps(result, indent=1))
