"""Forms: query parameters for the list, and the small forms of each transition."""

from django import forms

from federation.approvals.choices import ChangeKind


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


class DecisionForm(forms.Form):
    comment = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}), max_length=5000)


class RejectForm(forms.Form):
    comment = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=5000,
        error_messages={"required": "Say why you reject the request."},
    )


class CommentForm(forms.Form):
    body = forms.CharField(label="Comment", widget=forms.Textarea(attrs={"rows": 3}), max_length=5000)


class ReasonForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), max_length=5000, error_messages={"required": "Give a reason."}
    )


class CancelForm(forms.Form):
    reason = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=5000)
