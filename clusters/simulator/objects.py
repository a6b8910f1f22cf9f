"""Write path of a simulated apiserver: admission (type meta, names, schema per fieldValidation,
defaults), metadata (uid, resourceVersion, generation), managedFields, roll-out scheduling."""

from __future__ import annotations

import base64
import copy
import json
import uuid
from dataclasses import dataclass, field

import jsonpatch

from clusters import schemas
from clusters.immutable_fields import immutable_changes
from clusters.pod_selectors import selector_problems

from . import capi, custom, defaults, merge, reviews, rollout
from .errors import (
    ApiError,
    already_exists,
    conflict,
    invalid,
    not_found,
    resource_ref,
    success,
    uid_mismatch_no_object,
)
from .meta import deletion_update_causes, metadata_causes
from .store import ClusterState, now_text

FIELD_VALIDATION = ("Strict", "Warn", "Ignore")
READ_ONLY_KINDS = ("Node",)
UNDELETABLE_NAMESPACES = ("default", "kube-system", "kube-public")


@dataclass
class Ctx:
    cluster: ClusterState
    res: schemas.ApiResource
    namespace: str  # "" for cluster-scoped
    name: str | None  # from the URL
    field_validation: str = "Warn"
    field_manager: str = ""
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)
    subresource: str = ""  # "status" or "scale" for a subresource write
    can_write: bool = True  # the read-write token (False: the read-only one)
    operation: str = "Update"

    @property
    def identity(self) -> tuple[str, str, str]:
        """Who writes, as managedFields names it: (manager, operation, subresource)."""
        return self.field_manager, self.operation, self.subresource

    @property
    def minor(self) -> int:
        return self.cluster.minor

    @property
    def custom(self) -> bool:
        return self.cluster.is_custom(self.res)


# ---------------------------------------------------------------------------------------------
# admission steps


def _check_type_meta(ctx: Ctx, obj: dict) -> None:
    res = ctx.res
    api_version = obj.get("apiVersion") or res.api_version
    kind = obj.get("kind") or res.kind
    if api_version != res.api_version:
        raise ApiError(
            400,
            f"the API version in the data ({api_version}) does not match the expected API version ({res.api_version})",
        )
    if kind != res.kind:
        raise ApiError(400, f"the kind in the data ({kind}) does not match the expected kind ({res.kind}) for this URL")
    obj["apiVersion"], obj["kind"] = api_version, kind


