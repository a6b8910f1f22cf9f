"""`python manage.py drift_report -o json|csv [--labels env=prod] [--file report.json]`

The fleet compliance report (version policy, API compatibility, propagation, drift, isolation,
score) as JSON (with the skew findings) or CSV (one row per cluster, same columns as the page's
export)."""

import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from drift import selectors
from drift.forms import parse_label_selector
from drift.models import VersionPolicy
from drift.tables import ComplianceTable
from fedportal.csv_export import iter_csv


class Command(BaseCommand):
    help = "Print the fleet compliance report as JSON or CSV."

    def add_arguments(self, parser):
        parser.add_argument("-o", "--output", choices=["json", "csv"], default="json", help="Format (default json).")
        parser.add_argument("--labels", default="", help="Only members with these labels: env=prod,tier")
        parser.add_argument("--file", default="-", help="Write here instead of standard output.")

    def handle(self, *args, output, labels, file, **options):
        try:
            terms = parse_label_selector(labels)
        except ValidationError as exc:
            raise CommandError(f"--labels: {' '.join(exc.messages)}") from None
        report, skew_counts = selectors.fleet_compliance(labels=terms)
        stream = None if file == "-" else open(file, "w", encoding="utf-8", newline="")

        def emit(text: str) -> None:
            if stream is None:
                self.stdout.write(text, ending="")
            else:
                stream.write(text)

        try:
            if output == "csv":
                for chunk in iter_csv(
                    ComplianceTable.csv_columns(), ComplianceTable.csv_rows(report.clusters), bom=file != "-"
                ):
                    emit(chunk)
            else:
                overview = selectors.skew_overview(labels=terms)
                payload = {
                    "generated_at": timezone.now().isoformat(),
                    "policy": VersionPolicy.load().snapshot(),
                    "summary": {
                        "clusters": report.total,
                        "compliant": report.compliant,
                        "compliant_share": round(report.compliant_share, 4),
                        "score": report.score,
                        "open_drift": report.open_drift,
                        "incompatible_cells": report.incompatible_cells,
                        "isolated": report.isolated,
                        "skew_findings": skew_counts,
                        "rule_failures": report.rule_failures(),
                    },
                    "clusters": [c.as_dict() for c in report.clusters],
                    "skew_findings": [f.as_dict() for f in overview.report.findings],
                }
                emit(json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        finally:
            if stream is not None:
                stream.close()
