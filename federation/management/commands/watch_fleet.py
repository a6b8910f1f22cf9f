"""python manage.py watch_fleet [--name NAME] — the fleet watcher: one watch per (cluster,
federated type) over what FedPortal applied; drift and member status within seconds. Run one per
machine; several split the fleet through leases in the database (README: Scaling out)."""

from django.core.management.base import BaseCommand, CommandError

from federation import watching


class Command(BaseCommand):
    help = "Watch the member clusters for drift and status (runs until SIGTERM)."

    def add_arguments(self, parser):
        parser.add_argument("--name", default="", help="This watcher's name (default: host-pid); unique per process.")

    def handle(self, *args, **opts):
        name = opts["name"] or watching.default_watcher_name()
        self.stdout.write(f"watcher {name} starting")
        if not watching.serve(name):
            raise CommandError(f"watcher {name} stopped: its database threads were stuck (see the log)")
