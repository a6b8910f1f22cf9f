"""Federation services: every state change to types, resources and revisions (propagation and
drift live in federation/propagation/). Each writes its audit event explicitly.

Public API (views, the CLI and the approval workflow call these):

    validate_spec(ftype, namespace=, name=, template=, placement=, overrides=, scheduling=) -> dict
    create_resource(ftype, *, namespace, name, template, placement, overrides, scheduling,
                    retention, drift_policy, actor, message="") -> FederatedResource
    update_resource(resource, *, template, placement, overrides, scheduling, actor, message="",
                    retention=None, drift_policy=None) -> Revision      (a new revision per change)
    withdraw_resource(resource, *, actor, message="") -> Revision     (empty placement: an approved delete)
    rollback_resource(resource, *, to_revision, actor) -> Revision     (new revision, old content)
    diff_revisions(old, new) -> RevisionDiff
    create_type / update_type (admin)
    apply_kubefed_file(text, *, actor, cluster_map=None, dry_run=False) -> list[ApplyOutcome]
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Max

from clusters.models import Cluster
from clusters.schemas import plural_for
from clusters.validators import validate_dns1123_label
from federation.apiserver_limits import override_value_problems, spec_value_problems
from federation.choices import DriftPolicy, Retention, Toggle, TypeScope
from federation.content_hooks import settings_changed
from federation.diffs import FieldChange, diff_objects, unified_yaml_diff
from federation.kubefed_import import KubeFedImportError, legacy_ingress_backends, parse_documents
from federation.manifests import (
    ManifestError,
    check_template,
    identity_problems,
    join_api_version,
    metadata_problems,
    override_metadata_problems,
    split_api_version,
)
from federation.models import FederatedResource, FederatedType, Revision, SettingsChange
from federation.overrides import OverrideError, check_overrides, normalize_overrides
from federation.placement import PlacementError, normalize_placement, unknown_clusters
from federation.rendering import base_manifest, content_hash
from federation.rollout_strategy import StrategyError, normalize_strategy
from federation.scheduling import WILDCARD, SchedulingError, normalize_preference
from federation.schema_refusals import fleet_minors, fleet_refusals
from fedportal.audit import record_event
from fedportal.masking import is_secret_kind, mask_secrets
from fedportal.roles import Role, has_role, require_actor_role

# Kinds whose spec.replicas KubeFed's ReplicaSchedulingPreference may drive.
REPLICA_KINDS = ("Deployment", "ReplicaSet", "StatefulSet")
_SUBDOMAIN_MAX = 253


class SpecError(ValueError):
    """Invalid input. ``errors`` maps a field (template/placement/overrides/scheduling/namespace/
    name/__all__) to messages, so forms can show each next to its input."""

    def __init__(self, errors: Mapping[str, list[str]]):
        self.errors = {key: list(value) for key, value in errors.items() if value}
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in self.errors.items()))


class FederationError(RuntimeError):
    """An action that cannot be done in the current state (message is for the user)."""


# --- validation ------------------------------------------------------------------------------


def _check_name(name: str) -> list[str]:
    if (
        not name
        or len(name) > _SUBDOMAIN_MAX
        or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", name)
    ):
        return [f"{name!r} is not a valid object name (lowercase letters, digits, '-' and '.', at most 253)."]
    return []


def validate_spec(
    ftype: FederatedType,
    *,
    namespace: str,
    name: str,
    template,
    placement=None,
    overrides=None,
    scheduling=None,
    known_clusters=None,
    template_is_new: bool = True,
    overrides_are_new: bool = True,
) -> dict:
    """Validate and normalise everything a revision holds; raise SpecError naming each problem.
    ``template_is_new``: the template is not one of the resource's revisions already (an approved
    delete, a rollback or a placement-only edit re-saves one): only new content is checked against
    the template's name and namespace and against the fleet's schemas. ``overrides_are_new`` likewise
    for the labels and annotations the overrides write."""
    errors: dict[str, list[str]] = {}
    if ftype.namespaced:
        try:
            validate_dns1123_label(namespace)
        except ValidationError as exc:
            errors["namespace"] = [m for m in exc.messages]
    elif namespace:
        errors["namespace"] = [f"{ftype.kind} is cluster-scoped: leave the namespace empty."]
    errors["name"] = _check_name(name)
    if ftype.kind == "Namespace" and not errors["name"]:
        try:
            validate_dns1123_label(name)
        except ValidationError as exc:
            errors["name"] = list(exc.messages)
    known = set(known_clusters if known_clusters is not None else Cluster.objects.values_list("name", flat=True))

    result = {"template": None, "placement": {}, "overrides": [], "scheduling": None}
    try:
        result["template"] = check_template(
            template if template is not None else {}, api_version=ftype.api_version, kind=ftype.kind
        )
        result["template"] = {k: v for k, v in result["template"].items() if k not in ("apiVersion", "kind", "status")}
        errors["template"] = spec_value_problems(ftype.kind, result["template"])
        if template_is_new:  # content saved before these checks existed is not refused again
            errors["template"] = (
                identity_problems(result["template"], namespaced=ftype.namespaced, namespace=namespace, name=name)
                + metadata_problems(result["template"])
                + errors["template"]
            )
        if template_is_new and not errors["template"] and not errors.get("name") and not errors.get("namespace"):
            errors["template"] = fleet_refusals(
                base_manifest(result["template"], target=ftype.target, namespace=namespace or "default", name=name),
                fleet_minors(Cluster.objects.values_list("server_version", flat=True).order_by().distinct()),
            )
    except ManifestError as exc:
        errors["template"] = [str(exc)]
    try:
        result["placement"] = normalize_placement(placement)
        missing = unknown_clusters(result["placement"], known)
        if missing:
            errors["placement"] = [f"Unknown cluster{'s' if len(missing) > 1 else ''}: {', '.join(missing)}."]
    except PlacementError as exc:
        errors["placement"] = [str(exc)]
    try:
        result["overrides"] = normalize_overrides(overrides)
        missing = sorted({e["clusterName"] for e in result["overrides"]} - known)
        if missing:
            errors["overrides"] = [
                f"Overrides name unknown cluster{'s' if len(missing) > 1 else ''}: {', '.join(missing)}."
            ]
        elif result["template"] is not None and not errors.get("name") and not errors.get("namespace"):
            rendered = base_manifest(
                result["template"], target=ftype.target, namespace=namespace or "default", name=name
            )
            problems = check_overrides(rendered, result["overrides"])
            if problems:
                errors["overrides"] = [str(p) for p in problems]
            elif not errors.get("template"):
                errors["overrides"] = override_value_problems(ftype.kind, rendered, result["overrides"])
                if overrides_are_new:
                    errors["overrides"] += override_metadata_problems(rendered, result["overrides"])
    except OverrideError as exc:
        errors["overrides"] = [str(exc)]
    try:
        result["scheduling"] = normalize_preference(scheduling)
        if result["scheduling"] is not None:
            if ftype.kind not in REPLICA_KINDS:
                errors["scheduling"] = [f"Replica scheduling applies to {', '.join(REPLICA_KINDS)}, not {ftype.kind}."]
            else:
                missing = sorted(set(result["scheduling"]["clusters"]) - known - {WILDCARD})
                if missing:
                    errors["scheduling"] = [f"Replica scheduling names unknown cluster(s): {', '.join(missing)}."]
    except SchedulingError as exc:
        errors["scheduling"] = [str(exc)]
    if any(errors.values()):
        raise SpecError(errors)
    return result


def spec_hash(spec: Mapping) -> str:
    return content_hash({k: spec.get(k) for k in ("template", "placement", "overrides", "scheduling")})


# --- resources and revisions -----------------------------------------------------------------


def _new_revision(
    resource: FederatedResource, spec: Mapping, *, actor, parent: Revision | None, message: str
) -> Revision:
    number = (resource.revisions.aggregate(n=Max("number"))["n"] or 0) + 1
    revision = Revision.objects.create(
        resource=resource,
        number=number,
        template=spec["template"],
        placement=spec["placement"],
        overrides=spec["overrides"],
        scheduling=spec["scheduling"],
        content_hash=spec_hash(spec),
        parent=parent,
        author=actor if getattr(actor, "pk", None) else None,
        message=message[:500],
    )
    FederatedResource.objects.filter(pk=resource.pk).update(current_revision=revision)
    resource.current_revision = revision
    return revision


def create_resource(
    ftype: FederatedType,
    *,
    namespace: str,
    name: str,
    template,
    placement=None,
    overrides=None,
    scheduling=None,
    retention: str = Retention.DELETE,
    drift_policy: str = DriftPolicy.REPORT,
    actor=None,
    message: str = "",
) -> FederatedResource:
    require_actor_role(actor, Role.OPERATOR)
    namespace = (namespace or "").strip()
    name = (name or "").strip()
    spec = validate_spec(
        ftype,
        namespace=namespace,
        name=name,
        template=template,
        placement=placement,
        overrides=overrides,
        scheduling=scheduling,
    )
    if retention not in Retention.values:
        raise SpecError({"retention": [f"Retention must be one of {', '.join(Retention.values)}."]})
    if drift_policy not in DriftPolicy.values:
        raise SpecError({"drift_policy": [f"Drift policy must be one of {', '.join(DriftPolicy.values)}."]})
    try:
        with transaction.atomic():
            resource = FederatedResource.objects.create(
                type=ftype,
                namespace=namespace,
                name=name,
                retention=retention,
                drift_policy=drift_policy,
                created_by=actor if getattr(actor, "pk", None) else None,
            )
            revision = _new_revision(resource, spec, actor=actor, parent=None, message=message or "Created")
            record_event(
                "federation.resource.create",
                actor=actor,
                obj=resource,
                summary=f"Created {resource} (revision {revision.number})",
                after={
                    **mask_secrets(revision.snapshot, secret=is_secret_kind(ftype.kind)),
                    "retention": retention,
                    "drift_policy": drift_policy,
                },
            )
    except IntegrityError:
        raise SpecError(
            {"name": [f"A federated {ftype.kind} {namespace + '/' if namespace else ''}{name} already exists."]}
        ) from None
    return resource


def update_resource(
    resource: FederatedResource,
    *,
    template,
    placement=None,
    overrides=None,
    scheduling=None,
    actor=None,
    message: str = "",
    retention: str | None = None,
    drift_policy: str | None = None,
    parent: Revision | None = None,
) -> Revision:
    """Save an edit: a new immutable revision when the content changed (else the current one)."""
    require_actor_role(actor, Role.OPERATOR)
    return _save_revision(
        resource,
        template=template,
        placement=placement,
        overrides=overrides,
        scheduling=scheduling,
        actor=actor,
        message=message,
        retention=retention,
        drift_policy=drift_policy,
        parent=parent,
    )


def withdraw_resource(resource: FederatedResource, *, actor=None, message: str = "") -> Revision:
    """The revision that takes ``resource`` off every cluster (its content, an empty placement):
    what an approved delete request applies. Whoever applies the approved request (an approver
    or an operator; None is the system) is recorded as its author."""
    if actor is not None and not (has_role(actor, Role.OPERATOR) or has_role(actor, Role.APPROVER)):
        raise PermissionDenied("Applying a delete request needs the operator or approver role.")
    current = resource.current_revision
    return _save_revision(
        resource,
        template=current.template,
        placement={"clusters": []},
        overrides=current.overrides,
        scheduling=current.scheduling,
        actor=actor,
        message=message or "Delete",
    )


def _save_revision(
    resource: FederatedResource,
    *,
    template,
    placement,
    overrides,
    scheduling,
    actor,
    message: str = "",
    retention: str | None = None,
    drift_policy: str | None = None,
    parent: Revision | None = None,
) -> Revision:
    spec = validate_spec(
        resource.type,
        namespace=resource.namespace,
        name=resource.name,
        template=template,
        placement=placement,
        overrides=overrides,
        scheduling=scheduling,
        template_is_new=not any(template == old for old in resource.revisions.values_list("template", flat=True)),
        overrides_are_new=not any(
            (overrides or []) == (old or []) for old in resource.revisions.values_list("overrides", flat=True)
        ),
    )
    errors = {}
    if retention is not None and retention not in Retention.values:
        errors["retention"] = [f"Retention must be one of {', '.join(Retention.values)}."]
    if drift_policy is not None and drift_policy not in DriftPolicy.values:
        errors["drift_policy"] = [f"Drift policy must be one of {', '.join(DriftPolicy.values)}."]
    if errors:
        raise SpecError(errors)
    with transaction.atomic():
        resource = (
            FederatedResource.objects.select_for_update(of=("self",))
            .select_related("current_revision", "type")
            .get(pk=resource.pk)
        )
        current = resource.current_revision
        settings_before = {"retention": resource.retention, "drift_policy": resource.drift_policy}
        settings_after = {
            "retention": retention or resource.retention,
            "drift_policy": drift_policy or resource.drift_policy,
        }
        if settings_after != settings_before:
            # the safer setting needs nobody's approval: Report (no repairs) and Orphan (removals leave
            # the object) are at once what drift checks and removals act on; Enforce and Delete again
            # need a change request holding them
            safer = {}
            if settings_after["drift_policy"] == DriftPolicy.REPORT:
                safer["approved_drift_policy"] = DriftPolicy.REPORT
            if settings_after["retention"] == Retention.ORPHAN:
                safer["approved_retention"] = Retention.ORPHAN
            FederatedResource.objects.filter(pk=resource.pk).update(**settings_after, **safer)
            record_event(
                "federation.resource.settings",
                actor=actor,
                obj=resource,
                summary=f"Changed settings of {resource}",
                before=settings_before,
                after=settings_after,
            )
            SettingsChange.objects.create(
                resource=resource,
                author=actor if getattr(actor, "pk", None) else None,
                before=settings_before,
                after=settings_after,
            )
            settings_changed(resource, actor=actor)
        if current is not None and current.content_hash == spec_hash(spec):
            return current
        revision = _new_revision(resource, spec, actor=actor, parent=parent or current, message=message or "Edited")
        record_event(
            "federation.resource.update",
            actor=actor,
            obj=resource,
            summary=f"Revision {revision.number} of {resource}",
            before=mask_secrets(current.snapshot, secret=is_secret_kind(resource.type.kind)) if current else None,
            after=mask_secrets(revision.snapshot, secret=is_secret_kind(resource.type.kind)),
        )
    return revision


def rollback_resource(resource: FederatedResource, *, to_revision: Revision, actor=None) -> Revision:
    """A new revision with an old revision's content (history is never rewritten)."""
    require_actor_role(actor, Role.OPERATOR)
    if to_revision.resource_id != resource.pk:
        raise FederationError("That revision belongs to another resource.")
    revision = update_resource(
        resource,
        template=to_revision.template,
        placement=to_revision.placement,
        overrides=to_revision.overrides,
        scheduling=to_revision.scheduling,
        actor=actor,
        message=f"Rollback to revision {to_revision.number}",
        parent=to_revision,
    )
    record_event(
        "federation.resource.rollback",
        actor=actor,
        obj=resource,
        summary=f"Rolled {resource} back to revision {to_revision.number} (now revision {revision.number})",
    )
    return revision


