"""python manage.py runfleet --fleet FLEET.yaml --port 8600 [--tls] --kubeconfig-out PATH

Runs the fleet simulator (clusters/simulator) until stopped. `--generate N --versions 1.25-1.33`
makes a generated fleet instead of reading a file.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
from pathlib import Path

from aiohttp import web
from django.core.management.base import BaseCommand, CommandError

from clusters.simulator import kubeconfig, tls
from clusters.simulator.fleet import FleetSpecError, generate_fleet, parse_fleet
from clusters.simulator.server import Fleet, build_app


class Command(BaseCommand):
    requires_system_checks: list = []  # the simulator must not depend on the rest of the project loading
    help = "Serve a simulated Kubernetes fleet (one apiserver per cluster under /clusters/<name>)."

    def add_arguments(self, parser):
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--fleet", help="fleet YAML file (see clusters/simulator/FLEET_FORMAT.md)")
        source.add_argument("--generate", type=int, metavar="N", help="generate a fleet of N clusters")
        parser.add_argument("--versions", default="1.25-1.33", help="version range for --generate")
        parser.add_argument(
            "--capi",
            action="store_true",
            help="with --generate: the host is a Cluster API management cluster managing every member",
        )
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8600)
        parser.add_argument("--tls", action="store_true", help="serve HTTPS with a generated CA")
        parser.add_argument(
            "--kubeconfig-out",
            default="var/fleet/kubeconfig",
            help="kubeconfig to write (the state file for fleetctl goes next to it)",
        )
        parser.add_argument(
            "--admin-token",
            default=os.environ.get("FLEET_ADMIN_TOKEN", ""),
            help="token for the /_fleet admin endpoint (random if not given)",
        )
        parser.add_argument(
            "--rollout-seconds", type=float, default=None, help="override every cluster's deployment roll-out delay"
        )

    def handle(self, *args, **opts):
        try:
            spec = (
                parse_fleet(opts["fleet"])
                if opts["fleet"]
                else generate_fleet(opts["generate"], opts["versions"], capi=opts["capi"])
            )
        except FleetSpecError as exc:
            raise CommandError(str(exc)) from exc
        if opts["rollout_seconds"] is not None:
            for cluster in spec.clusters:
                cluster.rollout_seconds = opts["rollout_seconds"]
        admin_token = opts["admin_token"] or secrets.token_hex(16)
        fleet = Fleet(spec, admin_token)
        kube_path = Path(opts["kubeconfig_out"]).resolve()
        ssl_ctx, ca_path = None, None
        if opts["tls"]:
            ca_path, cert, key = tls.generate(kube_path.parent / f"{kube_path.stem}-tls")
            ssl_ctx = tls.server_context(cert, key)
        scheme = "https" if ssl_ctx else "http"
        host = opts["host"]
        base_url = f"{scheme}://{host}:{opts['port']}"
        state_path = kubeconfig.write(
            kube_path, list(fleet.clusters.values()), base_url, admin_token, ca_path, os.getpid()
        )
        self.stdout.write(
            f"fleet simulator: {len(fleet.clusters)} clusters at {base_url}/clusters/<name>\n"
            f"kubeconfig: {kube_path}\nstate: {state_path}\n"
        )
        self.stdout.flush()
        asyncio.run(self._serve(fleet, host, opts["port"], ssl_ctx))

    async def _serve(self, fleet: Fleet, host: str, port: int, ssl_ctx) -> None:
        runner = web.AppRunner(build_app(fleet), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port, ssl_context=ssl_ctx, backlog=1024, reuse_address=True)
        await site.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        self.stdout.write("ready\n")
        self.stdout.flush()
        await stop.wait()
        await runner.cleanup()
