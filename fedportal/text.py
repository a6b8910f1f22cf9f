"""Text the database can store. Pure: no ORM, no network.

PostgreSQL refuses a NUL character (U+0000) in ``text`` and in ``jsonb``, and a lone UTF-16
surrogate (U+D800-U+DFFF) cannot be encoded as UTF-8 at all, so either one reaching a query or a
row is a 500. Django's form fields already refuse NUL (ProhibitNullCharactersValidator); this
module is the same rule for input that does not go through a form field: loaded YAML/JSON
documents (fedportal.strict_yaml), API request bodies and cursors (api), and URL path segments
(``<text:name>``, registered in fedportal.apps).
"""

NUL_MESSAGE = "Null characters are not allowed."  # what Django's form fields say
SURROGATE_MESSAGE = "Lone surrogate characters (U+D800 to U+DFFF) are not allowed."


def text_error(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, or None."""
    if "\x00" in value:
        return NUL_MESSAGE
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return SURROGATE_MESSAGE
    return None


def is_number(text: str) -> bool:
    """Whether ``text`` is ASCII digits, as an id or an array index is. Not ``str.isdigit()``: that
    also takes "²" and "١", which ``int()`` refuses or reads as another number."""
    return text.isascii() and text.isdecimal()


def find_text_error(value) -> str | None:
    """``text_error`` of the first string in a JSON-like value (dict keys included), or None."""
    if isinstance(value, str):
        return text_error(value)
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = ((None, item) for item in value)
    else:
        return None
    for key, item in items:
        error = (text_error(key) if isinstance(key, str) else None) or find_text_error(item)
        if error:
            return error
    return None


class TextConverter:
    """``<text:name>``: Django's ``str`` converter (anything but '/') without NUL, so a URL naming
    an object with %00 does not match (404) instead of reaching a query (500)."""

    regex = r"[^/\x00]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


def with_article(phrase: str) -> str:
    """``phrase`` after "a" or "an", by its first letter ("an Approved request", "a Draft request")."""
    return f"{'an' if phrase[:1].lower() in 'aeiou' else 'a'} {phrase}"