@dataclass
class RevisionDiff:
    old: Revision | None
    new: Revision
    changes: list[FieldChange] = field(default_factory=list)
    text: str = ""

    @property
    def is_empty(self) -> bool:
        return not self.changes


def diff_revisions(old: Revision | None, new: Revision) -> RevisionDiff:
    """Field and text diff of two revisions (Secret values shown only as digests)."""
    secret = is_secret_kind(new.resource.type.kind)
    before = mask_secrets(old.snapshot, secret=secret) if old is not None else {}
    after = mask_secrets(new.snapshot, secret=secret)
    return RevisionDiff(
        old,
        new,
        diff_objects(before, after, ignore=()),
        unified_yaml_diff(
            before,
            after,
            before_label=f"revision {old.number}" if old else "(none)",
            after_label=f"revision {new.number}",
        ),
    )


# --- federated types (admin) -----------------------------------------------------------------

TYPE_FIELDS = ("group", "version", "kind", "plural", "scope", "propagation", "status_collection")
TYPE_NAME_FIELDS = ("group", "version", "kind", "plural")


def _type_snapshot(ftype: FederatedType) -> dict:
    return {name: getattr(ftype, name) for name in TYPE_FIELDS}


def _refuse_kubefed_group(group: str) -> None:
    """KubeFed's own API groups hold its FederatedTypeConfigs and Federated* wrappers, not a type to
    federate (the form, ``fedctl enable`` and the API all come here)."""
    if group == "kubefed.io" or group.endswith(".kubefed.io"):
        raise ValidationError(
            {
                "group": f"{group} is KubeFed's own API group (its FederatedTypeConfigs and Federated* wrappers): "
                "name the type being federated, e.g. group apps for Deployment."
            }
        )


