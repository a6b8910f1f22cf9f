"""Helpers that walk a change request through its states with the real services."""

from federation.approvals import services


def draft(resource, author, **kw):
    return services.create_change_request(resource, actor=author, **kw)


def submitted(resource, author, **kw):
    return services.submit(draft(resource, author, **kw), actor=author)
