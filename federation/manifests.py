"""Safe YAML parsing for templates and imported files. Pure: no ORM, no network.

YAML is parsed with a SafeLoader subclass that refuses aliases outright (so "billion laughs" alias
bombs cannot expand), caps the document size, the node count and the nesting depth, and rejects
duplicate mapping keys instead of silently keeping the last one.
"""

import yaml

MAX_MANIFEST_BYTES = 256 * 1024
MAX_NODES = 20_000
MAX_DEPTH = 64


class ManifestError(ValueError):
    """Input that is not an acceptable manifest; the message is safe to show to the user."""


class _StrictSafeLoader(yaml.SafeLoader):
    """SafeLoader without aliases, with node/depth limits and no duplicate keys."""

    def __init__(self, stream):
        super().__init__(stream)
        self._node_count = 0
        self._depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise ManifestError(f"YAML aliases (*{event.anchor}) are not allowed{_where(event)}.")
        self._node_count += 1
        if self._node_count > MAX_NODES:
            raise ManifestError(f"The YAML has more than {MAX_NODES} nodes.")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise ManifestError(f"The YAML is nested deeper than {MAX_DEPTH} levels.")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = key_node.value
                if key in seen:
                    raise ManifestError(f"Duplicate key {key!r}{_where(key_node)}.")
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


# Like kubectl (YAML -> JSON), timestamps stay strings: drop PyYAML's implicit timestamp resolver.
_StrictSafeLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _check_json(value, path: str = "") -> None:
    """Only what JSON (and so Kubernetes) can hold: no binary, sets, dates, non-finite floats."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise ManifestError(f"Key {key!r} at {path or '/'} is not a string.")
            _check_json(item, f"{path}/{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{path}/{index}")
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ManifestError(f"The number at {path or '/'} is not finite (JSON cannot hold it).")
    elif value is not None and not isinstance(value, (str, int, bool)):
        raise ManifestError(f"The value at {path or '/'} is a {type(value).__name__}, which JSON cannot hold; quote it.")


def _where(mark_holder) -> str:
    mark = getattr(mark_holder, "start_mark", None)
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def _check_size(text) -> str:
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ManifestError("The file is not valid UTF-8.") from exc
    if not isinstance(text, str):
        raise ManifestError("Expected YAML text.")
    if len(text.encode("utf-8")) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"The YAML is larger than {MAX_MANIFEST_BYTES // 1024} KiB.")
    return text


def load_yaml_documents(text) -> list:
    """Every non-empty document in ``text`` (``---`` separated), parsed safely."""
    text = _check_size(text)
    loader = _StrictSafeLoader(text)
    documents = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                documents.append(loader.construct_document(node))
    except ManifestError:
        raise
    except yaml.YAMLError as exc:
        raise ManifestError(f"Invalid YAML: {_short_yaml_error(exc)}") from exc
    except RecursionError as exc:  # pragma: no cover - guarded by MAX_DEPTH
        raise ManifestError("The YAML is nested too deeply.") from exc
    finally:
        loader.dispose()
    documents = [doc for doc in documents if doc is not None]
    for doc in documents:
        _check_json(doc)
    return documents


def load_yaml(text):
    """Exactly one YAML document; ``None`` when the text is empty."""
    documents = load_yaml_documents(text)
    if len(documents) > 1:
        raise ManifestError("Expected one YAML document, found several (remove the '---' separators).")
    return documents[0] if documents else None


def _short_yaml_error(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem and mark:
        return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    return str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__


def dump_yaml(obj) -> str:
    """Stable, readable YAML for display and diffs."""
    # libyaml's emitter when PyYAML has it (several times faster; previews dump one manifest per cluster)
    return yaml.dump(obj, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=True,
                     default_flow_style=False, allow_unicode=True)


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
        raise ManifestError(
            f"The template's apiVersion is {found_version!r} but this type federates {api_version!r}."
        )
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
