"""Export audit events to CSV: the same columns and formula neutralisation as the web download."""

import datetime
import os
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from fedportal.audit import record_event
from fedportal.csv_export import iter_csv
from fedportal.forms import in_utc
from fedportal.selectors import audit_events_for_export, describe_filters, filter_audit_events
from fedportal.tables import audit_csv_rows


def parse_instant(option: str, raw: str) -> datetime.datetime:
    """An ISO 8601 date (midnight UTC) or date-time (UTC when no offset is given)."""
    try:
        value = parse_datetime(raw)
        if value is None:
            day = parse_date(raw)
            if day is not None:
                value = datetime.datetime.combine(day, datetime.time.min)
    except ValueError as exc:  # well-formed but impossible, e.g. 2026-02-30
        raise CommandError(f"{option} {raw!r} is not a valid date: {exc}.") from None
    if value is None:
        raise CommandError(
            f"{option} {raw!r} is not an ISO 8601 date or date-time (for example 2026-11-01 or 2026-11-01T08:30:00Z)."
        )
    if timezone.is_naive(value):
        value = timezone.make_aware(value, datetime.UTC)
    try:
        return in_utc(value)  # an offset PostgreSQL refuses (beyond 15:59) is not sent to it
    except ValidationError as exc:
        raise CommandError(f"{option} {raw!r}: {exc.messages[0]}") from None


class Command(BaseCommand):
    help = (
        "Export audit events to CSV (UTF-8 with BOM). --since is inclusive, --until exclusive; "
        "a date alone means midnight UTC. The export itself is audited."
    )

    def add_arguments(self, parser):
        parser.add_argument("--since", help="ISO 8601 date or date-time, inclusive.")
        parser.add_argument("--until", help="ISO 8601 date or date-time, exclusive.")
        parser.add_argument("--actor", help="Only events by this username.")
        parser.add_argument(
            "--action", help="Only actions starting with this (cluster. or cluster.*: every cluster action)."
        )
        parser.add_argument("--cluster", help="Only events about this cluster.")
        parser.add_argument("--object-type", help="Only events about this object type (e.g. clusters.cluster).")
        parser.add_argument("--object-id", help="Only events about this object id (with --object-type).")
        parser.add_argument("-o", "--output", required=True, help="CSV file to write ('-' for stdout).")
        parser.add_argument("--no-bom", action="store_true", help="Leave out the UTF-8 byte-order mark.")

    def handle(self, *args, since, until, actor, action, cluster, object_type, object_id, output, no_bom, **options):
        filters = {}
        if since:
            filters["since"] = parse_instant("--since", since)
        if until:
            filters["until"] = parse_instant("--until", until)
        if since and until and filters["since"] >= filters["until"]:
            raise CommandError(f"--since {since} must be earlier than --until {until}.")
        if actor:
            filters["actor"] = actor
        if action:
            if "*" in action[:-1] or action == "*":
                raise CommandError("--action: use * only once, at the end of a prefix (for example cluster.*).")
            filters["action"] = action
        if cluster:
            filters["cluster"] = cluster
        if object_type:
            filters["object_type"] = object_type
        if object_id:
            filters["object_id"] = object_id

        target = None if output == "-" else Path(output)
        if target is not None and not target.parent.is_dir():
            raise CommandError(f"Cannot write {output}: directory {target.parent} does not exist.")
        try:  # checked before the export is audited: a refused one exported nothing
            filter_audit_events(filters)
        except ValueError as exc:
            raise CommandError(str(exc).replace("bad audit filters: ", "")) from None

        export_event = record_event(
            "audit.export",
            object_type="fedportal.auditevent",
            summary=f"exported audit events as CSV via export_audit ({describe_filters(filters)})",
            after={"filter": filters, "format": "csv", "output": str(output)},
        )
        events = audit_events_for_export(filters, before_id=export_event.pk)
        count = [0]

        def counted(rows):
            for row in rows:
                count[0] += 1
                yield row

        header, rows = audit_csv_rows(events)
        chunks = iter_csv(header, counted(rows), bom=not no_bom)

        if target is None:
            for chunk in chunks:
                self.stdout.write(chunk, ending="")
            return
        # Write next to the target and rename, so a failed export never leaves a half-written file.
        partial = target.with_name(f".{target.name}.partial")
        try:
            with open(partial, "w", encoding="utf-8", newline="") as handle:
                for chunk in chunks:
                    handle.write(chunk)
            os.replace(partial, target)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise CommandError(f"Cannot write {output}: {exc.strerror or exc}.") from None
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        self.stdout.write(f"Wrote {count[0]} events to {target} ({describe_filters(filters)}).")