def create_type(*, actor=None, **values) -> FederatedType:
    require_actor_role(actor, Role.ADMIN)
    ftype = FederatedType(**{k: values[k] for k in TYPE_FIELDS if k in values})
    ftype.full_clean()
    _refuse_kubefed_group(ftype.group)
    with transaction.atomic():
        ftype.save()
        record_event(
            "federation.type.create",
            actor=actor,
            obj=ftype,
            summary=f"Enabled federated type {ftype.name}",
            after=_type_snapshot(ftype),
        )
    return ftype


def update_type(ftype: FederatedType, *, actor=None, **changes) -> FederatedType:
    require_actor_role(actor, Role.ADMIN)
    before = _type_snapshot(ftype)
    if "group" in changes and changes["group"] != before["group"]:  # a type stored before stays editable
        _refuse_kubefed_group(changes["group"])
    for key, value in changes.items():
        if key not in TYPE_FIELDS:
            raise FederationError(f"{key} is not a federated type field.")
        setattr(ftype, key, value)
    # a name saved before its rules existed (migration 0014) does not stop a toggle: only what changes is checked
    ftype.full_clean(exclude=[name for name in TYPE_NAME_FIELDS if name not in changes])
    with transaction.atomic():
        ftype.save()
        record_event(
            "federation.type.update",
            actor=actor,
            obj=ftype,
            summary=f"Changed federated type {ftype.name}",
            before=before,
            after=_type_snapshot(ftype),
        )
    return ftype


