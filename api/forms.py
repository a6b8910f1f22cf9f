from django import forms
from django.core.exceptions import ValidationError

from api.tokens import MAX_NAME, parse_duration


class TokenCreateForm(forms.Form):
    name = forms.CharField(max_length=MAX_NAME, initial="ci", help_text="To recognise the token later, e.g. ci.")
    expires = forms.CharField(
        required=False, max_length=8, initial="30d", help_text="Lifetime: 30d, 12h, 2w… Empty: never expires."
    )
    read_only = forms.BooleanField(required=False, label="Read-only", help_text="The token may only read.")

    def clean_expires(self):
        value = self.cleaned_data["expires"].strip()
        if not value:
            return None
        try:
            return parse_duration(value)
        except ValidationError as exc:
            raise ValidationError(exc.messages) from None
