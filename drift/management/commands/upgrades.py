"""Cluster API upgrades and lifecycle from the command line (`fedctl upgrade` / `fedctl lifecycle` call this).

manage.py upgrades request CLUSTER --to VERSION --as USER [--scope all|control-plane|workers]
    drafts and submits the change request; its id is the last line; refused -> exit 1 with the reason
manage.py upgrades lifecycle CLUSTER [-o json|table]
"""

import json

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from clusters import lifecycle
from clusters.models import Cluster
from drift import upgrades
from federation.approvals.services import TransitionError


class Command(BaseCommand):
    help = "Request Cluster API upgrades through the approval workflow; show a cluster's lifecycle."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="verb", required=True)
        req = sub.add_parser("request", help="Request an upgrade (a change request of kind upgrade).")
        req.add_argument("cluster")
        req.add_argument("--to", required=True, dest="to", help="Target version, e.g. v1.30.4")
        req.add_argument("--as", required=True, dest="username", help="The operator requesting it.")
        req.add_argument("--scope", choices=upgrades.SCOPES, default="all")
        show = sub.add_parser("lifecycle", help="Control plane, MachineDeployments and Machines of a cluster.")
        show.add_argument("cluster")
        show.add_argument("-o", "--output", choices=["json", "table"], default="table")

    def handle(self, *args, verb, **options):
        cluster = Cluster.objects.filter(name=options["cluster"]).first()
        if cluster is None:
            raise CommandError(f"No registered cluster named {options['cluster']!r}.")
        if verb == "lifecycle":
            try:
                data = lifecycle.lifecycle_json(cluster)
            except lifecycle.LifecycleError as exc:
                raise CommandError(str(exc)) from None
            if options["output"] == "json":
                self.stdout.write(json.dumps(data, indent=2))
                return
            cp = data["controlPlane"]
            self.stdout.write(
                f"control plane  {cp['version']}  {cp['readyReplicas']}/{cp['replicas']} ready, "
                f"{cp['updatedReplicas']} updated"
            )
            for md in data["machineDeployments"]:
                self.stdout.write(
                    f"{md['name']}  {md['version']}  {md['readyReplicas']}/{md['replicas']} ready, "
                    f"{md['updatedReplicas']} updated"
                )
            for machine in data["machines"]:
                self.stdout.write(f"  {machine['name']}  {machine['phase']}  {machine['version']}")
            return
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user named {options['username']!r}.")
        try:
            cr = upgrades.request_upgrade(cluster, options["to"], actor=user, scope=options["scope"])
        except (upgrades.UpgradeRefused, TransitionError, PermissionDenied) as exc:
            raise CommandError(f"Refused: {upgrades.refuse_reason(exc)}") from None
        for step in cr.upgrade_plan.steps:
            self.stdout.write(f"step: {step['kind']} {step['name']} {step['from']} -> {step['to']}")
        for finding in cr.upgrade_plan.findings:
            self.stdout.write(f"preflight {finding['severity']}: {finding['resource']}: {finding['message']}")
        self.stdout.write(f"{cr.get_state_display()}, needs {cr.required_approvals} approval(s)")
        self.stdout.write(str(cr.pk))
