"""Forms: the version policy (admins) and query parameters of the drift pages."""

import re

from django import forms

from clusters import labels
from drift.choices import Severity
from drift.models import VersionPolicy

MAX_LABEL_TERMS = 10


def parse_label_selector(text: str) -> list[labels.Requirement]:
    """'env=prod, tier' -> label requirements (clusters.labels); ValidationError with the reason otherwise."""
    try:
        terms = labels.parse_selector(text)
    except labels.SelectorError as exc:
        raise forms.ValidationError(str(exc)) from None
    if len(terms) > MAX_LABEL_TERMS:
        raise forms.ValidationError(f"At most {MAX_LABEL_TERMS} label terms.")
    return terms


class LabelFilterMixin(forms.Form):
    labels = forms.CharField(
        required=False,
        max_length=500,
        label="Labels",
        help_text="Members with these labels: env=prod, tier, zone in (a,b), env!=dev (the host is always shown).",
    )

    def clean_labels(self):
        return parse_label_selector(self.cleaned_data["labels"])


class SkewFilterForm(LabelFilterMixin):
    severity = forms.ChoiceField(
        required=False,
        choices=[("", "any"), *Severity.choices, ("ok", "no finding")],
        label="Severity",
    )


class HistoryFilterForm(LabelFilterMixin):
    DAY_CHOICES = [(7, "7 days"), (30, "30 days"), (90, "90 days"), (365, "1 year")]
    days = forms.TypedChoiceField(
        choices=DAY_CHOICES, coerce=int, required=False, empty_value=30, initial=30, label="Window"
    )


class VersionPolicyForm(forms.ModelForm):
    class Meta:
        model = VersionPolicy
        fields = [
            "host_member_max_minor_skew",
            "member_member_max_minor_skew",
            "kubelet_max_older_minors",
            "kubelet_max_older_minors_before_1_28",
            "auto_isolate_on_p0",
        ]


class CompatFilterForm(LabelFilterMixin):
    kind = forms.CharField(required=False, max_length=63, label="Kind")
    namespace = forms.CharField(required=False, max_length=63, label="Namespace")
    findings = forms.BooleanField(
        required=False,
        label="Only findings",
        help_text="Hide the clusters and resources on this page with no incompatible or unverifiable cell.",
    )

    def clean_kind(self):
        kind = self.cleaned_data["kind"].strip()
        if kind and not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", kind):
            raise forms.ValidationError("A kind is letters and digits, like Deployment.")
        return kind

    def clean_namespace(self):
        namespace = self.cleaned_data["namespace"].strip()
        if namespace and not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", namespace):
            raise forms.ValidationError("Not a namespace name (lowercase letters, digits and -).")
        return namespace


class ComplianceFilterForm(LabelFilterMixin):
    only = forms.ChoiceField(
        required=False, label="Show", choices=[("", "all clusters"), ("noncompliant", "non-compliant only")]
    )


class IsolateForm(forms.Form):
    reason = forms.CharField(
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Shown in the banner and recorded in the audit log.",
    )


class RestoreForm(forms.Form):
    note = forms.CharField(required=False, max_length=1000, widget=forms.Textarea(attrs={"rows": 2}))
