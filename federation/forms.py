"""Forms: resource editor (YAML template, placement, htmx override/RSP formsets), types, filters."""

from __future__ import annotations

from django import forms

from clusters.models import Cluster
from federation.choices import DriftPolicy, Retention, Toggle, TypeScope
from federation.manifests import ManifestError, dump_yaml, load_yaml
from federation.models import FederatedType
from federation.overrides import DEFAULT_OP, OPS
from federation.rollout_strategy import StrategyError, normalize_strategy
from federation.scheduling import WILDCARD
from fedportal.masking import is_secret_kind, mask_secrets, restore_masked

PLACEMENT_NONE, PLACEMENT_CLUSTERS, PLACEMENT_SELECTOR = "none", "clusters", "selector"
YAML_WIDGET = {"rows": 18, "spellcheck": "false", "class": "mono", "autocomplete": "off"}


def cluster_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in Cluster.objects.order_by("name").values_list("name", flat=True)]


class ClusterPicker(forms.CheckboxSelectMultiple):
    """The placement's cluster checkboxes, each carrying its cluster's labels (data-labels="k=v ...")
    so static/js/cluster-picker.js can search by name or label, tick every match and count."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cluster_labels: dict[str, str] = {}

    def create_option(self, name, value, label, selected, index, subindex=None, attrs=None):
        option = super().create_option(name, value, label, selected, index, subindex=subindex, attrs=attrs)
        option["attrs"]["data-labels"] = self.cluster_labels.get(value, "")
        return option


def _yaml_or_error(text: str, what: str):
    try:
        return load_yaml(text or "")
    except ManifestError as exc:
        raise forms.ValidationError(f"{what}: {exc}") from None


class ResourceForm(forms.Form):
    """Everything but the overrides and RSP rows (those are formsets)."""

    type = forms.ModelChoiceField(queryset=FederatedType.objects.none(), empty_label=None)
    namespace = forms.CharField(
        max_length=63, required=False, help_text="Empty for cluster-scoped types such as Namespace."
    )
    name = forms.CharField(max_length=253)
    template_yaml = forms.CharField(
        label="Template (YAML)",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs=YAML_WIDGET),
        help_text="The object as you would kubectl apply it; apiVersion/kind may be left out, name and namespace come from above.",
    )
    placement_mode = forms.ChoiceField(
        label="Placement",
        initial=PLACEMENT_CLUSTERS,
        widget=forms.RadioSelect,
        choices=[
            (PLACEMENT_CLUSTERS, "Cluster list"),
            (PLACEMENT_SELECTOR, "Label selector"),
            (PLACEMENT_NONE, "Not propagated"),
        ],
        help_text="KubeFed's rules: a cluster list wins over a selector; an empty list selects none; an empty selector selects all.",
    )
    clusters = forms.MultipleChoiceField(required=False, widget=ClusterPicker(attrs={"class": "cluster-picker"}))
    selector_yaml = forms.CharField(
        label="Cluster selector (YAML)",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={**YAML_WIDGET, "rows": 5}),
        help_text="matchLabels: {env: prod}\nmatchExpressions: [{key: region, operator: In, values: [eu-west-1]}]",
    )
    retention = forms.ChoiceField(
        choices=Retention.choices,
        initial=Retention.DELETE,
        help_text="On clusters that leave the placement: Delete the object, or Orphan it (leave it).",
    )
    drift_policy = forms.ChoiceField(
        choices=DriftPolicy.choices,
        initial=DriftPolicy.REPORT,
        help_text="Report external changes, or Enforce (re-apply) them away.",
    )
    rollout_strategy_yaml = forms.CharField(
        label="Rollout strategy (YAML)",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={**YAML_WIDGET, "rows": 8}),
        help_text="Empty: every cluster at once. Waves go in order; a cluster goes in the first wave that selects it.\n"
        'autoRollback: true\nwaves:\n- name: canary\n  clusterSelector: {matchLabels: {canary: "true"}}\n'
        '  maxParallel: 1        # or "25%"\n  bakeSeconds: 60\n- name: prod\n'
        "  clusterSelector: {matchLabels: {env: prod}}\n  requireApproval: true",
    )
    rsp_enabled = forms.BooleanField(label="Replica scheduling (RSP)", required=False)
    total_replicas = forms.IntegerField(required=False, min_value=0, max_value=1_000_000)
    rebalance = forms.BooleanField(required=False)
    intersect_with_cluster_selector = forms.BooleanField(required=False, label="Intersect with placement")
    message = forms.CharField(max_length=500, required=False, label="Change note")

    def __init__(self, *args, edit: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["type"].queryset = FederatedType.objects.filter(propagation=Toggle.ENABLED).order_by("kind")
        self.fields["type"].label_from_instance = lambda t: f"{t.kind} ({t.api_version})"
        rows = list(Cluster.objects.order_by("name").values_list("name", "labels"))
        self.fields["clusters"].choices = [(name, name) for name, _labels in rows]
        self.fields["clusters"].widget.cluster_labels = {
            name: " ".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) for name, labels in rows
        }
        if edit:
            for name in ("type", "namespace", "name"):
                self.fields[name].disabled = True
                self.fields[name].required = False

    def clean_template_yaml(self):
        value = _yaml_or_error(self.cleaned_data.get("template_yaml"), "Template")
        if value is not None and not isinstance(value, dict):
            raise forms.ValidationError("The template must be a YAML mapping (key: value).")
        return value or {}

    def clean_selector_yaml(self):
        value = _yaml_or_error(self.cleaned_data.get("selector_yaml"), "Selector")
        return {} if value is None else value

    def clean_rollout_strategy_yaml(self):
        value = _yaml_or_error(self.cleaned_data.get("rollout_strategy_yaml"), "Rollout strategy")
        try:
            return normalize_strategy(value)
        except StrategyError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean(self):
        data = super().clean()
        if data.get("rsp_enabled") and data.get("total_replicas") is None:
            self.add_error("total_replicas", "Give the total number of replicas to schedule.")
        return data

    def placement(self) -> dict:
        mode = self.cleaned_data.get("placement_mode")
        if mode == PLACEMENT_CLUSTERS:
            return {"clusters": list(self.cleaned_data.get("clusters") or [])}
        if mode == PLACEMENT_SELECTOR:
            return {"clusterSelector": self.cleaned_data.get("selector_yaml")}
        return {}

    @staticmethod
    def initial_for(resource) -> dict:
        """The form's initial values; a Secret's values are shown masked (see restore_secret_values)."""
        revision = resource.current_revision
        template = mask_secrets(revision.template, secret=is_secret_kind(resource.type.kind))
        placement = revision.placement or {}
        if placement.get("clusters") is not None:
            mode = PLACEMENT_CLUSTERS
        elif placement.get("clusterSelector") is not None:
            mode = PLACEMENT_SELECTOR
        else:
            mode = PLACEMENT_NONE
        scheduling = revision.scheduling or {}
        return {
            "type": resource.type_id,
            "namespace": resource.namespace,
            "name": resource.name,
            "template_yaml": dump_yaml(template) if template else "",
            "placement_mode": mode,
            "clusters": placement.get("clusters") or [],
            "selector_yaml": dump_yaml(placement["clusterSelector"]) if placement.get("clusterSelector") else "",
            "retention": resource.retention,
            "drift_policy": resource.drift_policy,
            "rollout_strategy_yaml": dump_yaml(resource.rollout_strategy) if resource.rollout_strategy else "",
            "rsp_enabled": bool(scheduling),
            "total_replicas": scheduling.get("totalReplicas"),
            "rebalance": scheduling.get("rebalance", False),
            "intersect_with_cluster_selector": scheduling.get("intersectWithClusterSelector", False),
        }


class OverrideRowForm(forms.Form):
    # a text box with the cluster names as suggestions (datalist "override-clusters" in the form):
    # searchable, where a <select> of 200 clusters is not; the value must still be one of them
    cluster = forms.ChoiceField(
        choices=(),
        widget=forms.TextInput(
            attrs={"list": "override-clusters", "autocomplete": "off", "placeholder": "cluster name", "size": 18}
        ),
    )
    op = forms.ChoiceField(choices=[(op, op) for op in OPS], initial=DEFAULT_OP)
    path = forms.CharField(
        max_length=500, widget=forms.TextInput(attrs={"placeholder": "/spec/replicas", "class": "mono"})
    )
    value = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 1, "class": "mono", "placeholder": "YAML value"}),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["cluster"].choices = cluster_choices()

    def clean_value(self):
        text = self.cleaned_data.get("value") or ""
        if not text.strip():
            return None
        return _yaml_or_error(text, "Value")

    def operation(self) -> tuple[str, dict]:
        data = self.cleaned_data
        op = {"op": data["op"], "path": data["path"].strip()}
        if data["op"] != "remove":
            op["value"] = data.get("value")
            if data.get("value") is None and not (self.data.get(self.add_prefix("value")) or "").strip():
                op.pop("value")  # the service says "needs a value"
        return data["cluster"], op


class RspRowForm(forms.Form):
    cluster = forms.ChoiceField(choices=())
    weight = forms.IntegerField(min_value=0, max_value=1_000_000, initial=1)
    min_replicas = forms.IntegerField(min_value=0, max_value=1_000_000, required=False)
    max_replicas = forms.IntegerField(min_value=0, max_value=1_000_000, required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["cluster"].choices = [
            ("", "— cluster —"),
            (WILDCARD, "* (every other cluster)"),
        ] + cluster_choices()

    def clean(self):
        data = super().clean()
        low, high = data.get("min_replicas"), data.get("max_replicas")
        if low is not None and high is not None and high < low:
            self.add_error("max_replicas", f"Max replicas ({high}) cannot be below min replicas ({low}).")
        return data

    def preference(self) -> tuple[str, dict]:
        data = self.cleaned_data
        pref = {"weight": data["weight"]}
        if data.get("min_replicas") is not None:
            pref["minReplicas"] = data["min_replicas"]
        if data.get("max_replicas") is not None:
            pref["maxReplicas"] = data["max_replicas"]
        return data["cluster"], pref


class RowsFormSet(forms.BaseFormSet):
    """Rows left empty (every field as rendered: no cluster chosen, nothing typed) are ignored, the
    extra blank row included; a row with anything in it is validated in full."""

    def get_form_kwargs(self, index):
        return {**super().get_form_kwargs(index), "empty_permitted": True}


ROWS_MAX = 200


def rows_formset(row_form, formset=RowsFormSet):
    """At most ROWS_MAX rows. absolute_max: a posted TOTAL_FORMS above it makes no more forms (Django's
    default, max_num + 1,000, built and re-rendered 1,200 erroneous rows for a forged count of 5,000)."""
    return forms.formset_factory(
        row_form,
        formset=formset,
        extra=1,
        can_delete=True,
        max_num=ROWS_MAX,
        validate_max=True,
        absolute_max=ROWS_MAX,
    )


class RspRowsFormSet(RowsFormSet):
    """A cluster has one scheduling preference: a second row for it is refused on that row (both
    went into one mapping and the later row silently replaced the earlier one, its max included)."""

    def clean(self):
        super().clean()
        seen = set()
        for row in self.forms:
            if not row.has_changed() or self._should_delete_form(row) or not hasattr(row, "cleaned_data"):
                continue
            cluster = row.cleaned_data.get("cluster")
            if not cluster:  # the row's own error says the cluster is missing or invalid
                continue
            if cluster in seen:
                shown = "*" if cluster == WILDCARD else cluster
                row.add_error("cluster", f"{shown} has another scheduling row above; keep one.")
            seen.add(cluster)


OverrideFormSet = rows_formset(OverrideRowForm)
RspFormSet = rows_formset(RspRowForm, formset=RspRowsFormSet)
OverrideFormSet.row_label, OverrideFormSet.anchor = "Override", "overrides"  # names in the error summary
RspFormSet.row_label, RspFormSet.anchor = "Scheduling preference", "scheduling"
OVERRIDE_PREFIX, RSP_PREFIX = "ov", "rsp"


def override_initial(revision, *, secret: bool = False) -> list[dict]:
    """The override rows of ``revision``; with ``secret``, values into data/stringData masked."""
    rows = []
    for entry in (revision.overrides if revision else None) or []:
        for op in entry["clusterOverrides"]:
            op = mask_secrets(op, secret=secret)
            value = op.get("value")
            rows.append(
                {
                    "cluster": entry["clusterName"],
                    "op": op.get("op", DEFAULT_OP),
                    "path": op["path"],
                    "value": "" if "value" not in op else dump_yaml(value).strip().removesuffix("...").strip(),
                }
            )
    return rows


def restore_secret_values(template: dict, overrides: list[dict], revision) -> tuple[dict, list[dict]]:
    """A Secret's edit sent back: every mask token left as shown gets its stored value again (the
    template's by position, an override's from the operation with the same cluster, op and path);
    values typed in replace the stored ones. A token that matches nothing raises MaskedValueError."""
    template = restore_masked(template, revision.template if revision else None)
    stored = {
        (entry["clusterName"], op.get("op", DEFAULT_OP), op["path"]): op.get("value")
        for entry in (revision.overrides if revision else None) or []
        for op in entry["clusterOverrides"]
    }
    restored = []
    for entry in overrides:
        ops = []
        for op in entry["clusterOverrides"]:
            if "value" in op:
                old = stored.get((entry["clusterName"], op["op"], op["path"]))
                op = {**op, "value": restore_masked(op["value"], old, path=f"{entry['clusterName']} {op['path']}")}
            ops.append(op)
        restored.append({**entry, "clusterOverrides": ops})
    return template, restored


def rsp_initial(revision) -> list[dict]:
    rows = []
    for name, pref in ((revision.scheduling or {}).get("clusters") or {}).items() if revision else []:
        rows.append(
            {
                "cluster": name,
                "weight": pref.get("weight", 0),
                "min_replicas": pref.get("minReplicas") or None,
                "max_replicas": pref.get("maxReplicas"),
            }
        )
    return rows


def collect_overrides(formset) -> list[dict]:
    merged: dict[str, list] = {}
    for form in formset.forms:
        if not form.has_changed() or (formset.can_delete and formset._should_delete_form(form)):
            continue
        cluster, op = form.operation()
        merged.setdefault(cluster, []).append(op)
    return [{"clusterName": c, "clusterOverrides": ops} for c, ops in merged.items()]


def collect_scheduling(form: ResourceForm, formset) -> dict | None:
    if not form.cleaned_data.get("rsp_enabled"):
        return None
    clusters = {}
    for row in formset.forms:
        if not row.has_changed() or formset._should_delete_form(row):
            continue
        name, pref = row.preference()
        clusters[name] = pref
    return {
        "totalReplicas": form.cleaned_data.get("total_replicas"),
        "rebalance": bool(form.cleaned_data.get("rebalance")),
        "intersectWithClusterSelector": bool(form.cleaned_data.get("intersect_with_cluster_selector")),
        "clusters": clusters,
    }


class FederatedTypeForm(forms.ModelForm):
    class Meta:
        model = FederatedType
        fields = ["group", "version", "kind", "plural", "scope", "propagation", "status_collection"]
        widgets = {"scope": forms.RadioSelect, "propagation": forms.RadioSelect, "status_collection": forms.RadioSelect}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["scope"].choices = TypeScope.choices


class RevisionCompareForm(forms.Form):
    against = forms.IntegerField(required=False, min_value=1)


class PreviewForm(forms.Form):
    revision = forms.IntegerField(required=False, min_value=1)
