"""kube-apiserver's checks of metadata.labels and metadata.annotations (apimachinery's
ValidateLabels, ValidateAnnotations and validation.IsQualifiedName / IsValidLabelValue,
k8s.io/apimachinery, Apache-2.0), and of the deletion fields on an update (rest.BeforeUpdate, then
ValidateObjectMetaAccessorUpdate): the causes of the 422 it answers, with its messages."""

from __future__ import annotations

import re
from datetime import datetime

_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
# fullmatch, as Go's anchored regexps: Python's "$" also matches before a final newline ("web\n")
_NAME_RE = re.compile(_NAME)
_VALUE_RE = re.compile(f"({_NAME})?")
_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
NAME_MAX, SUBDOMAIN_MAX, ANNOTATIONS_MAX = 63, 253, 256 * 1024

NAME_FORMAT = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    f"'{_NAME}')"
)
VALUE_FORMAT = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    f"for validation is '({_NAME})?')"
)
SUBDOMAIN_FORMAT = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def qualified_name_errors(value: str) -> list[str]:
    """IsQualifiedName: an optional DNS-1123 subdomain prefix and "/", then a name of at most 63."""
    prefix, slash, name = value.rpartition("/")
    errors = []
    if slash:
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > SUBDOMAIN_MAX:
            errors.append(f"prefix part must be no more than {SUBDOMAIN_MAX} characters")
        elif not _SUBDOMAIN_RE.fullmatch(prefix):
            errors.append(SUBDOMAIN_FORMAT)
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > NAME_MAX:
        errors.append(f"name part must be no more than {NAME_MAX} characters")
    elif not _NAME_RE.fullmatch(name):
        errors.append(NAME_FORMAT)
    return errors


def label_value_errors(value: str) -> list[str]:
    errors = []
    if len(value) > NAME_MAX:
        errors.append(f"must be no more than {NAME_MAX} characters")
    if not _VALUE_RE.fullmatch(value):
        errors.append(VALUE_FORMAT)
    return errors


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def metadata_causes(meta: dict) -> list[dict]:
    """The 422 causes for ``meta``'s labels and annotations ([] when the apiserver takes them)."""
    causes = []
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if isinstance(labels, dict):
        for key, value in labels.items():
            for error in qualified_name_errors(str(key)):
                causes.append(_invalid("metadata.labels", key, error))
            if isinstance(value, str):
                for error in label_value_errors(value):
                    causes.append(_invalid("metadata.labels", value, error))
    if isinstance(annotations, dict):
        for key in annotations:
            for error in qualified_name_errors(str(key).lower()):
                causes.append(_invalid("metadata.annotations", key, error))
        size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())
        if size > ANNOTATIONS_MAX:
            causes.append(
                {
                    "reason": "FieldValueTooLong",
                    "field": "metadata.annotations",
                    "message": f"Too long: must have at most {ANNOTATIONS_MAX} bytes",
                }
            )
    return causes


def _invalid(field: str, value: str, error: str) -> dict:
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {_quoted(str(value))}: {error}"}


def deletion_update_causes(meta: dict, old_meta: dict) -> list[dict]:
    """An update never sets a deletion: rest.BeforeUpdate keeps a stored deletionTimestamp and a
    stored grace period the update leaves out, and ValidateImmutableField refuses the rest (a
    deletionTimestamp where none is stored, another grace period)."""
    causes = []
    stamp = meta.get("deletionTimestamp")
    if stamp and not old_meta.get("deletionTimestamp"):
        causes.append(_immutable("metadata.deletionTimestamp", _go_time(stamp)))
    grace = meta.get("deletionGracePeriodSeconds")
    if grace is not None and grace != old_meta.get("deletionGracePeriodSeconds"):
        causes.append(_immutable("metadata.deletionGracePeriodSeconds", grace))
    return causes


def _go_time(stamp) -> str:
    """metav1.Time as field.Error prints it (its String(): Go's time format)."""
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")
    except ValueError:
        return str(stamp)


def _immutable(field: str, value) -> dict:
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {value}: field is immutable"}
