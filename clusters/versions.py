"""Kubernetes versions: the one parser every part of FedPortal (and the fleet simulator) uses.

A version is read from a gitVersion such as ``v1.27.3``, ``v1.27.3-eks-1``, ``v1.27.3-eks-4f4795d`` or
``v1.28.2+k3s1``, or a minor version such as ``1.27``; anything else (empty, garbage, a major other
than 1) is None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# re.ASCII: \d is 0-9 only (unicode \d also takes "١٢٧"); a version is ASCII, as filter_version reads it
_VERSION_RE = re.compile(r"^\s*(v?)(\d{1,4})\.(\d{1,4})(?:\.(\d{1,6}))?([-+.][0-9A-Za-z.+-]*)?\s*$", re.ASCII)


@dataclass(frozen=True, order=True)
class KubeVersion:
    major: int
    minor: int
    patch: int = 0

    @property
    def label(self) -> str:
        return f"v{self.major}.{self.minor}"

    def __str__(self) -> str:
        return f"v{self.major}.{self.minor}.{self.patch}"


@lru_cache(maxsize=4096)
def parse_version(text, *, full: bool = False) -> KubeVersion | None:
    """``v1.27.3-eks-1`` -> KubeVersion(1, 27, 3); ``1.27`` -> KubeVersion(1, 27, 0); unparseable -> None.

    ``full=True`` accepts only a complete gitVersion as an apiserver reports it: ``v``, major, minor
    and patch, then an optional ``-suffix`` or ``+suffix`` (``1.27`` and ``v1.27`` are refused)."""
    if not isinstance(text, str):
        return None
    match = _VERSION_RE.match(text)
    if not match:
        return None
    prefix, major, minor, patch, suffix = match.groups()
    if full and (not prefix or patch is None or (suffix is not None and (suffix[0] == "." or len(suffix) < 2))):
        return None
    if int(major) != 1:
        return None
    return KubeVersion(int(major), int(minor), int(patch or 0))


def minor_of(version) -> int | None:
    """A version as its minor: an int minor (27) as it is, a gitVersion (``v1.27.3``) or a minor
    version (``1.27``) parsed; None when it cannot be read."""
    if isinstance(version, bool):
        return None
    if isinstance(version, int):
        return version
    parsed = parse_version(version)
    return parsed.minor if parsed else None
