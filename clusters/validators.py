"""Kubernetes name and label rules (apimachinery/pkg/util/validation), as Django validators."""

import re
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
LABEL_VALUE_MAX = 63
# client-go refuses a kubeconfig cluster with both too
CA_AND_SKIP_TLS_REFUSAL = "Give a CA bundle or skip verification, not both."


def validate_dns1123_label(value: str) -> None:
    if not value or len(value) > DNS1123_LABEL_MAX or not _DNS1123_LABEL.match(value):
        raise ValidationError(
            "%(value)r is not a valid name: use at most 63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit (a DNS-1123 label).",
            code="invalid_name",
            params={"value": value},
        )


def validate_dns1123_subdomain(value: str) -> None:
    if not value or len(value) > DNS1123_SUBDOMAIN_MAX or not _DNS1123_SUBDOMAIN.match(value):
        raise ValidationError(
            "%(value)r is not valid: use at most 253 lowercase letters, digits, '-' and '.', each dot-separated "
            "part starting and ending with a letter or digit (a DNS-1123 subdomain, e.g. apps or example.com).",
            code="invalid_subdomain",
            params={"value": value},
        )


def validate_dns1035_label(value: str) -> None:
    """A resource's plural or an API version: apiextensions' rule for a CRD's names and versions."""
    if not value or len(value) > DNS1123_LABEL_MAX or not _DNS1035_LABEL.match(value):
        raise ValidationError(
            "%(value)r is not valid: use at most 63 lowercase letters, digits and '-', starting with a letter "
            "and ending with a letter or digit (a DNS-1035 label, e.g. deployments or v1beta1).",
            code="invalid_label",
            params={"value": value},
        )


def validate_kind(value: str) -> None:
    """A kind may have mixed case, but should otherwise be a DNS-1035 label (apiextensions' rule)."""
    if not value or len(value) > DNS1123_LABEL_MAX or not _DNS1035_LABEL.match(value.lower()):
        raise ValidationError(
            "%(value)r is not a valid kind: use at most 63 letters, digits and '-', starting with a letter and "
            "ending with a letter or digit (e.g. Deployment).",
            code="invalid_kind",
            params={"value": value},
        )


def label_key_error(key: str) -> str | None:
    """Why ``key`` is not a valid Kubernetes label key, or None."""
    if not key:
        return "a label key must not be empty"
    prefix, _, name = key.rpartition("/")
    if "/" in key:
        if not prefix or len(prefix) > DNS1123_SUBDOMAIN_MAX or not _DNS1123_SUBDOMAIN.match(prefix):
            return f"label key {key!r}: the prefix must be a DNS-1123 subdomain (e.g. example.com)"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (
            f"label key {key!r}: the name part must be at most 63 characters of letters, digits, "
            "'-', '_' or '.', starting and ending with a letter or digit"
        )
    return None


def label_value_error(value: str) -> str | None:
    if value == "":
        return None
    if len(value) > LABEL_VALUE_MAX or not _QUALIFIED_NAME.match(value):
        return (
            f"label value {value!r}: at most 63 characters of letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit (or empty)"
        )
    return None


def validate_labels(labels) -> None:
    """A dict of str -> str that Kubernetes would accept as metadata.labels."""
    if not isinstance(labels, dict):
        raise ValidationError("Labels must be a mapping of key to value.", code="invalid_labels")
    errors = []
    for key, value in labels.items():
        if not isinstance(key, str) or not isinstance(value, str):
            errors.append(f"label {key!r}: keys and values must be strings")
            continue
        error = label_key_error(key) or label_value_error(value)
        if error:
            errors.append(error)
    if errors:
        raise ValidationError([ValidationError(e, code="invalid_label") for e in errors])


def parse_label_pairs(text: str) -> dict[str, str]:
    """``k=v`` pairs separated by commas, spaces or new lines -> dict; ValidationError with reasons."""
    labels: dict[str, str] = {}
    errors = []
    for item in re.split(r"[,\s]+", text or ""):
        if not item:
            continue
        if "=" not in item:
            errors.append(f"{item!r} is not key=value")
            continue
        key, _, value = item.partition("=")
        key, value = key.strip(), value.strip()
        error = label_key_error(key) or label_value_error(value)
        if error:
            errors.append(error)
        elif key in labels and labels[key] != value:
            errors.append(f"label key {key!r} is given twice")
        else:
            labels[key] = value
    if errors:
        raise ValidationError([ValidationError(e, code="invalid_label") for e in errors])
    return labels


def format_label_pairs(labels: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted((labels or {}).items()))


def url_userinfo(url: str) -> str:
    """The ``user:password@`` of ``url`` ("" when none): from after "://" to the last "@" before the
    first "/" after it. Not urlsplit's netloc, which ends at a "?" or "#" too, so a password holding
    one (``https://admin:s3cr?et@host``) would go unseen."""
    scheme_end = url.find("://")
    if scheme_end < 0:
        return ""
    start = scheme_end + 3
    slash = url.find("/", start)
    authority = url[start:] if slash < 0 else url[start:slash]
    return authority[: authority.rfind("@") + 1]


DEFAULT_PORTS = {"https": "443", "http": "80"}


def normalize_api_server(url: str) -> str:
    """The one spelling of an API server URL that FedPortal stores and compares, so that one server
    is not registered twice under two spellings: blanks around it and trailing slashes removed, the
    scheme and host in lower case, the scheme's default port (:443 for https, :80 for http) dropped.
    The path keeps its case (paths are case-sensitive). A URL without "://" or with userinfo is only
    trimmed: the validators refuse it with their own message.

    ``HTTPS://K8s.Example.com:443/Clusters/A/`` -> ``https://k8s.example.com/Clusters/A``"""
    url = (url or "").strip().rstrip("/")
    scheme_end = url.find("://")
    if scheme_end < 0 or url_userinfo(url):
        return url
    scheme = url[:scheme_end].lower()
    start = scheme_end + 3
    end = next((i for i in range(start, len(url)) if url[i] in "/?#"), len(url))
    authority = url[start:end].lower()
    host, colon, port = authority.rpartition(":")
    if colon and "]" not in port and port in ("", DEFAULT_PORTS.get(scheme)):
        authority = host
    return f"{scheme}://{authority}{url[end:]}".rstrip("/")


def validate_port(value: str) -> None:
    """Refuse a URL whose port is not 1-65535 (``https://host:99999``, ``:0``): URLValidator takes any
    port of up to five digits, and the stored URL then broke whatever parsed it (urlsplit's port)."""
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return  # not a URL at all: URLValidator says so
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise ValidationError("The port in the API server URL must be between 1 and 65535.", code="url_port")


def validate_no_userinfo(value: str) -> None:
    """Refuse a URL with userinfo (``https://user:password@host``): a secret there would be stored
    in the clear and shown to every viewer. Credentials go in the cluster's credential fields."""
    if url_userinfo(value):
        raise ValidationError(
            "Do not put a user name or password in the API server URL (user:password@host): it would be "
            "shown to everyone who can see the cluster. Enter the credentials in the credential fields.",
            code="url_userinfo",
        )