def find_type(kind: str, api_version: str = "") -> FederatedType | None:
    qs = FederatedType.objects.filter(kind=kind)
    if api_version:
        group, _version = split_api_version(api_version)
        qs = qs.filter(group=group)
    return qs.order_by("group").first()


def enable_hint(kind: str, api_version: str = "") -> str:
    group, version = split_api_version(api_version) if api_version else ("", "")
    guess = (
        f" --group {group or '<group>'} --version {version or '<version>'}"
        if api_version
        else " --group <group> --version <version>"
    )
    return (
        f"Federated type {kind} is not enabled. An admin can enable it on the Federated types page, "
        f"or run: python manage.py fedctl enable {kind}{guess}"
    )


# --- KubeFed import (fedctl apply) -----------------------------------------------------------


@dataclass
class ApplyOutcome:
    kind: str
    namespace: str
    name: str
    action: str  # created / updated / unchanged / scheduled
    revision: int | None = None
    # the federated type: two types may share a kind in different API groups
    group: str = ""
    type_id: int | None = None

    def __str__(self):
        target = f"{self.namespace}/{self.name}" if self.namespace else self.name
        suffix = f" (revision {self.revision})" if self.revision else ""
        return f"{self.kind.lower()}/{target} {self.action}{suffix}"


def current_revision_of(ftype: FederatedType, namespace: str, name: str) -> Revision | None:
    existing = (
        FederatedResource.objects.filter(type=ftype, namespace=namespace, name=name)
        .select_related("current_revision")
        .first()
    )
    return existing.current_revision if existing is not None else None


