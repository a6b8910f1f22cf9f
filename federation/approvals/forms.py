"""Forms: query parameters for the list, and the small forms of each transition."""

from django import forms

from federation.approvals.choices import ChangeKind
from federation.manifests import ManifestError, load_yaml
from federation.rollout_strategy import StrategyError, normalize_strategy


class ChangeRequestCreateForm(forms.Form):
    """Open a Draft for a resource's revision (the "Request change" button's target)."""

    kind = forms.ChoiceField(
        required=False,
        choices=[
            ("", "automatic"),
            (ChangeKind.EDIT, "Edit"),
            (ChangeKind.ROLLBACK, "Rollback"),
            (ChangeKind.DELETE, "Delete"),
        ],
    )
    revision = forms.IntegerField(required=False, min_value=1, help_text="Revision number; default: the current one.")
    title = forms.CharField(required=False, max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}), max_length=5000)
    rollout_strategy_yaml = forms.CharField(
        required=False,
        strip=False,
        max_length=20000,
        label="Rollout strategy for this request (YAML)",
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        help_text="Empty: the resource's own strategy. {} : every cluster at once. Otherwise autoRollback and waves, "
        "as on the resource form.",
    )

    def clean_rollout_strategy_yaml(self):
        text = self.cleaned_data.get("rollout_strategy_yaml") or ""
        if not text.strip():
            return None
        try:
            value = load_yaml(text)
        except ManifestError as exc:
            raise forms.ValidationError(f"Rollout strategy: {exc}") from exc
        try:
            return normalize_strategy(value)
        except StrategyError as exc:
            raise forms.ValidationError(str(exc)) from exc


class DecisionForm(forms.Form):
    comment = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}), max_length=5000)


class ApproveForm(DecisionForm):
    """An approval names the content the approver reviewed (the page's ``proposed_hash``)."""

    content_hash = forms.CharField(
        widget=forms.HiddenInput,
        max_length=64,
        error_messages={"required": "The approval does not say which content you reviewed: reload the page."},
    )


class WaveApproveForm(forms.Form):
    """A wave's approval names the wave the approver saw waiting."""

    wave = forms.CharField(
        widget=forms.HiddenInput,
        max_length=63,
        error_messages={"required": "The approval does not say which wave you saw waiting: reload the page."},
    )


class RejectForm(forms.Form):
    comment = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=5000,
        error_messages={"required": "Say why you reject the request."},
    )


class CommentForm(forms.Form):
    body = forms.CharField(
        label="Comment",
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=5000,
        error_messages={"required": "Write a comment."},
    )


class ReasonForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), max_length=5000, error_messages={"required": "Give a reason."}
    )


class CancelForm(forms.Form):
    reason = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=5000)
