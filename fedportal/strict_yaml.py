"""The one YAML loader for user-supplied text (manifests, kubeconfigs). Pure: no ORM, no network.

A SafeLoader subclass that refuses aliases outright (so "billion laughs" alias bombs cannot
expand) and explicit tags (``!!binary``, ``!!python/...``, ``!foo``), caps the document size, the
node count and the nesting depth, and rejects duplicate mapping keys instead of silently keeping
the last one. Timestamps stay strings, as kubectl (YAML -> JSON) leaves them, and mapping keys that
YAML reads as numbers or booleans become the strings kubectl makes of them (``json_key``).
"""

import math
import struct
from collections.abc import Hashable

import yaml

from fedportal.text import text_error

MAX_NODES = 20_000
MAX_DEPTH = 64


class StrictYAMLError(ValueError):
    """Input the strict loader refuses; the message is safe to show to the user."""


class StrictLoader(yaml.SafeLoader):
    """SafeLoader without aliases or tags, with node/depth limits and no duplicate keys."""

    def __init__(self, stream):
        super().__init__(stream)
        self.node_count = 0
        self.depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise StrictYAMLError(f"YAML aliases (*{event.anchor}) are not allowed{where(event)}.")
        event = self.peek_event()
        if getattr(event, "tag", None) not in (None, "!"):
            raise StrictYAMLError(f"YAML tags ({event.tag}) are not allowed{where(event)}.")
        self.node_count += 1
        if self.node_count > MAX_NODES:
            raise StrictYAMLError(f"The YAML has more than {MAX_NODES} nodes.")
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise StrictYAMLError(f"The YAML is nested deeper than {MAX_DEPTH} levels.")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_yaml_int(self, node):
        # Python refuses to read an integer of more than 4,300 digits (int_max_str_digits): a
        # ValueError no caller expected; Kubernetes holds 64 bits at most
        try:
            return super().construct_yaml_int(node)
        except ValueError as exc:
            raise StrictYAMLError(f"The number {node.value[:20]}... is too long{where(node)}.") from exc

    def construct_mapping(self, node, deep=False):
        # SafeConstructor's, with each key made its JSON string before it goes into the dict (where
        # 1, 1.0 and true would be one key) and an own key met twice refused rather than overwritten;
        # keys a "<<" merges in are overridden by the mapping's own, as YAML says
        own = sum(1 for key_node, _ in node.value if key_node.tag != "tag:yaml.org,2002:merge")
        self.flatten_mapping(node)  # the merged pairs first, then the mapping's own
        merged = len(node.value) - own
        mapping, own_keys = {}, set()
        for index, (key_node, value_node) in enumerate(node.value):
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                raise StrictYAMLError(f"A mapping key must be a string, not a {type(key).__name__}{where(key_node)}.")
            key = json_key(key)
            if index >= merged:
                if key in own_keys:
                    raise StrictYAMLError(f"Duplicate key {key!r}{where(key_node)}.")
                own_keys.add(key)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def json_key(key):
    """A mapping key as sigs.k8s.io/yaml's convertToJSONableObject (Apache-2.0) writes a key of that
    type: an integer in decimal, a boolean "true"/"false", a float as Go's FormatFloat(f, 'g', -1, 32).
    Which plain scalars are numbers is PyYAML's YAML 1.1 reading, as for values (go-yaml differs on
    a few spellings: "1:30" is sexagesimal 90 here). Strings pass; other keys (null, a list) stay for
    check_json to refuse."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):  # go-yaml reads an integer beyond 64 bits as a float
        return str(key) if -(2**63) <= key < 2**64 else go_float32_text(float(key))
    if isinstance(key, float):
        return go_float32_text(key)
    return key


def go_float32_text(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32) with go-yaml's names for the non-finite: the shortest
    digits that read back as the same float32, in exponent form below 1e-4 or from 1e6 on."""
    if math.isnan(value):
        return ".nan"
    try:
        single = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        single = math.copysign(math.inf, value)
    if math.isinf(single):
        return ".inf" if single > 0 else "-.inf"
    for precision in range(9):  # 9 significant digits always read back as the same float32
        text = f"{single:.{precision}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            break
    mantissa, exponent = text.split("e")
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    exponent = int(exponent)
    if exponent < -4 or exponent >= 6:
        fraction = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{fraction}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent < 0:
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    whole, fraction = digits[: exponent + 1].ljust(exponent + 1, "0"), digits[exponent + 1 :]
    return f"{sign}{whole}{'.' + fraction if fraction else ''}"


def where(mark_holder) -> str:
    """' at line L, column C' for a node or event, or ''."""
    mark = getattr(mark_holder, "start_mark", None)
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def check_json(value, path: str = "") -> None:
    """Only what JSON (and so Kubernetes) can hold: no binary, sets, dates, non-finite floats; and
    only text the database can store (fedportal.text: no NUL, such as a "\\0" or "\\u0000" escape)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise StrictYAMLError(f"Key {key!r} at {path or '/'} is not a string.")
            problem = text_error(key) if isinstance(key, str) else None
            if problem:
                raise StrictYAMLError(f"A key at {path or '/'} cannot be stored: {problem}")
            check_json(item, f"{path}/{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_json(item, f"{path}/{index}")
    elif isinstance(value, str):
        problem = text_error(value)
        if problem:
            raise StrictYAMLError(f"The value at {path or '/'} cannot be stored: {problem}")
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise StrictYAMLError(f"The number at {path or '/'} is not finite (JSON cannot hold it).")
    elif value is not None and not isinstance(value, (str, int, bool)):
        raise StrictYAMLError(
            f"The value at {path or '/'} is a {type(value).__name__}, which JSON cannot hold; quote it."
        )


def check_size(text, max_bytes: int) -> str:
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StrictYAMLError("The file is not valid UTF-8.") from exc
    if not isinstance(text, str):
        raise StrictYAMLError("Expected YAML text.")
    if len(text.encode("utf-8")) > max_bytes:
        raise StrictYAMLError(f"The YAML is larger than {max_bytes // 1024} KiB.")
    return text


def load_documents(text, *, max_bytes: int) -> list:
    """Every non-empty document in ``text`` (``---`` separated), parsed strictly; JSON values only."""
    text = check_size(text, max_bytes)
    try:
        loader = StrictLoader(text)  # its reader refuses control characters (a ReaderError) right here
    except yaml.YAMLError as exc:
        raise StrictYAMLError(f"Invalid YAML: {short_error(exc)}") from exc
    documents = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                documents.append(loader.construct_document(node))
    except StrictYAMLError:
        raise
    except yaml.YAMLError as exc:
        raise StrictYAMLError(f"Invalid YAML: {short_error(exc)}") from exc
    except RecursionError as exc:  # pragma: no cover - guarded by MAX_DEPTH
        raise StrictYAMLError("The YAML is nested too deeply.") from exc
    finally:
        loader.dispose()
    documents = [doc for doc in documents if doc is not None]
    for doc in documents:
        check_json(doc)
    return documents


def short_error(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem and mark:
        return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    return str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