def retained_scheduling(ftype: FederatedType, namespace: str, name: str) -> dict | None:
    """A Federated<Kind> carries no ReplicaSchedulingPreference (in KubeFed it is its own object):
    applying one keeps the scheduling the resource has, unless the same file holds an RSP for it."""
    revision = current_revision_of(ftype, namespace, name)
    return revision.scheduling if revision is not None else None


def plain_object_spec(ftype: FederatedType, namespace: str, name: str) -> dict:
    """Placement, overrides and scheduling for a plain object applied by ``fedctl apply``.

    Like ``kubefedctl federate``: a new resource is placed with an empty clusterSelector (every
    cluster). An existing federated resource keeps its placement, overrides and scheduling: a plain
    object carries none of them, so applying one never moves or removes anything."""
    revision = current_revision_of(ftype, namespace, name)
    if revision is None:
        return {"placement": {"clusterSelector": {}}, "overrides": [], "scheduling": None}
    return {"placement": revision.placement, "overrides": revision.overrides, "scheduling": revision.scheduling}


def apply_kubefed_file(
    text,
    *,
    actor=None,
    cluster_map: Mapping[str, str] | None = None,
    dry_run: bool = False,
    default_namespace: str = "default",
) -> list[ApplyOutcome]:
    """Import KubeFed (or plain) objects. All or nothing: the first problem raises and nothing is saved."""
    require_actor_role(actor, Role.OPERATOR)
    known = list(Cluster.objects.values_list("name", flat=True))
    try:
        parsed = parse_documents(text, cluster_map=cluster_map, known_clusters=known)
    except KubeFedImportError as exc:
        raise FederationError(str(exc)) from exc
    outcomes: list[ApplyOutcome] = []
    with transaction.atomic():
        pending: dict[tuple, dict] = {}
        for item in parsed.resources:
            ftype = find_type(item.kind, item.api_version)
            if ftype is None or not ftype.propagation_enabled:
                hint = enable_hint(item.kind, item.api_version)
                if ftype is not None:
                    hint = (
                        f"Propagation of {ftype.name} is Disabled; an admin can enable it on the Federated types page."
                    )
                raise FederationError(f"{item.kind} {item.name}: {hint}")
            if item.api_version and item.api_version != ftype.api_version:
                raise FederationError(
                    f"{item.kind} {item.name}: apiVersion {item.api_version} does not match the enabled type ({ftype.api_version})."
                )
            legacy = legacy_ingress_backends(item.template) if ftype.kind == "Ingress" else []
            if legacy:
                raise FederationError(
                    f"Ingress {item.name}: {legacy[0]} uses serviceName/servicePort, the extensions/v1beta1 Ingress that "
                    f"KubeFed's chart federates; Kubernetes removed it in 1.22 and FedPortal federates {ftype.api_version} "
                    "Ingress: write backend.service.name and backend.service.port.number (or .name) instead."
                )
            namespace = (item.namespace or default_namespace) if ftype.namespaced else ""
            key = (ftype.pk, namespace, item.name)
            template = dict(item.template)
            if not isinstance(template.get("metadata") or {}, Mapping):
                raise FederationError(f"{item.kind} {item.name}: the template's metadata must be a mapping.")
            metadata = dict(template.get("metadata") or {})
            metadata.pop("namespace", None)
            metadata.pop("name", None)
            if metadata:
                template["metadata"] = metadata
            else:
                template.pop("metadata", None)
            entry = {
                "ftype": ftype,
                "namespace": namespace,
                "name": item.name,
                "template": template,
                "placement": item.placement,
                "overrides": item.overrides,
                "scheduling": None,
                "kind": item.kind,
                "rollout_strategy": item.rollout_strategy,
            }
            entry.update(
                plain_object_spec(ftype, namespace, item.name)
                if item.source == "plain"
                else {"scheduling": retained_scheduling(ftype, namespace, item.name)}
            )
            pending[key] = entry
        for rsp in parsed.scheduling:
            ftype = find_type(rsp.target_kind)
            if ftype is None:
                raise FederationError(f"ReplicaSchedulingPreference {rsp.name}: {enable_hint(rsp.target_kind)}")
            key = (ftype.pk, rsp.namespace or default_namespace, rsp.name)
            if key not in pending:
                existing = (
                    FederatedResource.objects.filter(type=ftype, namespace=key[1], name=rsp.name)
                    .select_related("current_revision")
                    .first()
                )
                if existing is None:
                    raise FederationError(
                        f"ReplicaSchedulingPreference {key[1]}/{rsp.name}: no Federated{rsp.target_kind} {key[1]}/{rsp.name} "
                        "in this file or already in FedPortal."
                    )
                rev = existing.current_revision
                pending[key] = {
                    "ftype": ftype,
                    "namespace": key[1],
                    "name": rsp.name,
                    "template": rev.template,
                    "placement": rev.placement,
                    "overrides": rev.overrides,
                    "kind": rsp.target_kind,
                }
            pending[key]["scheduling"] = rsp.preference
        for item in pending.values():
            ftype = item["ftype"]
            existing = FederatedResource.objects.filter(
                type=ftype, namespace=item["namespace"], name=item["name"]
            ).first()
            try:
                if existing is None:
                    resource = create_resource(
                        ftype,
                        namespace=item["namespace"],
                        name=item["name"],
                        template=item["template"],
                        placement=item["placement"],
                        overrides=item["overrides"],
                        scheduling=item.get("scheduling"),
                        actor=actor,
                        message="Imported with fedctl apply",
                    )
                    outcomes.append(
                        ApplyOutcome(
                            item["kind"],
                            item["namespace"],
                            item["name"],
                            "created",
                            resource.current_revision.number,
                            group=ftype.group,
                            type_id=ftype.pk,
                        )
                    )
                else:
                    before = existing.current_revision_id
                    revision = update_resource(
                        existing,
                        template=item["template"],
                        placement=item["placement"],
                        overrides=item["overrides"],
                        scheduling=item.get("scheduling"),
                        actor=actor,
                        message="Applied with fedctl apply",
                    )
                    action = "unchanged" if revision.pk == before else "configured"
                    outcomes.append(
                        ApplyOutcome(
                            item["kind"],
                            item["namespace"],
                            item["name"],
                            action,
                            revision.number,
                            group=ftype.group,
                            type_id=ftype.pk,
                        )
                    )
            except SpecError as exc:
                raise FederationError(
                    f"{item['kind']} {item['namespace'] + '/' if item['namespace'] else ''}{item['name']}: {exc}"
                ) from exc
            if item.get("rollout_strategy") is not None:
                resource = FederatedResource.objects.get(type=ftype, namespace=item["namespace"], name=item["name"])
                before = resource.rollout_strategy or {}
                if set_rollout_strategy(resource, item["rollout_strategy"], actor=actor).rollout_strategy != before:
                    if outcomes[-1].action == "unchanged":  # a changed strategy voids approvals: not unchanged
                        outcomes[-1].action = "configured"
        if dry_run:
            transaction.set_rollback(True)
    return outcomes


