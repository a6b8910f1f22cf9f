"""A list of functions other apps plug in (preflight checks, preview checks), in registration order."""

from collections.abc import Callable


class Registry:
    def __init__(self):
        self._functions: list[Callable] = []

    def register(self, func: Callable) -> Callable:
        """Add ``func`` (idempotent; usable as a decorator)."""
        if func not in self._functions:
            self._functions.append(func)
        return func

    def unregister(self, func: Callable) -> None:
        if func in self._functions:
            self._functions.remove(func)

    def functions(self) -> list[Callable]:
        """A copy: a function may (un)register while the list is walked."""
        return list(self._functions)
