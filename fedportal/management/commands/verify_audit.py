"""Walk the audit log's keyed hash chain: exit 0 when it is intact, non-zero naming the first broken
link. An intact chain gets a new signed checkpoint (see fedportal/audit.py)."""

from django.core.management.base import BaseCommand, CommandError

from fedportal.audit import record_event, verify_chain, write_checkpoint


class Command(BaseCommand):
    help = (
        "Verify the audit log's hash chain against the newest checkpoint, report the first broken event, "
        "and append a new checkpoint when it is intact."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=5000, help="Rows read per database round trip.")
        parser.add_argument("--no-checkpoint", action="store_true", help="Verify only; do not append a checkpoint.")

    def handle(self, *args, batch_size, no_checkpoint, **options):
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1.")
        result = verify_chain(batch_size=batch_size)
        # the outcome is itself recorded (after the walk): /metrics reports the last verification from it
        record_event(
            "audit.verify",
            object_type="fedportal.auditevent",
            summary=f"Verified the audit chain: {'intact' if result.ok else 'BROKEN'} ({result.checked} events)",
            after={"ok": result.ok, "checked": result.checked, "broken_id": result.broken_id, "reason": result.reason},
        )
        if not result.ok:
            where = f"event {result.broken_id}" if result.broken_id is not None else "the end of the chain"
            raise CommandError(
                f"Audit chain broken at {where}: {result.reason}. "
                f"{result.checked} event{'s' if result.checked != 1 else ''} before it verified."
            )
        self.stdout.write(f"OK: {result.checked} events verified")
        if result.legacy:
            self.stdout.write(
                f"Note: the first {result.legacy} events predate FEDPORTAL_AUDIT_KEY (plain SHA-256): they are "
                "anchored by the keyed events after them, not by a key of their own."
            )
        if result.checkpoint is not None:
            self.stdout.write(f"Matches the checkpoint of {result.checkpoint.at} ({result.checkpoint.length} events).")
        if not no_checkpoint:
            point = write_checkpoint()
            if point is not None:
                self.stdout.write(f"Checkpoint written: chain {point.chain_id}, {point.length} events.")
