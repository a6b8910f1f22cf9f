"""manage.py create_token USER [--expires 30d] [--name ci] [--read-only]: prints the token alone on its last line."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from api.tokens import create_token, parse_duration


class Command(BaseCommand):
    help = "Create an API token for a user. The token is printed once, alone on the last line."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--expires", default="", help="Lifetime like 30d, 12h, 2w (default: no expiry).")
        parser.add_argument("--name", default="cli", help="A name to recognise the token by.")
        parser.add_argument("--read-only", action="store_true", help="The token may only read.")

    def handle(self, username, expires, name, read_only, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        try:
            expires_in = parse_duration(expires) if expires else None
            new = create_token(user, actor=None, name=name, expires_in=expires_in, read_only=read_only)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        token = new.token
        when = f"expires {token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else "never expires"
        self.stdout.write(
            f"Token {token.name!r} for {username} ({'read-only, ' if read_only else ''}{when}). "
            "It is shown only now; store it safely."
        )
        self.stdout.write(new.secret)
