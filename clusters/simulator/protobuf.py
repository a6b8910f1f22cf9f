"""The protobuf request bodies kubectl sends (`application/vnd.kubernetes.protobuf`), decoded to the
JSON-shaped dicts the rest of the simulator handles.

kubectl's typed clients send some built-in kinds as protobuf (`kubectl create namespace`, `kubectl
auth can-i`, `kubectl auth whoami`). The envelope (k8s.io/apimachinery/pkg/runtime/serializer/
protobuf): the 4 bytes ``k8s\\x00``, then a ``runtime.Unknown`` message (typeMeta = 1 {apiVersion = 1,
kind = 2}, raw = 2: the object's own message, contentEncoding = 3, contentType = 4). The objects'
field numbers are those of k8s.io/api's generated.proto files (Apache-2.0), for the few kinds below;
a field this table does not name is skipped, a kind it does not know is 415 as for any format the
server cannot read.
"""

from __future__ import annotations

import base64

from .errors import ApiError

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

# field number -> (JSON name, kind, schema for messages, repeated)
_S, _I, _B, _M, _MAP, _BMAP = "string", "int", "bool", "message", "map", "bytes-map"  # bytes: base64 in JSON

_OBJECT_META = {
    1: ("name", _S),
    2: ("generateName", _S),
    3: ("namespace", _S),
    5: ("uid", _S),
    6: ("resourceVersion", _S),
    7: ("generation", _I),
    11: ("labels", _MAP),
    12: ("annotations", _MAP),
    14: ("finalizers", _S, None, True),
}
_TYPE_META = {1: ("apiVersion", _S), 2: ("kind", _S)}
_UNKNOWN = {1: ("typeMeta", _M, _TYPE_META), 2: ("raw", "bytes"), 3: ("contentEncoding", _S), 4: ("contentType", _S)}
_RESOURCE_ATTRIBUTES = {
    1: ("namespace", _S),
    2: ("verb", _S),
    3: ("group", _S),
    4: ("version", _S),
    5: ("resource", _S),
    6: ("subresource", _S),
    7: ("name", _S),
}
_NON_RESOURCE_ATTRIBUTES = {1: ("path", _S), 2: ("verb", _S)}

KINDS: dict[tuple[str, str], dict] = {
    ("v1", "Namespace"): {
        1: ("metadata", _M, _OBJECT_META),
        2: ("spec", _M, {1: ("finalizers", _S, None, True)}),
    },
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): {
        1: ("metadata", _M, _OBJECT_META),
        2: (
            "spec",
            _M,
            {
                1: ("resourceAttributes", _M, _RESOURCE_ATTRIBUTES),
                2: ("nonResourceAttributes", _M, _NON_RESOURCE_ATTRIBUTES),
            },
        ),
    },
    ("v1", "ConfigMap"): {
        1: ("metadata", _M, _OBJECT_META),
        2: ("data", _MAP),
        3: ("binaryData", _BMAP),
        4: ("immutable", _B),
    },
    ("v1", "Secret"): {
        1: ("metadata", _M, _OBJECT_META),
        2: ("data", _BMAP),
        3: ("type", _S),
        4: ("stringData", _MAP),
        5: ("immutable", _B),
    },
    ("authentication.k8s.io/v1", "SelfSubjectReview"): {1: ("metadata", _M, _OBJECT_META)},
    ("authentication.k8s.io/v1beta1", "SelfSubjectReview"): {1: ("metadata", _M, _OBJECT_META)},
}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(data: bytes):
    """(field number, wire type, value) of each field: an int for varints, bytes otherwise."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise ValueError("truncated field")
            value, pos = data[pos : pos + size], pos + size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = data[pos : pos + size], pos + size
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def decode_message(data: bytes, schema: dict) -> dict:
    out: dict = {}
    for number, wire, value in _fields(data):
        spec = schema.get(number)
        if spec is None:
            continue
        name, kind = spec[0], spec[1]
        sub = spec[2] if len(spec) > 2 else None
        repeated = len(spec) > 3 and spec[3]
        if kind in (_MAP, _BMAP):
            entry = decode_message(value, {1: ("key", _S), 2: ("value", _S if kind == _MAP else "bytes")})
            item = entry.get("value", b"" if kind == _BMAP else "")
            out.setdefault(name, {})[entry.get("key", "")] = base64.b64encode(item).decode() if kind == _BMAP else item
            continue
        if kind == _S:
            value = value.decode("utf-8")
        elif kind == _I:
            value = value if wire == 0 else int.from_bytes(value, "little")
        elif kind == _B:
            value = bool(value)
        elif kind == _M:
            value = decode_message(value, sub)
        if repeated:
            out.setdefault(name, []).append(value)
        else:
            out[name] = value
    return out


def decode_body(raw: bytes) -> dict:
    """A protobuf request body as a JSON-shaped object (apiVersion and kind from its envelope)."""
    if not raw.startswith(MAGIC):
        raise ApiError(400, "provided object is not a protobuf message: missing the k8s\\x00 prefix")
    try:
        unknown = decode_message(raw[len(MAGIC) :], _UNKNOWN)
        type_meta = unknown.get("typeMeta") or {}
        key = (type_meta.get("apiVersion", ""), type_meta.get("kind", ""))
        schema = KINDS.get(key)
        if schema is None:
            raise ApiError(
                415, f"the fleet simulator does not decode {key[0]} {key[1]} from protobuf; send it as application/json"
            )
        obj = decode_message(unknown.get("raw", b""), schema)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the body of the request could not be decoded as protobuf: {exc}") from exc
    return {"apiVersion": key[0], "kind": key[1], **obj}
