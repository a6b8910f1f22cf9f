"""Forms for query parameters (bad values become form errors, never a 500)."""

from django import forms


class DateTimeLocalInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self, attrs=None):
        super().__init__(attrs, format="%Y-%m-%dT%H:%M")


class AuditEventFilterForm(forms.Form):
    """Checks across the audit filters (the fields come from fedportal.filtersets.AuditEventFilterSet)."""

    def clean_action(self):
        action = (self.cleaned_data.get("action") or "").strip()
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
        return {key: value for key, value in self.cleaned_data.items() if value not in (None, "", False)}
