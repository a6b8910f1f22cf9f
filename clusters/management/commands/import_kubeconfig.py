"""python manage.py import_kubeconfig PATH [--context NAME ...] [--label k=v ...] [--labels-from-context REGEX]
[--host CONTEXT] [--skip-existing | --update-existing]"""

from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from clusters.services.kubeconfig import import_kubeconfig
from clusters.validators import parse_label_pairs


class Command(BaseCommand):
    help = "Register clusters from a kubeconfig's contexts (all of them unless --context is given)."

    def add_arguments(self, parser):
        parser.add_argument("path", help="kubeconfig file ('-' reads standard input)")
        parser.add_argument(
            "--context",
            action="append",
            dest="contexts",
            default=[],
            metavar="NAME",
            help="a context to import (repeatable; default: every context)",
        )
        parser.add_argument(
            "--label",
            action="append",
            dest="labels",
            default=[],
            metavar="KEY=VALUE",
            help="a label for every imported cluster (repeatable)",
        )
        parser.add_argument(
            "--host",
            dest="host_context",
            default=None,
            metavar="CONTEXT",
            help="the context that is the host cluster (default: all are members)",
        )
        parser.add_argument(
            "--skip-connection-check", action="store_true", help="register without testing each connection first"
        )
        parser.add_argument(
            "--update-existing",
            action="store_true",
            help="a cluster already registered under the same name gets the kubeconfig's API server, "
            "TLS settings and credentials (instead of a duplicate-name error)",
        )
        parser.add_argument(
            "--skip-existing",
            action="store_true",
            help="skip contexts whose cluster name or API server is already registered, and say which "
            "(instead of failing the whole import)",
        )
        parser.add_argument(
            "--labels-from-context",
            dest="label_pattern",
            default="",
            metavar="REGEX",
            help="a regular expression matched against each context name; its named groups become "
            "labels, e.g. '(?P<region>[a-z]+-[a-z]+-[0-9])-(?P<env>prod|staging)'",
        )

    def handle(
        self,
        path,
        contexts,
        labels,
        host_context,
        skip_connection_check,
        update_existing=False,
        skip_existing=False,
        label_pattern="",
        **options,
    ):
        if skip_existing and update_existing:
            raise CommandError("Choose one of --skip-existing and --update-existing.")
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
        try:
            parsed_labels = parse_label_pairs(" ".join(labels))
            report = import_kubeconfig(
                text,
                contexts=contexts or None,
                labels=parsed_labels,
                label_pattern=label_pattern,
                host_context=host_context,
                verify=not skip_connection_check,
                base_dir=base_dir,
                update_existing=update_existing,
                skip_existing=skip_existing,
            )
        except ValidationError as exc:
            raise CommandError("Nothing was imported:\n  " + "\n  ".join(exc.messages)) from None
        for word, clusters in (
            ("registered", report.created),
            ("updated", report.updated),
            ("up to date", report.unchanged),
        ):
            for cluster in clusters:
                labels_text = ",".join(f"{k}={v}" for k, v in sorted(cluster.labels.items()))
                self.stdout.write(
                    f"{word:<11}{cluster.name:<30} {cluster.role:<7} {cluster.server_version or '?':<12} "
                    f"{cluster.api_server} {labels_text}"
                )
        for context_name, reason in report.skipped:
            self.stdout.write(f"{'skipped':<11}{context_name:<30} {reason}")
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {len(report.clusters)} cluster(s); first probes are queued."
                + (f" Skipped {len(report.skipped)} already registered." if report.skipped else "")
            )
        )
