"""Forms for query parameters (bad values become form errors, never a 500)."""

from datetime import UTC, datetime

from django import forms


class DateTimeLocalInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self, attrs=None):
        super().__init__(attrs, format="%Y-%m-%dT%H:%M")


class AuditEventFilterForm(forms.Form):
    """Checks across the audit filters (the fields come from fedportal.filtersets.AuditEventFilterSet)."""

    def clean_action(self):
        action = (self.cleaned_data.get("action") or "").strip()
        if "*" in action[:-1] or action == "*":
            raise forms.ValidationError("Use * only once, at the end of a prefix (for example cluster.*).")
        return action

    def clean_since(self):
        return in_utc(self.cleaned_data.get("since"))

    def clean_until(self):
        return in_utc(self.cleaned_data.get("until"))

    def clean(self):
        cleaned = super().clean()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since >= until:
            self.add_error("until", "Must be later than 'since'.")
        return cleaned

    def filters(self) -> dict:
        """The non-empty cleaned filters (call after is_valid())."""
        return {key: value for key, value in self.cleaned_data.items() if value not in (None, "", False)}


def in_utc(value: datetime | None) -> datetime | None:
    """A moment given with any UTC offset, as the same moment in UTC. ISO 8601 and Python take an
    offset up to 23:59 (a fuzzed "-19:31"), PostgreSQL refuses one beyond 15:59 ("time zone
    displacement out of range": a 500); in UTC, the database never sees the offset."""
    if value is None:
        return None
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00-01:00 is in year 0
        raise forms.ValidationError("Out of the range of dates that can be searched.") from None
