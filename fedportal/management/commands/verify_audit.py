"""Walk the audit log's hash chain: exit 0 when it is intact, non-zero naming the first broken link."""

from django.core.management.base import BaseCommand, CommandError

from fedportal.audit import record_event, verify_chain


class Command(BaseCommand):
    help = "Verify the audit log's hash chain and report the first broken event."

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=5000, help="Rows read per database round trip.")

    def handle(self, *args, batch_size, **options):
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1.")
        result = verify_chain(batch_size=batch_size)
        # the outcome is itself recorded (after the walk): /metrics reports the last verification from it
        record_event("audit.verify", object_type="fedportal.auditevent",
                     summary=f"Verified the audit chain: {'intact' if result.ok else 'BROKEN'} ({result.checked} events)",
                     after={"ok": result.ok, "checked": result.checked, "broken_id": result.broken_id, "reason": result.reason})
        if not result.ok:
            where = f"event {result.broken_id}" if result.broken_id is not None else "the end of the chain"
            raise CommandError(
                f"Audit chain broken at {where}: {result.reason}. "
                f"{result.checked} event{'s' if result.checked != 1 else ''} before it verified."
            )
        self.stdout.write(f"OK: {result.checked} events verified")
