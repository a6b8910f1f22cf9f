"""Change requests from the command line (fedctl will expose the same verbs).

python manage.py changes submit NS/NAME --as USER [--kind KIND] [--title T] [--description D]
    drafts a request for the resource's current revision, submits it, prints the request id
python manage.py changes approve ID --as USER [--comment TEXT]
python manage.py changes reject ID --as USER --comment TEXT
python manage.py changes cancel ID --as USER [--reason TEXT]
python manage.py changes apply ID --as USER
python manage.py changes list [--state STATE] [-o table|json]
python manage.py changes emergency NS/NAME --as ADMIN --reason TEXT
"""

import json

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from federation import selectors as federation_selectors
from federation.approvals import selectors, services
from federation.approvals.choices import ChangeState
from federation.approvals.models import ChangeRequest


class Command(BaseCommand):
    help = "Submit, approve, reject, cancel, apply and list change requests."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="verb", required=True)
        submit = sub.add_parser("submit", help="Draft and submit a request for a resource's current revision.")
        submit.add_argument("target", help="NS/NAME (or NAME for cluster-scoped)")
        submit.add_argument("--kind", default="", help="Resource kind, when NS/NAME is ambiguous.")
        submit.add_argument(
            "--change", default="", choices=["", "edit", "rollback", "delete"], help="Change kind (default: automatic)."
        )
        submit.add_argument("--title", default="")
        submit.add_argument("--description", default="")
        for verb, needs_comment in (("approve", False), ("reject", True)):
            p = sub.add_parser(verb, help=f"{verb.capitalize()} a submitted request.")
            p.add_argument("id", type=int)
            p.add_argument("--comment", default="", required=needs_comment)
        sub.choices["approve"].add_argument(
            "--content-hash",
            default=None,
            help="What you reviewed (the request's content hash): refused if it changed.",
        )
        cancel = sub.add_parser("cancel", help="Withdraw an open request.")
        cancel.add_argument("id", type=int)
        cancel.add_argument("--reason", default="")
        apply = sub.add_parser("apply", help="Apply an approved request.")
        apply.add_argument("id", type=int)
        emergency = sub.add_parser("emergency", help="Admin: propagate now without approval (audited, flagged).")
        emergency.add_argument("target")
        emergency.add_argument("--kind", default="")
        emergency.add_argument("--reason", required=True)
        listing = sub.add_parser("list", help="List change requests.")
        listing.add_argument("--state", default="", choices=["", *ChangeState.values])
        listing.add_argument("--limit", type=int, default=100)
        listing.add_argument("-o", "--output", choices=["table", "json"], default="table")
        for p in (submit, cancel, apply, emergency, *[sub.choices[v] for v in ("approve", "reject")]):
            p.add_argument("--as", dest="username", required=True, help="Act as this user (their roles apply).")

    def handle(self, *args, verb, **options):
        try:
            return getattr(self, f"do_{verb}")(**options) or None
        except services.TransitionError as exc:
            raise CommandError(str(exc)) from exc
        except PermissionDenied as exc:
            raise CommandError(f"Permission denied: {exc}") from exc

    # -- helpers -------------------------------------------------------------------------------
    def _user(self, username):
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"No active user {username!r}.")
        return user

    def _cr(self, pk) -> ChangeRequest:
        cr = ChangeRequest.objects.filter(pk=pk).first()
        if cr is None:
            raise CommandError(f"No change request {pk}.")
        return cr

    def _resource(self, target, kind):
        found = federation_selectors.find_resources(target, kind=kind)
        if not found:
            raise CommandError(f"No federated resource {target}{' of kind ' + kind if kind else ''}.")
        if len(found) > 1:
            raise CommandError(
                f"{target} names several resources ({', '.join(sorted(r.type.kind for r in found))}); pick one with --kind."
            )
        return found[0]

    def _done(self, cr):
        self.stderr.write(f"CR-{cr.pk} {cr.get_state_display()}: {cr.title}")

    # -- verbs ---------------------------------------------------------------------------------
    def do_submit(self, *, target, kind, change, title, description, username, **_):
        user = self._user(username)
        resource = self._resource(target, kind)
        cr = services.create_change_request(
            resource, actor=user, kind=change or None, title=title, description=description
        )
        cr = services.submit(cr, actor=user)
        self.stdout.write(str(cr.pk))
        self.stderr.write(
            f"Submitted CR-{cr.pk} ({cr.required_approvals} approval(s) needed; targets: {', '.join(cr.target_clusters) or 'none'})."
        )

    def do_approve(self, *, id, comment, username, content_hash=None, **_):
        self._done(services.approve(self._cr(id), actor=self._user(username), comment=comment, seen_hash=content_hash))

    def do_reject(self, *, id, comment, username, **_):
        self._done(services.reject(self._cr(id), actor=self._user(username), comment=comment))

    def do_cancel(self, *, id, reason, username, **_):
        self._done(services.cancel(self._cr(id), actor=self._user(username), reason=reason))

    def do_apply(self, *, id, username, **_):
        self._done(services.apply_change_request(self._cr(id), actor=self._user(username)))

    def do_emergency(self, *, target, kind, reason, username, **_):
        cr = services.emergency_apply(self._resource(target, kind), actor=self._user(username), reason=reason)
        self.stdout.write(str(cr.pk))
        self._done(cr)

    def do_list(self, *, state, limit, output, **_):
        rows = [selectors.as_dict(cr) for cr in selectors.filter_change_requests(state=state)[: max(1, limit)]]
        if output == "json":
            self.stdout.write(json.dumps(rows, indent=2))
            return
        header = ("ID", "STATE", "KIND", "SUBJECT", "APPROVALS", "AUTHOR", "TITLE")
        table = [header] + [
            (
                str(r["id"]),
                r["state"] + (" EMERGENCY" if r["emergency"] else ""),
                r["kind"],
                r["subject"],
                f"{r['approvals'] or 0}/{r['required_approvals']}",
                r["author"],
                r["title"],
            )
            for r in rows
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        for row in table:
            self.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
