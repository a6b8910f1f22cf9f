"""python manage.py import_kubeconfig PATH [--context NAME ...] [--label k=v ...] [--host CONTEXT]"""

from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from django.utils import timezone

from clusters import services
from clusters.validators import parse_label_pairs


class Command(BaseCommand):
    help = "Register clusters from a kubeconfig's contexts (all of them unless --context is given)."

    def add_arguments(self, parser):
        parser.add_argument("path", help="kubeconfig file ('-' reads standard input)")
        parser.add_argument("--context", action="append", dest="contexts", default=[], metavar="NAME",
                            help="a context to import (repeatable; default: every context)")
        parser.add_argument("--label", action="append", dest="labels", default=[], metavar="KEY=VALUE",
                            help="a label for every imported cluster (repeatable)")
        parser.add_argument("--host", dest="host_context", default=None, metavar="CONTEXT",
                            help="the context that is the host cluster (default: all are members)")
        parser.add_argument("--skip-connection-check", action="store_true",
                            help="register without testing each connection first")
        parser.add_argument("--update-existing", action="store_true",
                            help="a cluster already registered under the same name gets the kubeconfig's API server, "
                                 "TLS settings and credentials (instead of a duplicate-name error)")

    def handle(self, path, contexts, labels, host_context, skip_connection_check, update_existing=False, **options):
        if path == "-":
            import sys

            text, base_dir = sys.stdin.read(), Path.cwd()
        else:
            file = Path(path).expanduser()
            try:
                text = file.read_text()
            except OSError as exc:
                raise CommandError(f"Cannot read {file}: {exc.strerror}") from None
            base_dir = file.resolve().parent
        started = timezone.now()
        try:
            parsed_labels = parse_label_pairs(" ".join(labels))
            created = services.import_kubeconfig_contexts(
                text,
                contexts=contexts or None,
                labels=parsed_labels,
                host_context=host_context,
                verify=not skip_connection_check,
                base_dir=base_dir,
                update_existing=update_existing,
            )
        except ValidationError as exc:
            raise CommandError("Nothing was imported:\n  " + "\n  ".join(exc.messages)) from None
        for cluster in created:
            self.stdout.write(
                f"{'registered' if cluster.created_at >= started else 'up to date':<11}{cluster.name:<30} {cluster.role:<7} {cluster.server_version or '?':<12} {cluster.api_server}"
            )
        self.stdout.write(self.style.SUCCESS(f"Imported {len(created)} cluster(s); first probes are queued."))