def _check_names(ctx: Ctx, obj: dict) -> None:
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise ApiError(
            400,
            f'{ctx.res.kind} in version "{ctx.res.version}" cannot be handled as a '
            f"{ctx.res.kind}: metadata must be an object",
        )
    for key in ("name", "generateName", "namespace", "resourceVersion"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise ApiError(
                400,
                f'{ctx.res.kind} in version "{ctx.res.version}" cannot be handled as a '
                f"{ctx.res.kind}: metadata.{key}: expected string, got {type(meta[key]).__name__}",
            )
    if ctx.name is not None:
        if meta.get("name") in (None, ""):
            meta["name"] = ctx.name
        elif meta["name"] != ctx.name:
            raise ApiError(
                400, f"the name of the object ({meta['name']}) does not match the name on the URL ({ctx.name})"
            )
    if ctx.res.namespaced:
        if meta.get("namespace") in (None, ""):
            meta["namespace"] = ctx.namespace
        elif meta["namespace"] != ctx.namespace:
            raise ApiError(400, "the namespace of the provided object does not match the namespace sent on the request")
    else:
        meta.pop("namespace", None)
    if not meta.get("name"):
        if meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        else:
            raise invalid(
                ctx.res.kind,
                ctx.res.group,
                "",
                [
                    {
                        "reason": "FieldValueRequired",
                        "field": "metadata.name",
                        "message": "Required value: name or generateName is required",
                    }
                ],
            )


def _schema_step(ctx: Ctx, obj: dict, *, check_required: bool = True) -> dict:
    """Unknown fields per fieldValidation; type errors -> 400; missing/unsupported -> 422."""
    if ctx.custom and capi.schema_for(ctx.res.group, ctx.res.version, ctx.res.plural) is not None:
        return _capi_schema_step(ctx, obj, check_required)
    if ctx.custom:
        return obj  # custom objects: schema not enforced (preserve-unknown-fields)
    pruned, problems = schemas.prune_unknown_fields(obj, ctx.minor)
    unknown = [p for p in problems if p.code == "unknown_field"]
    if unknown:
        fields = [schemas.pointer_to_field_path(p.path) for p in unknown]
        if ctx.field_validation == "Strict":
            raise ApiError(
                400,
                f'{ctx.res.kind} in version "{ctx.res.version}" cannot be handled as a '
                f"{ctx.res.kind}: strict decoding error: " + ", ".join(f'unknown field "{f}"' for f in fields),
            )
        if ctx.field_validation == "Warn":
            ctx.warnings.extend(f'unknown field "{f}"' for f in fields)
        obj = pruned
    type_errors = [p for p in problems if p.code == "invalid" and p.message.startswith("expected")]
    if type_errors:
        p = type_errors[0]
        raise ApiError(
            400,
            f'{ctx.res.kind} in version "{ctx.res.version}" cannot be handled as a '
            f"{ctx.res.kind}: {schemas.pointer_to_field_path(p.path)}: {p.message}",
        )
    causes = []
    for p in problems:
        if p.code != "invalid" or p.message.startswith("expected"):
            continue
        if p.message.startswith("Required value") and not check_required:
            continue
        reason = "FieldValueRequired" if p.message.startswith("Required") else "FieldValueNotSupported"
        causes.append({"reason": reason, "field": schemas.pointer_to_field_path(p.path), "message": p.message})
    if causes:
        raise invalid(ctx.res.kind, ctx.res.group, obj.get("metadata", {}).get("name", ""), causes)
    return obj


def _capi_schema_step(ctx: Ctx, obj: dict, check_required: bool) -> dict:
    """Cluster API kinds: their CRD's structural schema (pruning per fieldValidation, 422 for
    type, enum and required-field errors), as the apiextensions apiserver validates them."""
    pruned, unknown, causes = capi.check(ctx.res.plural, obj)
    if unknown:
        if ctx.field_validation == "Strict":
            raise ApiError(
                400,
                f'{ctx.res.kind} in version "{ctx.res.version}" cannot be handled as a '
                f"{ctx.res.kind}: strict decoding error: " + ", ".join(f'unknown field "{f}"' for f in unknown),
            )
        if ctx.field_validation == "Warn":
            ctx.warnings.extend(f'unknown field "{f}"' for f in unknown)
        obj = pruned
    if not check_required:
        causes = [c for c in causes if c["reason"] != "FieldValueRequired"]
    if causes:
        raise invalid(ctx.res.kind, ctx.res.group, obj.get("metadata", {}).get("name", ""), causes)
    return obj


def _apply_defaults(ctx: Ctx, obj: dict) -> None:
    kind = ctx.res.kind
    spec = obj.get("spec")
    if kind in ("Deployment", "ReplicaSet", "StatefulSet") and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        if kind == "Deployment":
            spec.setdefault("progressDeadlineSeconds", 600)
            spec.setdefault(
                "strategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
            )
        template = spec.get("template")
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            template.setdefault("metadata", {}).setdefault("creationTimestamp", None)
            defaults.default_pod_spec(template["spec"])
    elif kind == "Pod" and isinstance(spec, dict):
        defaults.default_pod_spec(spec)
    elif kind == "Job" and isinstance(spec, dict):
        defaults.default_job(spec)
        template = spec.get("template")
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            template.setdefault("metadata", {}).setdefault("creationTimestamp", None)
            defaults.default_pod_spec(template["spec"])
    elif kind == "Service" and isinstance(spec, dict):
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if "port" in port:
                    port.setdefault("targetPort", port["port"])
    elif kind == "Namespace":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    elif kind == "Secret":
        obj.setdefault("type", "Opaque")
        _merge_string_data(obj)


def _merge_string_data(secret: dict) -> None:
    """kube-apiserver's conversion of a v1 Secret: stringData is write-only, merged into data
    (base64, its keys winning) and never stored or returned."""
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = secret.get("data")
        data = dict(data) if isinstance(data, dict) else {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        secret["data"] = data


def _has_status(ctx: Ctx) -> bool:
    if ctx.custom:
        return (ctx.res.group, ctx.res.version, ctx.res.plural) in ctx.cluster.custom_status
    node = schemas.kind_schema(ctx.minor, ctx.res.api_version, ctx.res.kind) or {}
    return "status" in (node.get("properties") or {})


def _body_without_meta(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


# ---------------------------------------------------------------------------------------------
# managed fields


def _entries(obj: dict | None) -> list[dict]:
    return list(((obj or {}).get("metadata") or {}).get("managedFields") or [])


def _entry_paths(entry: dict) -> set:
    return merge.paths_from_fields_v1(entry.get("fieldsV1") or {})


def _kind_node(ctx: Ctx) -> dict:
    return schemas.kind_schema(ctx.minor, ctx.res.api_version, ctx.res.kind) or {}


def _identity(entry: dict) -> tuple[str, str, str]:
    """A manager's identity, as the apiserver's fieldmanager builds it: (manager, operation,
    subresource); an Update by "mgr" and an Apply by "mgr" are two managers."""
    return entry.get("manager", ""), entry.get("operation", "Update"), entry.get("subresource", "")


def _write_entries(ctx: Ctx, obj: dict, owned: dict[tuple[str, str, str], set]) -> None:
    stamp = now_text()
    old = {_identity(e): e for e in _entries(obj)}
    out = []
    for key, paths in owned.items():
        if not paths:
            continue
        manager, operation, subresource = key
        prev = old.get(key)
        entry = {
            "manager": manager,
            "operation": operation,
            "apiVersion": prev.get("apiVersion", ctx.res.api_version)
            if prev and key != ctx.identity
            else ctx.res.api_version,
            "time": stamp if prev is None or _entry_paths(prev) != paths else prev.get("time", stamp),
            "fieldsType": "FieldsV1",
            "fieldsV1": merge.fields_v1(paths),
        }
        if subresource:
            entry["subresource"] = subresource
        out.append(entry)
    if out:
        obj["metadata"]["managedFields"] = out
    else:
        obj["metadata"].pop("managedFields", None)


def _owned(obj: dict | None) -> dict[tuple[str, str, str], set]:
    return {_identity(e): _entry_paths(e) for e in _entries(obj)}


def _requested_entries(new: dict, old: dict | None) -> list[dict] | None:
    """managedFields a client wrote (kubectl's client-side to server-side apply migration, the
    `[{}]` reset), as the fieldmanager reads them: [] or absent leaves the stored ones (clients
    unaware of the field never strip it), [{}] strips them all, anything else different from the
    stored entries replaces them. None: the stored entries stand."""
    requested = new["metadata"].get("managedFields")
    if not requested or requested == _entries(old):
        return None
    if not isinstance(requested, list) or not all(isinstance(e, dict) for e in requested):
        raise ApiError(400, "metadata.managedFields: must be a list of ManagedFieldsEntry objects")
    if requested == [{}]:
        return []
    for entry in requested:
        if entry.get("operation") not in ("Apply", "Update") or entry.get("fieldsType", "FieldsV1") != "FieldsV1":
            raise ApiError(
                400,
                f"metadata.managedFields: invalid entry {_json_text(entry)}: operation must be "
                '"Apply" or "Update" and fieldsType "FieldsV1"',
            )
    return requested


def _json_text(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def _record_update(ctx: Ctx, old: dict | None, new: dict, prior_entries: list[dict]) -> None:
    """An Update (create, PUT, PATCH, or a subresource write) by ctx.identity: it takes the fields it
    changed from every other manager."""
    requested = _requested_entries(new, old) if old is not None else None
    if requested == []:  # the [{}] reset: no managedFields at all afterwards
        new["metadata"].pop("managedFields", None)
        return
    if requested is not None:
        prior_entries = requested
    node = _kind_node(ctx)
    if ctx.subresource == "status":
        old_f = merge.status_paths(ctx.minor, node, old) if old else {}
        new_f = merge.status_paths(ctx.minor, node, new)
    else:
        old_f = merge.field_paths(ctx.minor, node, old) if old else {}
        new_f = merge.field_paths(ctx.minor, node, new)
    changed = {p for p, v in new_f.items() if p not in old_f or old_f[p] != v}
    removed = set(old_f) - set(new_f)
    owned = {_identity(e): _entry_paths(e) for e in prior_entries}
    for key in owned:
        owned[key] = owned[key] - changed - removed
    owned[ctx.identity] = owned.get(ctx.identity, set()) | changed
    new["metadata"]["managedFields"] = prior_entries
    _write_entries(ctx, new, owned)


# ---------------------------------------------------------------------------------------------
# finishing a write


def _finish(ctx: Ctx, obj: dict, old: dict | None) -> dict:
    meta = obj["metadata"]
    if causes := metadata_causes(meta):
        raise invalid(ctx.res.kind, ctx.res.group, meta.get("name", ""), causes)
    if not ctx.subresource and (problems := selector_problems(ctx.res.group, ctx.res.kind, obj)):
        raise invalid(ctx.res.kind, ctx.res.group, meta.get("name", ""), [p.cause for p in problems])
    if ctx.custom and ctx.subresource != "status" and capi.schema_for(ctx.res.group, ctx.res.version, ctx.res.plural):
        if causes := capi.webhook_causes(ctx.res.plural, obj, old):  # its admission webhooks
            raise invalid(ctx.res.kind, ctx.res.group, meta.get("name", ""), causes)
    if old is None:
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_text()
        if defaults.sets_generation(ctx.res.kind, ctx.minor, ctx.custom):
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if _has_status(ctx) and ctx.res.kind != "Namespace":
            obj.pop("status", None)
            status = defaults.initial_status(ctx.res.kind, obj)
            if status is not None:
                obj["status"] = status
        if ctx.res.kind == "Job" and ctx.res.group == "batch":
            defaults.job_selector(obj, ctx.minor)
    else:
        old_meta = old["metadata"]
        if meta.get("uid") and meta["uid"] != old_meta.get("uid"):  # a patch or an apply naming another object
            raise invalid(
                ctx.res.kind,
                ctx.res.group,
                meta.get("name", ""),
                [
                    {
                        "reason": "FieldValueInvalid",
                        "field": "metadata.uid",
                        "message": f'Invalid value: "{meta["uid"]}": field is immutable',
                    }
                ],
            )
        if causes := deletion_update_causes(meta, old_meta):
            raise invalid(ctx.res.kind, ctx.res.group, meta.get("name", ""), causes)
        if not ctx.subresource and (
            changes := immutable_changes(ctx.res.group, ctx.res.kind, obj, old, minor=ctx.minor)
        ):
            raise invalid(
                ctx.res.kind,
                ctx.res.group,
                meta.get("name", ""),
                [{"reason": c.reason, "field": c.field, "message": c.message} for c in changes],
            )
        # an update never clears a deletion (rest.BeforeUpdate keeps the stored one; a new one was refused)
        for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if key in old_meta:
                meta[key] = old_meta[key]
            elif key.startswith("deletion"):
                meta.pop(key, None)
        if (ctx.res.group, ctx.res.kind) == ("", "Namespace") and ctx.subresource != "status":
            # the namespace strategy keeps its status and its finalizers on update
            if "status" in old:
                obj["status"] = old["status"]
            finalizers = (old.get("spec") or {}).get("finalizers")
            if finalizers is not None:
                obj.setdefault("spec", {})["finalizers"] = finalizers
            elif isinstance(obj.get("spec"), dict):
                obj["spec"].pop("finalizers", None)
        if defaults.sets_generation(ctx.res.kind, ctx.minor, ctx.custom):
            generation = old_meta.get("generation", 1)
            if _body_without_meta(obj) != _body_without_meta(old) or _deployment_annotations_changed(
                ctx, meta, old_meta
            ):
                generation += 1
            meta["generation"] = generation
        else:
            meta.pop("generation", None)
        if _has_status(ctx) and ctx.res.kind != "Namespace" and ctx.subresource != "status":
            if "status" in old:
                obj["status"] = old["status"]
            else:
                obj.pop("status", None)
    meta.pop("selfLink", None)
    if ctx.res.kind == "Service" and not ctx.res.group and ctx.subresource != "status":
        others = [
            o
            for o in ctx.cluster.items(ctx.res, None)
            if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) != (ctx.namespace, meta["name"])
        ]
        defaults.allocate_service(obj, old, others)
    if ctx.res.kind == "CustomResourceDefinition" and ctx.res.group == custom.CRD_GROUP:
        previous = (old or {}).get("status") or {}
        if previous.get("acceptedNames") != (obj.get("spec") or {}).get("names"):
            previous = custom.crd_status(obj, now_text())
        obj["status"] = previous
    if (
        ctx.res.kind == "Deployment"
        and not ctx.dry_run
        and (old is None or meta.get("generation") != old["metadata"].get("generation"))
    ):
        # the deployment controller acts on what was stored; a dry run keeps the stored status
        if rollout.same_template(obj, old):
            rollout.rescale(obj, old, now_text())
        else:
            rollout.start(obj, old, now_text())
        start_rollout = True
    else:
        start_rollout = False
    if (
        ctx.res.kind in rollout.WORKLOAD_KINDS
        and ctx.res.group in ("apps", "batch")
        and not ctx.dry_run
        and (old is None or meta.get("generation") != old["metadata"].get("generation"))
    ):
        obj["status"] = rollout.workload_status(
            ctx.res.kind, obj, nodes=ctx.cluster.node_count(), blocked=ctx.cluster.rollout_blocked(obj)
        )
    if old is not None and _unchanged(obj, old):
        return old  # like etcd's guaranteed update: a no-op write keeps the resourceVersion
    if ctx.dry_run:
        meta["resourceVersion"] = (old or {}).get("metadata", {}).get("resourceVersion", "") or str(ctx.cluster.rv + 1)
        return obj
    meta["resourceVersion"] = ctx.cluster.next_rv()
    ctx.cluster.save(ctx.res, obj)
    if start_rollout:
        ctx.cluster.schedule_rollout(obj, ctx.res)
    if ctx.res.kind == "CustomResourceDefinition":
        ctx.cluster.refresh_custom()
    if ctx.res.kind == "Namespace" and old is None:
        ctx.cluster.add_namespace_companions(meta["name"])
    return obj


def _unchanged(obj: dict, old: dict) -> bool:
    def strip(o):
        meta = {k: v for k, v in o.get("metadata", {}).items() if k != "resourceVersion"}
        return {**o, "metadata": meta}

    return strip(obj) == strip(old)


def _refuse_uid_without_object(ctx: Ctx, body) -> None:
    uid = ((body.get("metadata") if isinstance(body, dict) else None) or {}).get("uid")
    if not uid or not isinstance(uid, str) or ctx.res.kind in READ_ONLY_KINDS:
        return
    if ctx.res.namespaced and not ctx.namespace:
        return
    if ctx.res.namespaced and not ctx.cluster.namespace_exists(ctx.namespace):
        raise uid_mismatch_no_object(ctx.res.plural, ctx.res.group, ctx.name, uid)
    if ctx.cluster.load(ctx.res, ctx.namespace, ctx.name) is None:
        raise uid_mismatch_no_object(ctx.res.plural, ctx.res.group, ctx.name, uid)


def _deployment_annotations_changed(ctx: Ctx, meta: dict, old_meta: dict) -> bool:
    """A Deployment's generation moves with its annotations too: they are copied to its ReplicaSets
    (pkg/registry/apps/deployment/strategy.go, PrepareForUpdate)."""
    return (
        ctx.res.group == "apps"
        and ctx.res.kind == "Deployment"
        and ctx.subresource != "status"
        and (meta.get("annotations") or {}) != (old_meta.get("annotations") or {})
    )


def _guard_writable(ctx: Ctx) -> None:
    if ctx.res.kind in READ_ONLY_KINDS:
        raise ApiError(405, f"{ctx.res.plural} are read-only in the fleet simulator (set them in the fleet file)")
    if ctx.res.namespaced and not ctx.namespace:
        raise ApiError(405, "the server does not allow this method on the requested resource")
    if ctx.res.namespaced and not ctx.cluster.namespace_exists(ctx.namespace):
        raise not_found("namespaces", "", ctx.namespace)


def _prepare(ctx: Ctx, body, *, owned: bool = False) -> dict:
    """``body`` checked (type meta, names); a copy unless the caller ``owned`` it (made it itself)."""
    if not isinstance(body, dict):
        raise ApiError(
            400,
            f'{ctx.res.kind} in version "{ctx.res.version}" cannot be handled as a '
            f"{ctx.res.kind}: the body must be a JSON object",
        )
    obj = body if owned else copy.deepcopy(body)
    _check_type_meta(ctx, obj)
    _check_names(ctx, obj)
    return obj


# ---------------------------------------------------------------------------------------------
# verbs


def create(ctx: Ctx, body) -> dict:
    _guard_writable(ctx)
    if ctx.res.verbs == ("create",):  # review kinds: answered, never stored, no name needed
        if not isinstance(body, dict):
            raise ApiError(
                400,
                f'{ctx.res.kind} in version "{ctx.res.version}" cannot be handled as a '
                f"{ctx.res.kind}: the body must be a JSON object",
            )
        obj = copy.deepcopy(body)
        _check_type_meta(ctx, obj)
        return reviews.answer(ctx.res.kind, obj, ctx.can_write)
    obj = _prepare(ctx, body)
    meta = obj.get("metadata") or {}
    _refuse_content_in_terminating_namespace(ctx, meta.get("name") or meta.get("generateName") or "")
    obj = _schema_step(ctx, obj)
    name = obj["metadata"]["name"]
    if ctx.cluster.load(ctx.res, ctx.namespace, name) is not None:
        raise already_exists(ctx.res.plural, ctx.res.group, name)
    obj["metadata"].pop("resourceVersion", None)
    obj["metadata"].pop("managedFields", None)
    _apply_defaults(ctx, obj)
    _record_update(ctx, None, obj, [])
    return _finish(ctx, obj, None)


def update(ctx: Ctx, body) -> dict:
    _guard_writable(ctx)
    obj = _prepare(ctx, body)
    old = ctx.cluster.load(ctx.res, ctx.namespace, ctx.name)
    if old is None:
        raise not_found(ctx.res.plural, ctx.res.group, ctx.name)
    rv = obj["metadata"].get("resourceVersion")
    if rv not in (None, "") and rv != old["metadata"].get("resourceVersion"):
        raise conflict(ctx.res.plural, ctx.res.group, ctx.name)
    uid = obj["metadata"].get("uid")
    if uid and uid != old["metadata"].get("uid"):  # PUT: the object's uid is a storage precondition
        raise ApiError(
            409,
            f"Operation cannot be fulfilled on {ctx.res.plural}{'.' + ctx.res.group if ctx.res.group else ''} "
            f'"{ctx.name}": Precondition failed: UID in precondition: {uid}, UID in object meta: '
            f"{old['metadata'].get('uid')}",
            reason="Conflict",
            details={"name": ctx.name, "group": ctx.res.group, "kind": ctx.res.plural},
        )
    obj = _schema_step(ctx, obj)
    _apply_defaults(ctx, obj)
    _record_update(ctx, old, obj, _entries(old))
    return _finish(ctx, obj, old)


def apply_json_patch(target, body):
    """An RFC 6902 patch applied to a copy of ``target``; 400/422 as the apiserver answers."""
    if not isinstance(body, list):
        raise ApiError(400, "json patch must be a list of operations")
    try:
        return jsonpatch.JsonPatch(body).apply(target)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError, ValueError) as exc:
        raise ApiError(
            422, f"the server rejected our request due to an error in our request: {exc}", reason="Invalid"
        ) from exc


def patch(ctx: Ctx, patch_type: str, body) -> dict:
    _guard_writable(ctx)
    old = ctx.cluster.load(ctx.res, ctx.namespace, ctx.name)
    if old is None:
        raise not_found(ctx.res.plural, ctx.res.group, ctx.name)
    base = copy.deepcopy(old)
    if patch_type == "json":
        new = apply_json_patch(base, body)
    else:
        if not isinstance(body, dict):
            raise ApiError(400, "the patch body must be a JSON object")
        if patch_type == "strategic" and ctx.custom:
            raise ApiError(
                415,
                "strategic merge patch is not supported for custom resources; "
                "use application/merge-patch+json or server-side apply",
            )
        if patch_type == "merge":
            new = merge.json_merge_patch(base, body)
        else:
            new = merge.strategic_merge(ctx.minor, _kind_node(ctx), base, body)
    if not isinstance(new, dict):
        raise ApiError(422, "the patch produced a non-object", reason="Invalid")
    body_meta = body.get("metadata") if isinstance(body, dict) else None
    rv = body_meta.get("resourceVersion") if isinstance(body_meta, dict) else None
    if rv and rv != old["metadata"].get("resourceVersion"):
        raise conflict(ctx.res.plural, ctx.res.group, ctx.name)
    new = _prepare(ctx, new, owned=True)
    new = _schema_step(ctx, new)
    _apply_defaults(ctx, new)
    _record_update(ctx, old, new, _entries(old))
    return _finish(ctx, new, old)


def write_status(ctx: Ctx, patch_type: str | None, body) -> dict:
    """PUT (``patch_type`` None) or PATCH (merge, strategic, json) of ``.../status``: only the status
    changes (the status strategies keep spec and metadata), recorded as an Update of the writer with
    subresource "status"."""
    _guard_writable(ctx)
    old = ctx.cluster.load(ctx.res, ctx.namespace, ctx.name)
    if old is None:
        raise not_found(ctx.res.plural, ctx.res.group, ctx.name)
    if patch_type is None:
        sent = _prepare(ctx, body)
        rv = sent["metadata"].get("resourceVersion")
        if rv not in (None, "") and rv != old["metadata"].get("resourceVersion"):
            raise conflict(ctx.res.plural, ctx.res.group, ctx.name)
    elif patch_type == "json":
        sent = apply_json_patch(copy.deepcopy(old), body)
    elif not isinstance(body, dict):
        raise ApiError(400, "the patch body must be a JSON object")
    elif patch_type == "merge" or ctx.custom:
        sent = merge.json_merge_patch(old, body)
    else:
        sent = merge.strategic_merge(ctx.minor, _kind_node(ctx), old, body)
    if not isinstance(sent, dict):
        raise ApiError(422, "the patch produced a non-object", reason="Invalid")
    new = copy.deepcopy(old)
    if sent.get("status") is None:
        new.pop("status", None)
    else:
        new["status"] = sent["status"]
    ctx.subresource = "status"
    new = _schema_step(ctx, new)
    _record_update(ctx, old, new, _entries(old))
    return _finish(ctx, new, old)


def apply(ctx: Ctx, body, *, force: bool) -> tuple[dict, bool]:
    """Server-side apply. Returns (object, created). One naming a metadata.uid never creates: where
    no object is, it is refused (409) before the namespace is looked for, as kube-apiserver's patcher
    refuses it before admission."""
    _refuse_uid_without_object(ctx, body)
    _guard_writable(ctx)
    if not ctx.field_manager:
        raise ApiError(400, "PATCH, fieldManager: Required value: is required for apply patch")
    applied = _prepare(ctx, body)
    if not applied.get("apiVersion") or not body.get("kind"):
        raise ApiError(400, "apply patches must include apiVersion and kind")
    old = ctx.cluster.load(ctx.res, ctx.namespace, ctx.name)
    if old is None:
        _refuse_content_in_terminating_namespace(ctx, ctx.name or "")
    applied = _schema_step(ctx, applied, check_required=old is None)
    if applied["metadata"].get("managedFields") is not None:
        raise ApiError(400, "metadata.managedFields must be nil")
    applied["metadata"].pop("resourceVersion", None)
    applied.pop("status", None)
    node = _kind_node(ctx)
    applied_f = merge.field_paths(ctx.minor, node, applied)
    ctx.operation = "Apply"
    me = ctx.identity
    if old is None:
        obj = applied
        owned = {me: set(applied_f)}
        _apply_defaults(ctx, obj)
        obj["metadata"]["managedFields"] = []
        _write_entries(ctx, obj, owned)
        return _finish(ctx, obj, None), True
    owned = _owned(old)
    live_f = merge.field_paths(ctx.minor, node, old)
    conflicts: list[tuple[tuple, tuple]] = []
    for key, paths in owned.items():
        if key == me:
            continue
        for path in sorted(paths & set(applied_f), key=str):
            if path[-1] == ".":
                continue
            if live_f.get(path, object()) != applied_f[path]:
                conflicts.append((key, path))
    if conflicts and not force:
        versions = {_identity(e): e.get("apiVersion", ctx.res.api_version) for e in _entries(old)}
        managers = sorted({m for m, _ in conflicts})
        causes = [
            {
                "reason": "FieldManagerConflict",
                "message": f"conflict with {_manager_text(m, versions)}",
                "field": merge.path_text(p),
            }
            for m, p in conflicts
        ]
        message = f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: " + "; ".join(
            f"conflict with {_manager_text(m, versions)}: "
            + ", ".join(merge.path_text(p) for mm, p in conflicts if mm == m)
            for m in managers
        )
        raise ApiError(
            409, message, details={"name": ctx.name, "group": ctx.res.group, "kind": ctx.res.plural, "causes": causes}
        )
    for manager, path in conflicts:  # force: take the fields over
        owned[manager].discard(path)
    others = set().union(*(p for k, p in owned.items() if k != me))
    base = copy.deepcopy(old)
    stale = owned.get(me, set()) - set(applied_f) - others
    # a list item stays while another manager still owns a field inside it
    stale = {p for p in stale if p[-1] != "." or not any(o[: len(p) - 1] == p[:-1] for o in others)}
    # whole list items first (outermost first), then single fields (deepest first)
    for path in sorted(stale, key=lambda p: (0, len(p)) if p[-1] == "." else (1, -len(p))):
        merge.remove_path(base, path)
    obj = merge.apply_merge_into(ctx.minor, node, base, applied)  # base is already a private copy
    obj = _prepare(ctx, obj, owned=True)
    obj = _schema_step(ctx, obj)
    _apply_defaults(ctx, obj)
    owned[me] = set(applied_f)
    _write_entries(ctx, obj, owned)
    return _finish(ctx, obj, old), False


def _manager_text(key: tuple[str, str, str], versions: dict) -> str:
    """How a conflict names a manager (the fieldmanager's printManager): "mgr", with ` with
    subresource "scale"` for a subresource's, and ` using <apiVersion>` for an Update."""
    manager, operation, subresource = key
    text = f'"{manager}"'
    if subresource:
        text += f' with subresource "{subresource}"'
    if operation == "Update":
        text += f" using {versions.get(key, '')}"
    return text


def delete(ctx: Ctx, *, preconditions: dict | None = None) -> dict:
    _guard_writable(ctx)
    old = ctx.cluster.load(ctx.res, ctx.namespace, ctx.name)
    if old is None:
        raise not_found(ctx.res.plural, ctx.res.group, ctx.name)
    _check_preconditions(ctx, old, preconditions or {})
    if ctx.res.kind == "Namespace" and ctx.name in UNDELETABLE_NAMESPACES:
        # NamespaceLifecycle, run as the registry's delete validation: after its preconditions
        raise ApiError(
            403,
            f'namespaces "{ctx.name}" is forbidden: this namespace may not be deleted',
            details={"name": ctx.name, "group": "", "kind": "namespaces"},
        )
    if (ctx.res.group, ctx.res.kind) == ("", "Namespace") and ctx.cluster.spec.namespace_deletion_seconds > 0:
        return _terminate_namespace(ctx, old)
    if not ctx.dry_run:
        ctx.cluster.drop(ctx.res, ctx.namespace, ctx.name)
        if ctx.res.kind == "Namespace":
            _drop_namespace_content(ctx.cluster, ctx.name)
        if ctx.res.kind == "CustomResourceDefinition":
            ctx.cluster.refresh_custom()
    if (ctx.res.group, ctx.res.kind) == ("", "Namespace"):
        # the namespace registry answers the Namespace it marked Terminating (its "kubernetes"
        # finalizer keeps it until the controller is done), here done at once
        return _marked_terminating(old)
    return success(ctx.res.plural, ctx.res.group, ctx.name, old["metadata"].get("uid"))


def _marked_terminating(old: dict) -> dict:
    obj = copy.deepcopy(old)
    obj["metadata"]["deletionTimestamp"] = now_text()
    obj["status"] = {"phase": "Terminating"}
    return obj


def _drop_namespace_content(cluster: ClusterState, namespace: str) -> None:
    for bucket_key, bucket in cluster.data.items():
        for key in [k for k in bucket if k[0] == namespace]:
            cluster.drop_key(bucket_key, *key)


def _terminate_namespace(ctx: Ctx, old: dict) -> dict:
    """A namespace deletion as the apiserver and the namespace controller do it: the Namespace is
    answered (200) Terminating, with a deletionTimestamp; its content is deleted, and the Namespace
    is gone ``namespaceDeletionSeconds`` later. Nothing new may be made in it meanwhile
    (NamespaceLifecycle)."""
    if old["metadata"].get("deletionTimestamp"):
        return old
    obj = _marked_terminating(old)
    if ctx.dry_run:
        return obj
    obj["metadata"]["resourceVersion"] = ctx.cluster.next_rv()
    ctx.cluster.save(ctx.res, obj)
    cluster, res, name, uid = ctx.cluster, ctx.res, ctx.name, old["metadata"].get("uid")
    _drop_namespace_content(cluster, name)  # the controller deletes the content first

    def finish():
        current = cluster.load(res, "", name)
        if current is None or current["metadata"].get("uid") != uid:
            return
        _drop_namespace_content(cluster, name)  # anything an update put back meanwhile
        cluster.drop(res, "", name)

    cluster.later(cluster.spec.namespace_deletion_seconds, finish)
    return obj


def _refuse_content_in_terminating_namespace(ctx: Ctx, name: str) -> None:
    """NamespaceLifecycle admission: nothing new in a namespace being deleted (403, before the object
    is validated or found to exist: admission comes first)."""
    if ctx.res.namespaced and ctx.namespace and ctx.cluster.namespace_terminating(ctx.namespace):
        raise ApiError(
            403,
            f'{resource_ref(ctx.res.plural, ctx.res.group)} "{name}" is forbidden: unable to create new content in '
            f"namespace {ctx.namespace} because it is being terminated",
            details={
                "name": name,
                "group": ctx.res.group,
                "kind": ctx.res.plural,
                "causes": [
                    {
                        "reason": "NamespaceTerminating",
                        "message": f"namespace {ctx.namespace} is being terminated",
                        "field": "metadata.namespace",
                    }
                ],
            },
        )


def _check_preconditions(ctx: Ctx, old: dict, preconditions: dict) -> None:
    """DeleteOptions.preconditions: a uid or resourceVersion other than the stored object's is a 409
    and nothing is deleted. The generic registry checks them in rest.BeforeDelete, its conflict
    naming the kind ("the UID in the precondition (x) does not match the UID in record (y)"); the
    namespace registry checks them itself, in its own words ("Precondition failed: ...")."""
    meta = old["metadata"]
    for key, label, why in (
        ("uid", "UID", "deleted and then recreated"),
        ("resourceVersion", "ResourceVersion", "modified"),
    ):
        wanted = preconditions.get(key)
        if wanted is None or str(wanted) == str(meta.get(key, "")):
            continue
        stored = meta.get(key, "")
        if ctx.res.kind == "Namespace" and not ctx.res.group:
            failed = f"Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {stored}"
            ref, kind = "namespaces", "namespaces"
        else:
            failed = (
                f"the {label} in the precondition ({wanted}) does not match the {label} in record ({stored}). "
                f"The object might have been {why}"
            )
            ref, kind = resource_ref(ctx.res.kind, ctx.res.group), ctx.res.kind
        raise ApiError(
            409,
            f'Operation cannot be fulfilled on {ref} "{ctx.name}": {failed}',
            details={"name": ctx.name, "group": ctx.res.group, "kind": kind},
        )


DELETE_PROPAGATION = ("Foreground", "Background", "Orphan")
_DELETE_OPTION_TYPES = {
    "preconditions": (dict, "v1.Preconditions"),
    "dryRun": (list, "[]string"),
    "propagationPolicy": (str, "v1.DeletionPropagation"),
    "orphanDependents": (bool, "bool"),
    "gracePeriodSeconds": (int, "int64"),
}


def checked_delete_options(options: dict) -> dict:
    """DeleteOptions as the apiserver decodes and validates them (handlers.DeleteResource,
    ValidateDeleteOptions): a field of the wrong type is a 400 (the decoder's); both
    orphanDependents and propagationPolicy, a policy or a dryRun value it does not know, a 422."""
    for key, (expected, go_type) in _DELETE_OPTION_TYPES.items():
        value = options.get(key)
        if key == "dryRun" and isinstance(value, list):  # its items are strings (a null one is "")
            value = next((item for item in value if item is not None and not isinstance(item, str)), None)
            expected, go_type = str, "string"
        if value is not None and (not isinstance(value, expected) or (expected is int and isinstance(value, bool))):
            raise ApiError(
                400,
                f"json: cannot unmarshal {_json_type(value)} into Go struct field DeleteOptions.{key} of type {go_type}",
            )
    causes = []
    policy = options.get("propagationPolicy")
    if policy is not None and options.get("orphanDependents") is not None:
        causes.append(
            {
                "reason": "FieldValueInvalid",
                "field": "propagationPolicy",
                "message": f"Invalid value: {json.dumps(policy)}: orphanDependents and deletionPropagation cannot be both set",
            }
        )
    if policy is not None and policy not in DELETE_PROPAGATION:
        supported = ", ".join(f'"{p}"' for p in (*DELETE_PROPAGATION, "nil"))
        causes.append(
            {
                "reason": "FieldValueNotSupported",
                "field": "propagationPolicy",
                "message": f"Unsupported value: {json.dumps(policy)}: supported values: {supported}",
            }
        )
    dry_run = [item or "" for item in options.get("dryRun") or []]
    if any(value != "All" for value in dry_run):
        causes.append(
            {
                "reason": "FieldValueNotSupported",
                "field": "dryRun",
                "message": f'Unsupported value: {json.dumps(dry_run, separators=(",", ":"))}: supported values: "All"',
            }
        )
    if causes:
        raise invalid("DeleteOptions", "meta.k8s.io", "", causes)
    return options


def delete_options_from_query(query) -> dict:
    """A DELETE without a body takes its DeleteOptions from the query (delete.go)."""
    options: dict = {}
    if dry_run := query.getall("dryRun", []):
        options["dryRun"] = list(dry_run)
    if "propagationPolicy" in query:
        options["propagationPolicy"] = query["propagationPolicy"]
    if "orphanDependents" in query:  # Convert_Slice_string_To_Pointer_bool: only "0" and "false" are false
        options["orphanDependents"] = query["orphanDependents"].lower() not in ("0", "false")
    if "gracePeriodSeconds" in query:
        raw = query["gracePeriodSeconds"]
        try:
            options["gracePeriodSeconds"] = int(raw)
        except ValueError:
            raise ApiError(400, f'strconv.ParseInt: parsing "{raw}": invalid syntax') from None
    return options


def _json_type(value) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "array" if isinstance(value, list) else "object"
