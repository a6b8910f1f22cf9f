"""Forms: register, edit, rotate, kubeconfig import, unjoin confirmation, bulk labels (the list's
filters are clusters.filtersets.ClusterFilterSet)."""

from __future__ import annotations

import re

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

from clusters.choices import AuthMethod, ClusterRole
from clusters.models import Cluster
from clusters.validators import (
    CA_AND_SKIP_TLS_REFUSAL,
    format_label_pairs,
    normalize_api_server,
    parse_label_pairs,
    validate_dns1123_label,
)
from fedportal.text import is_number

MAX_KUBECONFIG_BYTES = 1024 * 1024


class LabelsField(forms.CharField):
    """``k=v`` pairs (commas, spaces or new lines between them), validated like Kubernetes labels."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault(
            "help_text", "key=value pairs separated by commas, e.g. env=prod, team=payments (Kubernetes label rules)."
        )
        super().__init__(**kwargs)

    def prepare_value(self, value):
        return format_label_pairs(value) if isinstance(value, dict) else value

    def to_python(self, value):
        return parse_label_pairs(super().to_python(value) or "")


class ApiServerField(forms.CharField):
    default_validators = [
        URLValidator(schemes=["https", "http"], message="Enter the API server as an https:// (or http://) URL.")
    ]

    def to_python(self, value):
        return normalize_api_server(super().to_python(value))


PEM_WIDGET = forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "autocomplete": "off"})


class SecretTextarea(forms.Textarea):
    """A textarea for a PEM private key (needs its line breaks) that never renders a value back."""

    def format_value(self, value):
        return ""


class CredentialsMixin(forms.Form):
    auth_method = forms.ChoiceField(choices=AuthMethod.choices, initial=AuthMethod.TOKEN, widget=forms.RadioSelect)
    token = forms.CharField(
        label="Bearer token",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="A service-account token. Stored encrypted; never shown again.",
    )
    client_certificate = forms.CharField(label="Client certificate (PEM)", required=False, widget=PEM_WIDGET)
    client_key = forms.CharField(
        label="Client key (PEM)",
        required=False,
        widget=SecretTextarea(attrs={"rows": 4, "spellcheck": "false", "autocomplete": "off"}),
        help_text="Paste the PEM key; it is stored encrypted and never shown again.",
    )

    def clean_credentials(self, cleaned):
        method = cleaned.get("auth_method")
        if method == AuthMethod.TOKEN:
            if not cleaned.get("token"):
                self.add_error("token", "Enter the bearer token.")
            cleaned["client_certificate"] = cleaned["client_key"] = ""
        elif method == AuthMethod.CLIENT_CERTIFICATE:
            if not cleaned.get("client_certificate"):
                self.add_error("client_certificate", "Paste the client certificate.")
            if not cleaned.get("client_key"):
                self.add_error("client_key", "Paste the client key.")
            cleaned["token"] = ""
        return cleaned

    def credentials(self) -> dict:
        data = self.cleaned_data
        return {
            "token": data.get("token") or None,
            "client_certificate": data.get("client_certificate") or None,
            "client_key": data.get("client_key") or None,
        }


class TLSMixin(forms.Form):
    ca_bundle = forms.CharField(
        label="CA bundle (PEM)",
        required=False,
        widget=PEM_WIDGET,
        help_text="The cluster's CA. Leave empty to use the system trust store.",
    )
    insecure_skip_tls_verify = forms.BooleanField(
        label="Skip TLS verification (insecure)",
        required=False,
        help_text="Anyone between FedPortal and the cluster could read the token. Use only for labs.",
    )

    def clean_tls(self, cleaned):
        ca = (cleaned.get("ca_bundle") or "").strip()
        if ca and "BEGIN CERTIFICATE" not in ca:
            self.add_error("ca_bundle", "Paste the CA bundle as PEM (-----BEGIN CERTIFICATE-----).")
        if ca and cleaned.get("insecure_skip_tls_verify"):
            self.add_error("insecure_skip_tls_verify", CA_AND_SKIP_TLS_REFUSAL)
        return cleaned


class ClusterRegisterForm(CredentialsMixin, TLSMixin, forms.Form):
    name = forms.CharField(
        max_length=63,
        validators=[validate_dns1123_label],
        help_text="A DNS label: lowercase letters, digits and '-', e.g. prod-eu-1.",
    )
    api_server = ApiServerField(
        label="API server URL", max_length=2048, widget=forms.URLInput(attrs={"size": 60, "placeholder": "https://"})
    )
    role = forms.ChoiceField(choices=ClusterRole.choices, initial=ClusterRole.MEMBER)
    labels = LabelsField()

    field_order = [
        "name",
        "api_server",
        "role",
        "labels",
        "auth_method",
        "token",
        "client_certificate",
        "client_key",
        "ca_bundle",
        "insecure_skip_tls_verify",
    ]

    def clean(self):
        cleaned = super().clean()
        self.clean_credentials(cleaned)
        self.clean_tls(cleaned)
        return cleaned

    def service_kwargs(self) -> dict:
        data = self.cleaned_data
        return {
            "name": data["name"],
            "api_server": data["api_server"],
            "role": data["role"],
            "labels": data["labels"],
            "ca_bundle": data.get("ca_bundle") or "",
            "insecure_skip_tls_verify": data.get("insecure_skip_tls_verify", False),
            **self.credentials(),
        }


class ClusterEditForm(CredentialsMixin, TLSMixin, forms.Form):
    """Credentials are asked for only with a new API server (the stored ones never go to another host)."""

    api_server = ApiServerField(label="API server URL", max_length=2048, widget=forms.URLInput(attrs={"size": 60}))
    role = forms.ChoiceField(choices=ClusterRole.choices)
    labels = LabelsField()
    auth_method = forms.ChoiceField(
        choices=AuthMethod.choices,
        required=False,
        widget=forms.RadioSelect,
        help_text="Only when the API server changes: the credentials for the new server.",
    )

    field_order = [
        "api_server",
        "role",
        "labels",
        "ca_bundle",
        "insecure_skip_tls_verify",
        "auth_method",
        "token",
        "client_certificate",
        "client_key",
    ]

    @classmethod
    def for_cluster(cls, cluster: Cluster, data=None):
        return cls(
            data,
            initial={
                "api_server": cluster.api_server,
                "role": cluster.role,
                "labels": format_label_pairs(cluster.labels),
                "ca_bundle": cluster.ca_bundle,
                "insecure_skip_tls_verify": cluster.insecure_skip_tls_verify,
            },
        )

    def clean(self):
        cleaned = self.clean_tls(super().clean())
        typed = any(cleaned.get(name) for name in ("token", "client_certificate", "client_key"))
        if "api_server" in cleaned and cleaned["api_server"] != self.initial.get("api_server") or typed:
            if not cleaned.get("auth_method"):
                token = cleaned.get("token") or not cleaned.get("client_certificate")
                cleaned["auth_method"] = AuthMethod.TOKEN if token else AuthMethod.CLIENT_CERTIFICATE
            self.clean_credentials(cleaned)
        else:
            cleaned["token"] = cleaned["client_certificate"] = cleaned["client_key"] = ""
        return cleaned

    def changes(self) -> dict:
        data = self.cleaned_data
        return {
            **self.credentials(),
            "api_server": data["api_server"],
            "role": data["role"],
            "labels": data["labels"],
            "ca_bundle": data.get("ca_bundle") or "",
            "insecure_skip_tls_verify": data.get("insecure_skip_tls_verify", False),
        }


class RotateCredentialsForm(CredentialsMixin, forms.Form):
    def clean(self):
        return self.clean_credentials(super().clean())


class UnjoinForm(forms.Form):
    confirm_name = forms.CharField(label="Type the cluster's name to confirm")

    def __init__(self, *args, cluster: Cluster, **kwargs):
        self.cluster = cluster
        super().__init__(*args, **kwargs)

    def clean_confirm_name(self):
        value = self.cleaned_data["confirm_name"].strip()
        if value != self.cluster.name:
            raise ValidationError(f"Type {self.cluster.name} exactly to unjoin it.")
        return value


class KubeconfigUploadForm(forms.Form):
    kubeconfig_file = forms.FileField(label="Upload a kubeconfig", required=False)
    kubeconfig_text = forms.CharField(
        label="…or paste it",
        required=False,
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false", "autocomplete": "off"}),
        help_text="Credentials must be embedded (kubectl config view --flatten). Nothing is stored until you import.",
    )

    def clean(self):
        cleaned = super().clean()
        upload = cleaned.get("kubeconfig_file")
        text = cleaned.get("kubeconfig_text") or ""
        if upload:
            if upload.size > MAX_KUBECONFIG_BYTES:
                raise ValidationError("The kubeconfig is larger than 1 MiB.")
            raw = upload.read()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ValidationError("The uploaded file is not UTF-8 text.") from None
        if not text.strip():
            raise ValidationError("Upload a kubeconfig file or paste one.")
        if len(text) > MAX_KUBECONFIG_BYTES:
            raise ValidationError("The kubeconfig is larger than 1 MiB.")
        cleaned["text"] = text
        return cleaned


class KubeconfigChooseForm(forms.Form):
    contexts = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple, error_messages={"required": "Choose at least one context."}
    )
    host_context = forms.ChoiceField(required=False, label="Host cluster")
    labels = LabelsField(help_text="Labels for every imported cluster, e.g. env=staging.")
    label_pattern = forms.CharField(
        required=False,
        max_length=500,
        label="Labels from the context name",
        widget=forms.TextInput(
            attrs={"class": "mono", "size": 50, "placeholder": "(?P<region>[a-z]+-[a-z]+-[0-9])-(?P<env>prod|staging)"}
        ),
        help_text="A regular expression; each named group it matches in a context's name becomes a label of that cluster.",
    )
    existing = forms.ChoiceField(
        choices=[
            ("skip", "skip them and say which"),
            ("update", "update their API server, TLS and credentials"),
            ("error", "stop the import"),
        ],
        initial="skip",
        required=False,
        label="Clusters already registered",
    )

    def __init__(self, *args, contexts: list, **kwargs):
        super().__init__(*args, **kwargs)
        usable = [(c.name, c.name) for c in contexts if c.usable]
        self.fields["contexts"].choices = usable
        self.fields["host_context"].choices = [("", "— none (all members) —"), *usable]

    def clean(self):
        cleaned = super().clean()
        host = cleaned.get("host_context")
        if host and host not in (cleaned.get("contexts") or []):
            self.add_error("host_context", "The host cluster must be one of the chosen contexts.")
        return cleaned


class BulkLabelForm(forms.Form):
    """The cluster list's bulk label form: the clusters ticked, or every cluster matching the list's
    filter (its query parameters are posted along), labels to add and keys to remove."""

    ids = forms.TypedMultipleChoiceField(coerce=int, required=False, choices=())
    all_matching = forms.BooleanField(required=False, label="All clusters matching the filter")
    add = LabelsField(label="Add labels", help_text="key=value pairs, e.g. tier=gold, team=payments")
    remove = forms.CharField(
        required=False, max_length=2000, label="Remove label keys", help_text="keys, e.g. tier, team"
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # ids a primary key can be (a 64-bit integer): a larger one was a 500 (OverflowError) in the
        # query; anything else is "not one of the available choices"
        self.fields["ids"].choices = [
            (pk, pk)
            for pk in (self.data.getlist("ids") if hasattr(self.data, "getlist") else [])
            if is_number(str(pk)) and len(str(pk)) <= 19 and 0 < int(pk) < 2**63
        ]

    def clean_remove(self):
        return [key for key in re.split(r"[,\s]+", self.cleaned_data.get("remove") or "") if key]

    def clean(self):
        cleaned = super().clean()
        if not cleaned.get("all_matching") and not cleaned.get("ids"):
            raise ValidationError("Tick the clusters to change, or choose all clusters matching the filter.")
        if not cleaned.get("add") and not cleaned.get("remove") and not self.errors:
            raise ValidationError("Give labels to add or label keys to remove.")
        return cleaned
