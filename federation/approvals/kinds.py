"""Change-request kinds that other apps run (drift registers ``upgrade``: a Cluster API upgrade).

A kind handler decides, for the requests of its kind, what the workflow in
federation.approvals.services would otherwise take from a federated resource:

    class Handler:
        def targets(self, cr) -> list[Cluster]          whose environment sets the approvals needed
        def content_hash(self, cr) -> str                what approvals are given for
        def check(self, cr) -> None                      raise ValueError(reason) when it may not go on
                                                         (submit, approve, apply re-check the rules)
        def start(self, cr, *, actor) -> None            Approved -> Applying: begin the work
        def sync(self, cr) -> tuple[str, str] | None     None while working, else (final state, message);
                                                         BUSY: another pass has it (no follow-up queued)

    register_kind(ChangeKind.UPGRADE, Handler())        # in the app's AppConfig.ready()
"""

from __future__ import annotations

HANDLERS: dict[str, object] = {}
BUSY = "busy"


def register_kind(kind: str, handler) -> None:
    HANDLERS[str(kind)] = handler


def handler_for(kind: str):
    """The registered handler of ``kind``, or None for the kinds approvals runs itself."""
    return HANDLERS.get(str(kind))
