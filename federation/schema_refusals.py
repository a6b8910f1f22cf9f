"""A template no cluster of the fleet could accept, refused when the revision is saved.

    fleet_refusals(manifest, minors) -> list[str]

Checked against the schema of every Kubernetes minor the fleet runs that serves the manifest's
kind (clusters.schemas, from the kubernetes-validate package): the template is refused only when
each of them rejects a value's type ("data.a: expected string, got integer"); a value outside an enum
counts too, though the 1.25 to 1.37 schemas list enums only for apiVersion and kind. The template is
checked before overrides (a placeholder every override replaces is still refused), and a
RawExtension field (ControllerRevision.data) is an object here, as the simulator has it.
A value some version accepts is left to the compatibility matrix and preflight, which say which
clusters would refuse it; fields a version does not know are left to them too, as are required
fields (a template may rely on defaults and overrides)."""

from __future__ import annotations

from collections.abc import Iterable

from clusters.schemas import find_resource, pointer_to_field_path, schema_minor_for, validate_manifest

REFUSED = ("expected ", "Unsupported value")  # a wrong type, a value outside an enum


def fleet_minors(versions: Iterable[str]) -> list[int]:
    """The schema minors of the clusters' versions (those with a schema), oldest first."""
    return sorted({m for m in (schema_minor_for(v) for v in versions) if m is not None})


def fleet_refusals(manifest: dict, minors: Iterable[int]) -> list[str]:
    """What every one of ``minors`` serving the manifest's kind refuses, as the newest says it;
    [] when one of them accepts it, or none serves the kind (a custom resource, an empty fleet)."""
    api_version, kind = manifest.get("apiVersion", ""), manifest.get("kind", "")
    serving = [m for m in minors if find_resource(m, api_version, kind) is not None]
    refused = {}
    for minor in serving:
        problems = [p for p in validate_manifest(manifest, minor, strict=False) if p.message.startswith(REFUSED)]
        if not problems:
            return []
        refused[minor] = problems
    if not refused:
        return []
    newest = max(refused)
    span = f"1.{min(refused)}" + (f" to 1.{newest}" if newest != min(refused) else "")
    return [
        f"{pointer_to_field_path(p.path) or 'the object'}: {p.message} "
        f"(no cluster of the fleet would accept it: Kubernetes {span})"
        for p in refused[newest]
    ]
