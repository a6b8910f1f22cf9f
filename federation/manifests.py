"""Safe YAML parsing for templates and imported files. Pure: no ORM, no network.

YAML is parsed with fedportal.strict_yaml (no aliases, no tags, size/node/depth caps, no duplicate
keys), the same loader kubeconfigs go through.
"""

import yaml

from clusters.validators import label_key_error, label_value_error
from federation.overrides import OverrideError, apply_operations
from fedportal.strict_yaml import StrictYAMLError, load_documents

MAX_MANIFEST_BYTES = 256 * 1024

# Manifest problems are the strict loader's errors: one exception type for "this input is refused".
ManifestError = StrictYAMLError


def load_yaml_documents(text) -> list:
    """Every non-empty document in ``text`` (``---`` separated), parsed safely."""
    return load_documents(text, max_bytes=MAX_MANIFEST_BYTES)


def load_yaml(text):
    """Exactly one YAML document; ``None`` when the text is empty."""
    documents = load_yaml_documents(text)
    if len(documents) > 1:
        raise ManifestError("Expected one YAML document, found several (remove the '---' separators).")
    return documents[0] if documents else None


def dump_yaml(obj) -> str:
    """Stable, readable YAML for display and diffs."""
    # libyaml's emitter when PyYAML has it (several times faster; previews dump one manifest per cluster)
    return yaml.dump(
        obj,
        Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
        sort_keys=True,
        default_flow_style=False,
        allow_unicode=True,
    )


def parse_template(text, *, api_version: str, kind: str) -> dict:
    """Parse a resource template edited as YAML and check it against its federated type.

    ``apiVersion`` and ``kind`` may be left out (they come from the type); when present they must
    match. ``metadata.name``/``namespace`` are ignored later (the resource's own name wins).
    """
    obj = load_yaml(text)
    if obj is None:
        obj = {}
    return check_template(obj, api_version=api_version, kind=kind)


def check_template(obj, *, api_version: str, kind: str) -> dict:
    if not isinstance(obj, dict):
        raise ManifestError("The template must be a YAML mapping (key: value), not a list or a scalar.")
    bad_keys = [key for key in obj if not isinstance(key, str)]
    if bad_keys:
        raise ManifestError(f"Top-level keys must be strings, found {bad_keys[0]!r}.")
    found_kind = obj.get("kind")
    if found_kind is not None and found_kind != kind:
        raise ManifestError(f"The template's kind is {found_kind!r} but this type federates {kind!r}.")
    found_version = obj.get("apiVersion")
    if found_version is not None and found_version != api_version:
        raise ManifestError(f"The template's apiVersion is {found_version!r} but this type federates {api_version!r}.")
    metadata = obj.get("metadata", {})
    if metadata is not None and not isinstance(metadata, dict):
        raise ManifestError("metadata must be a mapping.")
    for key in ("labels", "annotations"):
        values = (metadata or {}).get(key)
        if values is None:
            continue
        if not isinstance(values, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in values.items()
        ):
            raise ManifestError(f"metadata.{key} must map strings to strings.")
    return obj


ANNOTATIONS_MAX_BYTES = 256 * 1024  # apimachinery's TotalAnnotationSizeLimitB


def metadata_problems(template: dict) -> list[str]:
    """What kube-apiserver refuses in a template's metadata.labels and metadata.annotations
    (apimachinery's ValidateLabels and ValidateAnnotations): keys are qualified names (an
    annotation's compared in lower case), label values valid label values, annotations 256 KiB in
    all. Saved without this, a template went through approval and failed on every real cluster.
    For new content only (federation.services.validate_spec): a revision stored before this check
    must stay deletable and restorable. Expects check_template's shapes (string maps)."""
    metadata = template.get("metadata") or {}
    problems = []
    for key in ("labels", "annotations"):
        values = metadata.get(key) or {}
        if not isinstance(values, dict):  # an override can write anything there
            problems.append(f"metadata.{key}: must be a map of strings, not {type(values).__name__}.")
            continue
        if wrong := [name for name, value in values.items() if not isinstance(value, str)]:
            problems.append(f"metadata.{key}: the value of {wrong[0]!r} must be a string (put it in quotes).")
            continue
        for name, value in values.items():
            checked = name.lower() if key == "annotations" else name
            problem = label_key_error(checked)
            if problem and key == "annotations":  # named as written, not as compared
                problem = problem.replace(f"label key {checked!r}", f"key {name!r}", 1)
            if problem is None and key == "labels":
                problem = label_value_error(value)
            if problem:
                problems.append(f"metadata.{key}: {problem}.")
    annotations = metadata.get("annotations") or {}
    if (
        isinstance(annotations, dict)
        and sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items()) > ANNOTATIONS_MAX_BYTES
    ):
        problems.append(f"metadata.annotations: may not be more than {ANNOTATIONS_MAX_BYTES // 1024} KiB in all.")
    return problems


def override_metadata_problems(rendered: dict, overrides: list[dict]) -> list[str]:
    """``metadata_problems`` of each cluster's manifest once its overrides are applied (an override
    that adds a label kube-apiserver refuses failed only at apply, on that cluster). For new
    overrides only, as ``metadata_problems``; overrides that do not apply are reported elsewhere."""
    problems = []
    # only what the overrides bring: the template's own (a stored one, saved before the check) is not theirs
    inherited = set(metadata_problems(rendered))
    for entry in overrides:
        try:
            manifest = apply_operations(rendered, entry["clusterOverrides"], cluster=entry["clusterName"])
        except OverrideError:
            continue
        where = f"Override for cluster {entry['clusterName']!r}: "
        problems += [where + problem for problem in metadata_problems(manifest) if problem not in inherited]
    return problems


def identity_problems(template: dict, *, namespaced: bool, namespace: str, name: str) -> list[str]:
    """A template's metadata.name, or a namespaced one's metadata.namespace, other than the resource's:
    rendering uses the resource's, so one given in the template was silently ignored. An empty one
    counts as absent; a cluster-scoped object's namespace is cleared by the apiserver, as here."""
    metadata = template.get("metadata") or {}
    wanted = {"name": name, **({"namespace": namespace} if namespaced else {})}
    return [
        f"The template's metadata.{key} is {metadata[key]!r} but the resource's {key} is {expected!r}: "
        f"leave it out of the template (the resource's {key} is used) or make them the same."
        for key, expected in wanted.items()
        if metadata.get(key) not in (None, "", expected)
    ]


def check_object_identity(obj, *, where: str = "document") -> tuple[str, str]:
    """(apiVersion, kind) of a full object, or a ManifestError saying what is missing."""
    if not isinstance(obj, dict):
        raise ManifestError(f"The {where} is not a mapping.")
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise ManifestError(f"The {where} has no apiVersion.")
    if not isinstance(kind, str) or not kind:
        raise ManifestError(f"The {where} has no kind.")
    return api_version, kind


def split_api_version(api_version: str) -> tuple[str, str]:
    """'apps/v1' -> ('apps', 'v1'); 'v1' -> ('', 'v1')."""
    group, _, version = api_version.rpartition("/")
    return group, version


def join_api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version
