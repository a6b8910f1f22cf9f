"""What a browser would submit for a form in a rendered page, for view tests that must see the page
as a user does (e.g. a <select> without a selected option submits its first option)."""

from html.parser import HTMLParser


class _FormReader(HTMLParser):
    def __init__(self, form_id: str):
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.inside = False
        self.fields: list[tuple[str, str]] = []
        self.select: dict | None = None
        self.option: dict | None = None
        self.textarea: dict | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and attrs.get("id") == self.form_id:
            self.inside = True
        if not self.inside:
            return
        if tag == "input" and attrs.get("name") and "disabled" not in attrs:
            kind = attrs.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in attrs:
                    self.fields.append((attrs["name"], attrs.get("value", "on")))
            elif kind not in ("submit", "button", "file"):
                self.fields.append((attrs["name"], attrs.get("value", "")))
        elif tag == "select" and "disabled" not in attrs:
            self.select = {"name": attrs.get("name"), "options": [], "selected": []}
        elif tag == "option" and self.select is not None:
            self.option = {"value": attrs.get("value"), "text": "", "selected": "selected" in attrs}
        elif tag == "textarea" and attrs.get("name") and "disabled" not in attrs:
            self.textarea = {"name": attrs["name"], "text": ""}

    def handle_data(self, data):
        if self.option is not None:
            self.option["text"] += data
        if self.textarea is not None:
            self.textarea["text"] += data

    def handle_endtag(self, tag):
        if tag == "form" and self.inside:
            self.inside = False
        if tag == "option" and self.option is not None:
            value = self.option["value"] if self.option["value"] is not None else self.option["text"].strip()
            self.select["options"].append(value)
            if self.option["selected"]:
                self.select["selected"].append(value)
            self.option = None
        elif tag == "select" and self.select is not None:
            chosen = self.select["selected"] or self.select["options"][:1]
            self.fields.extend((self.select["name"], value) for value in chosen)
            self.select = None
        elif tag == "textarea" and self.textarea is not None:
            text = self.textarea["text"]
            self.fields.append((self.textarea["name"], text[1:] if text.startswith("\n") else text))
            self.textarea = None


def submitted_fields(html: str, form_id: str) -> dict[str, list[str]]:
    """{name: [values]} as a browser submits the form with that id (no submit button's own value)."""
    reader = _FormReader(form_id)
    reader.feed(html)
    fields: dict[str, list[str]] = {}
    for name, value in reader.fields:
        fields.setdefault(name, []).append(value)
    return fields
