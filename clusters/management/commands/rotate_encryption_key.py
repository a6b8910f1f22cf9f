"""python manage.py rotate_encryption_key: re-encrypt every stored credential under the first key of
FEDPORTAL_ENCRYPTION_KEY, so older keys (listed after it) can then be removed. Audited."""

from django.core.management.base import BaseCommand, CommandError

from clusters.crypto import CredentialDecryptError
from clusters.services.encryption import rotate_encryption_key


class Command(BaseCommand):
    help = "Re-encrypt every stored credential under the first FEDPORTAL_ENCRYPTION_KEY (then retire the others)."

    def handle(self, *args, **options):
        try:
            count = rotate_encryption_key()
        except CredentialDecryptError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Re-encrypted the credentials of {count} cluster(s) under the first key; "
                "the other keys of FEDPORTAL_ENCRYPTION_KEY can now be removed."
            )
        )
