"""Forms for query parameters (bad values become form errors, never a 500)."""

from django import forms


class DateTimeLocalInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self, attrs=None):
        super().__init__(attrs, format="%Y-%m-%dT%H:%M")


class AuditEventFilterForm(forms.Form):
    """Filters for the audit page and its CSV export. Every field is optional."""

    actor = forms.CharField(required=False, max_length=150, help_text="Username, exactly.")
    action = forms.CharField(
        required=False,
        max_length=64,
        help_text="Exact action, or a prefix ending in * (cluster.*).",
    )
    object_type = forms.CharField(required=False, max_length=64, help_text="e.g. clusters.cluster")
    object_id = forms.CharField(required=False, max_length=64)
    cluster = forms.CharField(required=False, max_length=63)
    since = forms.DateTimeField(required=False, widget=DateTimeLocalInput, help_text="From (UTC), inclusive.")
    until = forms.DateTimeField(required=False, widget=DateTimeLocalInput, help_text="To (UTC), exclusive.")

    def clean_action(self):
        action = self.cleaned_data["action"].strip()
        if "*" in action.rstrip("*") or action == "*":
            raise forms.ValidationError("Use * only once, at the end of a prefix (for example cluster.*).")
        return action

    def clean(self):
        cleaned = super().clean()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since >= until:
            self.add_error("until", "Must be later than 'since'.")
        return cleaned

    def filters(self) -> dict:
        """The non-empty cleaned filters (call after is_valid())."""
        return {key: value for key, value in self.cleaned_data.items() if value not in (None, "")}