def set_rollout_strategy(resource: FederatedResource, strategy, *, actor=None) -> FederatedResource:
    """Set the waves an approved change of ``resource`` goes through ({} or None: all at once).
    Validated (federation.rollout_strategy); audited when it changes."""
    require_actor_role(actor, Role.OPERATOR)
    try:
        strategy = normalize_strategy(strategy)
    except StrategyError as exc:
        raise SpecError({"rollout_strategy": [f"rolloutStrategy: {exc}"]}) from exc
    before = resource.rollout_strategy or {}
    if strategy == before:
        return resource
    with transaction.atomic():
        FederatedResource.objects.filter(pk=resource.pk).update(rollout_strategy=strategy)
        resource.rollout_strategy = strategy
        record_event(
            "federation.resource.rollout_strategy",
            actor=actor,
            obj=resource,
            summary=f"Rollout strategy of {resource}: "
            + (", ".join(w["name"] for w in strategy["waves"]) if strategy else "none (all clusters at once)"),
            before={"rolloutStrategy": before},
            after={"rolloutStrategy": strategy},
        )
        # the waves and gates an open request would go through changed: approvals given for the old
        # ones no longer count, and whoever changed them cannot approve (federation.approvals.content)
        SettingsChange.objects.create(
            resource=resource,
            author=actor if getattr(actor, "pk", None) else None,
            before={"rollout_strategy": before},
            after={"rollout_strategy": strategy},
        )
        settings_changed(resource, actor=actor)
    return resource


def enable_type(
    *, kind: str, group: str, version: str, plural: str = "", namespaced: bool = True, actor=None
) -> FederatedType:
    require_actor_role(actor, Role.ADMIN)
    existing = FederatedType.objects.filter(group=group, kind=kind).first()
    if existing is not None:
        if existing.propagation != Toggle.ENABLED:
            return update_type(existing, actor=actor, propagation=Toggle.ENABLED)
        return existing
    return create_type(
        actor=actor,
        group=group,
        version=version,
        kind=kind,
        plural=plural or plural_for(kind),
        scope=TypeScope.NAMESPACED if namespaced else TypeScope.CLUSTER,
        propagation=Toggle.ENABLED,
        status_collection=Toggle.DISABLED,
    )


__all__ = [
    "SpecError",
    "FederationError",
    "validate_spec",
    "create_resource",
    "update_resource",
    "rollback_resource",
    "diff_revisions",
    "create_type",
    "update_type",
    "enable_type",
    "set_rollout_strategy",
    "find_type",
    "apply_kubefed_file",
    "join_api_version",
]
