"""Functions other apps register to hear that what propagating a resource would do changed
without a new revision (its retention or drift policy). The approval workflow registers one that
voids the approvals of the resource's open change requests (federation.approvals.apps).

    from federation.content_hooks import register_settings_hook

    def hook(resource, *, actor) -> None: ...      # runs inside the saving transaction
    register_settings_hook(hook)
"""

from federation.plugins import Registry

SETTINGS_HOOKS = Registry()
register_settings_hook = SETTINGS_HOOKS.register
unregister_settings_hook = SETTINGS_HOOKS.unregister


def settings_changed(resource, *, actor) -> None:
    """Call every registered hook (in the caller's transaction: a hook that fails undoes the save)."""
    for hook in SETTINGS_HOOKS.functions():
        hook(resource, actor=actor)
