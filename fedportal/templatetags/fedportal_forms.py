"""`{% error_summary form formset ... %}`: one list at the top of a form of every error on the page,
each linking to its field, so an error halfway down a long form is not missed. A form's own
non-field errors are left out: each template already shows them at the top."""

from django import forms, template

register = template.Library()


def form_errors(form, prefix: str = "", *, non_field: bool = True) -> list[dict]:
    items = []
    if non_field:
        items += [
            {"label": prefix.strip(" ·"), "message": message, "anchor": ""} for message in form.non_field_errors()
        ]
    for field in form:
        for message in field.errors:
            label = f"{prefix}{field.label}" if not field.is_hidden else prefix.strip(" ·")
            items.append({"label": label, "message": message, "anchor": field.id_for_label or field.auto_id})
    return items


def formset_errors(formset) -> list[dict]:
    row_label = getattr(formset, "row_label", "Row")
    anchor = getattr(formset, "anchor", "")
    items = [{"label": row_label + "s", "message": m, "anchor": anchor} for m in formset.non_form_errors()]
    # errors a service found in the rows as a whole (set by the view)
    items += [
        {"label": row_label + "s", "message": m, "anchor": anchor} for m in getattr(formset, "service_errors", [])
    ]
    for number, row in enumerate(formset.forms, start=1):
        items += form_errors(row, prefix=f"{row_label} {number} · ")
    return items


@register.inclusion_tag("partials/error_summary.html")
def error_summary(*forms_on_page):
    items = []
    for thing in forms_on_page:
        if isinstance(thing, forms.BaseFormSet):
            if thing.is_bound:
                items += formset_errors(thing)
        elif thing is not None and getattr(thing, "is_bound", False):
            items += form_errors(thing, non_field=False)
    return {"items": items}
