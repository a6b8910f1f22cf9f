"""The simulator's HTTP server: one aiohttp app, every cluster under /clusters/<name>.

Routing, auth, faults and (de)serialisation live here; object semantics live in objects.py.
Admin endpoints (faults, external edits, version changes, object reads) are under /_fleet/ and
need the admin token.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import os
import random
import re
import time

import yaml
from aiohttp import web

from clusters import schemas

from . import capi, discovery, objects, openapi, protobuf, reviews, scale, tables
from .errors import ApiError, conflict, not_found
from .fleet import FleetSpec, FleetSpecError, parse_capacity, parse_faults, parse_version
from .store import DROP, ClusterState, parse_field_selector, parse_selector

MAX_BODY = 3 * 1024 * 1024  # the apiserver's request size limit
# a watch with allowWatchBookmarks gets a bookmark after this long without events, as an apiserver
# sends one about every minute (FLEET_BOOKMARK_SECONDS: shorter in tests)
BOOKMARK_SECONDS = float(os.environ.get("FLEET_BOOKMARK_SECONDS") or 60)
WRITE_METHODS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+json": "apply",
}
_GO_VERSIONS = {
    25: "go1.19.13",
    26: "go1.20.10",
    27: "go1.20.12",
    28: "go1.20.13",
    29: "go1.21.9",
    30: "go1.22.5",
    31: "go1.22.7",
    32: "go1.23.6",
    33: "go1.24.4",
    34: "go1.24.6",
    35: "go1.25.3",
    36: "go1.25.5",
    37: "go1.26.1",
}
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
log = logging.getLogger("clusters.simulator")


class Fleet:
    def __init__(self, spec: FleetSpec, admin_token: str):
        self.clusters: dict[str, ClusterState] = {c.name: ClusterState(c) for c in spec.clusters}
        self.admin_token = admin_token
        self.started = time.time()
        self.capi: capi.Controller | None = None
        if any(c.capi for c in spec.clusters):
            self.capi = capi.Controller(self.clusters)
            self.capi.install()


def version_info(git_version: str) -> dict:
    major, minor, patch = parse_version(git_version)
    commit = hashlib.sha1(git_version.encode()).hexdigest()
    info = {
        "major": str(major),
        "minor": str(minor),
        "gitVersion": git_version,
        "gitCommit": commit,
        "gitTreeState": "clean",
        "buildDate": f"{2014 + minor // 3}-0{1 + patch % 9}-1{patch % 10}T09:47:40Z",
        "goVersion": _GO_VERSIONS.get(minor, "go1.22.5"),
        "compiler": "gc",
        "platform": "linux/amd64",
    }
    if minor >= 33:
        info.update(
            {
                "emulationMajor": str(major),
                "emulationMinor": str(minor),
                "minCompatibilityMajor": str(major),
                "minCompatibilityMinor": str(minor - 1),
            }
        )
    return info


def _json(body, status: int = 200, warnings: list[str] | None = None) -> web.Response:
    data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
    resp = web.Response(body=data, status=status, content_type="application/json")
    for text in warnings or ():
        escaped = json.dumps(text)[1:-1]  # quotes, backslashes, control and non-ASCII characters escaped
        resp.headers.add("Warning", f'299 - "{escaped}"')
    return resp


def _error(err: ApiError) -> web.Response:
    # the apiserver's JSON serializer ends an encoded object with a newline (encoding/json Encoder)
    return _json(json.dumps(err.status(), separators=(",", ":")).encode() + b"\n", err.code)


def _list_key(obj: dict) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


def _continue_state(token: str) -> tuple[int, tuple[str, str]]:
    """The resourceVersion and last key a continue token names (storage.DecodeContinue): 400 for a
    token we did not make or one naming no resourceVersion."""
    try:
        state = json.loads(base64.urlsafe_b64decode(token.encode()).decode())
        namespace, name = state["start"]
        version = int(state["rv"])
    except (ValueError, TypeError, KeyError, UnicodeDecodeError, OverflowError) as exc:
        raise ApiError(400, f"invalid continue token: continue key is not valid: {exc}") from None
    if version == 0:
        raise ApiError(
            400,
            "invalid continue token: continue key is not valid: incorrect encoded start resourceVersion "
            "(version meta.k8s.io/v1)",
        )
    return version, (str(namespace), str(name))


async def _delete_options(request: web.Request) -> dict:
    """A DELETE's DeleteOptions: its body's (preconditions, dryRun, propagationPolicy), or without one
    its query's, validated. kubectl's protobuf DeleteOptions are not decoded (their preconditions are
    not checked)."""
    if request.content_type == protobuf.CONTENT_TYPE:
        return {}
    raw = await request.content.read(MAX_BODY + 1) if request.can_read_body else b""
    if len(raw) > MAX_BODY:
        raise ApiError(413, f"Request entity too large: limit is {MAX_BODY}")
    if not raw.strip():
        return objects.checked_delete_options(objects.delete_options_from_query(request.query))
    try:
        options = (
            json.loads(raw) if raw.lstrip().startswith(b"{") else yaml.load(raw.decode("utf-8"), Loader=_SAFE_LOADER)
        )
    except (ValueError, yaml.YAMLError) as exc:
        raise ApiError(400, f"the body of the request could not be decoded as DeleteOptions: {exc}") from None
    if not isinstance(options, dict):
        raise ApiError(400, "the body of the request must be a DeleteOptions object")
    return objects.checked_delete_options(options)


async def _read_body(request: web.Request):
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise ApiError(413, f"Request entity too large: limit is {MAX_BODY}")
    # read(n) returns what has arrived, up to n bytes: a body that came in several TCP segments was
    # cut short and answered 400 as unparsable (a 256 KiB body did, under load); read to its end
    raw = bytearray()
    while len(raw) <= MAX_BODY and (chunk := await request.content.read(MAX_BODY + 1 - len(raw))):
        raw += chunk
    raw = bytes(raw)
    if len(raw) > MAX_BODY:
        raise ApiError(413, f"Request entity too large: limit is {MAX_BODY}")
    if not raw.strip():
        raise ApiError(400, "the body of the request was empty")
    ctype = request.content_type
    if ctype == protobuf.CONTENT_TYPE:
        return protobuf.decode_body(raw)
    try:
        if "yaml" in ctype:
            if raw.lstrip().startswith(b"{"):  # what clients send as an apply patch: JSON, parsed fast
                _refuse_what_yaml_refuses(raw)
                try:
                    return json.loads(raw)
                except ValueError:
                    pass  # a YAML flow mapping, not JSON
            return yaml.load(raw.decode("utf-8"), Loader=_SAFE_LOADER)
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, yaml.YAMLError) as exc:
        kind = "yaml" if "yaml" in ctype else "json"
        raise ApiError(400, f"couldn't get version/kind; {kind} parse error: {str(exc).splitlines()[0]}") from exc


# What the apiserver's YAML reader (go-yaml's scannerc.go and readerc.go) refuses in a body that JSON
# would take: a \\u escape of a UTF-16 surrogate (what an ASCII-only JSON encoder writes for a character
# beyond U+FFFF), and a raw DEL, C1 control character or U+FFFE.
_SURROGATE_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_YAML_CONTROL = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xef\xbf\xbe")


def _refuse_what_yaml_refuses(raw: bytes) -> None:
    if _SURROGATE_ESCAPE.search(raw):
        raise ValueError("yaml: found invalid Unicode character escape code")
    if _YAML_CONTROL.search(raw):
        raise ValueError("yaml: control characters are not allowed")


def _bool(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("true", "1")


class ClusterHandler:
    def __init__(self, fleet: Fleet):
        self.fleet = fleet

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        cluster = self.fleet.clusters.get(request.match_info["cluster"])
        if cluster is None:
            return _error(ApiError(404, "the server could not find the requested resource"))
        cluster.requests[request.method] = cluster.requests.get(request.method, 0) + 1
        if request.method in WRITE_METHODS:
            started = time.time()
            try:
                return await self.answer(request, cluster)
            finally:
                cluster.write_log.append(
                    {"method": request.method, "path": request.path, "start": started, "end": time.time()}
                )
        return await self.answer(request, cluster)

    async def answer(self, request: web.Request, cluster: ClusterState) -> web.StreamResponse:
        faults = cluster.faults
        if faults.latency_ms:
            await asyncio.sleep(faults.latency_ms / 1000)
        if faults.down == "refused":
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError()
        if faults.down == "503":
            return _error(ApiError(503, "the server is currently unable to handle the request"))
        if faults.error_rate and random.random() < faults.error_rate:
            return _error(ApiError(500, "Internal error occurred: simulated fault"))
        tail = request.match_info.get("tail", "").strip("/")
        try:
            return await self.dispatch(request, cluster, tail)
        except ApiError as err:
            return _error(err)
        except Exception:  # a simulator bug must still answer like an apiserver, and be visible
            log.exception("unhandled error serving %s %s", request.method, request.path)
            return _error(ApiError(500, "Internal error occurred: fleet simulator bug (see its log)"))

    def authenticate(self, request: web.Request, cluster: ClusterState, public: bool) -> bool:
        """Returns True for a read-write token, False for read-only; raises 401 otherwise."""
        header = request.headers.get("Authorization", "")
        if not header:
            if public:
                return False
            raise ApiError(401, "Unauthorized")
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise ApiError(401, "Unauthorized")
        if token == cluster.spec.token:
            return True
        if token == cluster.spec.readonly_token:
            return False
        raise ApiError(401, "Unauthorized")

    async def dispatch(self, request: web.Request, cluster: ClusterState, tail: str) -> web.StreamResponse:
        parts = tail.split("/") if tail else []
        head = parts[0] if parts else ""
        if head == "readyz" and cluster.faults.no_readyz:
            raise ApiError(404, "the server could not find the requested resource")
        if head in ("healthz", "readyz", "livez"):
            return web.Response(text="ok")
        public = head == "version"
        can_write = self.authenticate(request, cluster, public)
        if head == "version" and len(parts) == 1:
            return _json(version_info(cluster.git_version))
        if head == "openapi" and parts[1:2] == ["v3"]:
            doc = openapi.document(cluster.minor, "/".join(parts[2:]), cluster.custom_resources(), cluster.api_config)
            if doc is None:
                raise ApiError(404, "the server could not find the requested resource")
            if request.method != "GET":
                raise ApiError(405, "the server does not allow this method on the requested resource")
            return _json(doc)
        if head not in ("api", "apis"):
            raise ApiError(404, "the server could not find the requested resource")
        doc = (
            discovery.document_with_custom(cluster.minor, tail, cluster.custom_resources(), cluster.api_config)
            if len(parts) <= (2 if head == "api" else 3)
            else None
        )
        if doc is not None:
            if request.method != "GET":
                raise ApiError(405, "the server does not allow this method on the requested resource")
            return _json(doc)
        if head == "api":
            if len(parts) < 3 or parts[1] != "v1":
                raise ApiError(404, "the server could not find the requested resource")
            gv, rest = "v1", parts[2:]
        else:
            if len(parts) < 4:
                raise ApiError(404, "the server could not find the requested resource")
            gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        plural, name, sub = rest[0], (rest[1] if len(rest) > 1 else None), (rest[2] if len(rest) > 2 else None)
        if len(rest) > 3:
            raise ApiError(404, "the server could not find the requested resource")
        res = cluster.find_resource(gv, plural)
        if res is None or res.plural != plural:
            raise ApiError(404, "the server could not find the requested resource")
        if namespace and not res.namespaced:
            raise ApiError(404, "the server could not find the requested resource")
        if sub is not None and sub != "status" and not (sub == "scale" and res.kind in scale.SCALED_KINDS):
            raise ApiError(404, "the server could not find the requested resource")
        if request.method in WRITE_METHODS and not can_write and res.kind not in reviews.SELF_REVIEWS:
            verb = WRITE_METHODS[request.method]
            where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
            target = f"{res.plural}.{res.group}" if res.group else res.plural
            quoted = f'"{name}" ' if name else ""
            raise ApiError(
                403,
                f"{target} {quoted}is forbidden: User "
                f'"system:serviceaccount:fleet:readonly" cannot {verb} resource '
                f'"{res.plural}" in API group "{res.group}"{where}',
                details={"name": name or "", "group": res.group, "kind": res.plural},
            )
        ctx = objects.Ctx(cluster, res, namespace, name, can_write=can_write)
        deprecated = schemas.deprecation_warning(cluster.minor, res.api_version, res.kind)
        if deprecated:
            ctx.warnings.append(deprecated)
        if sub == "scale":
            return await self.serve_scale(request, ctx)
        if sub == "status" and request.method != "GET":
            return await self.serve_status(request, ctx)
        return await self.serve(request, ctx)

    async def serve_status(self, request: web.Request, ctx: objects.Ctx) -> web.Response:
        """PUT or PATCH .../<name>/status: the status alone, under its own managedFields entry."""
        if request.method not in ("PUT", "PATCH"):
            raise ApiError(405, "the server does not allow this method on the requested resource")
        patch_type = None
        if request.method == "PATCH":
            patch_type = PATCH_TYPES.get(request.content_type)
            if patch_type in (None, "apply"):
                raise ApiError(
                    415,
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {', '.join(t for t in PATCH_TYPES if 'apply' not in t)}",
                )
        body = await _read_body(request)
        ctx.field_manager = (
            request.query.get("fieldManager") or request.headers.get("User-Agent", "unknown").split("/")[0]
        )
        ctx.dry_run = request.query.get("dryRun") == "All"
        return _json(objects.write_status(ctx, patch_type, body), 200, ctx.warnings)

    async def serve_scale(self, request: web.Request, ctx: objects.Ctx) -> web.Response:
        """GET, PUT or PATCH .../<name>/scale: the parent's replicas as an autoscaling/v1 Scale."""
        if request.method not in ("GET", "PUT", "PATCH"):
            raise ApiError(405, "the server does not allow this method on the requested resource")
        body = await _read_body(request) if request.method != "GET" else None
        # no await from here on: the Scale is read and written against the same live object
        obj = ctx.cluster.load(ctx.res, ctx.namespace, ctx.name)
        if obj is None:
            raise not_found(ctx.res.plural, ctx.res.group, ctx.name)
        current = scale.scale_of(ctx.res.kind, obj)
        if request.method == "GET":
            return _json(current, 200, ctx.warnings)
        if request.method == "PUT":
            wanted = body
        else:
            patch_type = PATCH_TYPES.get(request.content_type)
            if patch_type is None:
                raise ApiError(
                    415,
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {', '.join(t for t in PATCH_TYPES if 'apply' not in t)}",
                )
            wanted = scale.patched(current, patch_type, body)
        replicas, rv = scale.checked(ctx.name, ctx.namespace, wanted)
        if rv and rv != current["metadata"].get("resourceVersion"):
            raise conflict(ctx.res.plural, ctx.res.group, ctx.name)
        ctx.field_manager = (
            request.query.get("fieldManager") or request.headers.get("User-Agent", "unknown").split("/")[0]
        )
        ctx.dry_run = request.query.get("dryRun") == "All"
        ctx.subresource = "scale"  # its own managedFields entry, as the apiserver records it
        updated = objects.patch(ctx, "merge", {"spec": {"replicas": replicas}})
        return _json(scale.scale_of(ctx.res.kind, updated), 200, ctx.warnings)

    async def serve(self, request: web.Request, ctx: objects.Ctx) -> web.StreamResponse:
        method, res, cluster = request.method, ctx.res, ctx.cluster
        if method == "GET" and ctx.name is None:
            if _bool(request, "watch"):
                return await self.watch(request, ctx)
            return self.list(request, ctx)
        if method == "GET":
            obj = cluster.load(res, ctx.namespace, ctx.name)
            if obj is None:
                raise not_found(res.plural, res.group, ctx.name)
            table_version = tables.wants_table(request.headers.get("Accept", ""))
            if table_version:
                return _json(
                    tables.table(table_version, res.kind, [obj], obj["metadata"].get("resourceVersion", "")),
                    200,
                    ctx.warnings,
                )
            return _json(obj, 200, ctx.warnings)
        if method not in ("POST", "PUT", "PATCH", "DELETE"):
            raise ApiError(405, "the server does not allow this method on the requested resource")
        validation = request.query.get("fieldValidation", "Warn") or "Warn"
        if validation not in objects.FIELD_VALIDATION:
            raise ApiError(400, f'fieldValidation must be one of "Ignore", "Warn", "Strict" (got "{validation}")')
        ctx.field_validation = validation
        ctx.dry_run = request.query.get("dryRun") == "All"
        user_agent = request.headers.get("User-Agent", "unknown")
        ctx.field_manager = request.query.get("fieldManager", "")
        if method == "DELETE":
            if ctx.name is None:
                return self.delete_collection(request, ctx)
            options = await _delete_options(request)
            ctx.dry_run = bool(options.get("dryRun"))  # the body's, or the query's without one
            return _json(objects.delete(ctx, preconditions=options.get("preconditions") or {}), 200, ctx.warnings)
        if method == "POST":
            if ctx.name is not None:
                raise ApiError(405, "the server does not allow this method on the requested resource")
            body = await _read_body(request)
            ctx.field_manager = ctx.field_manager or user_agent.split("/")[0]
            obj = objects.create(ctx, body)
            return _json(obj, 201, ctx.warnings)
        if ctx.name is None:
            raise ApiError(405, "the server does not allow this method on the requested resource")
        if method == "PUT":
            body = await _read_body(request)
            ctx.field_manager = ctx.field_manager or user_agent.split("/")[0]
            return _json(objects.update(ctx, body), 200, ctx.warnings)
        patch_type = PATCH_TYPES.get(request.content_type)
        if patch_type is None:
            raise ApiError(
                415,
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {', '.join(PATCH_TYPES)}",
            )
        body = await _read_body(request)
        if patch_type == "apply":
            obj, created = objects.apply(ctx, body, force=_bool(request, "force"))
            return _json(obj, 201 if created else 200, ctx.warnings)
        ctx.field_manager = ctx.field_manager or user_agent.split("/")[0]
        return _json(objects.patch(ctx, patch_type, body), 200, ctx.warnings)

    @staticmethod
    def _scope_and_filter(request: web.Request, ctx: objects.Ctx):
        """The namespace a collection request covers (None: all) and its selectors as a predicate."""
        labels = parse_selector(request.query.get("labelSelector"))
        fields = parse_field_selector(request.query.get("fieldSelector"))
        scope = ctx.namespace if ctx.res.namespaced and ctx.namespace else None

        def matches(obj: dict) -> bool:
            meta = obj["metadata"]
            return (scope is None or meta.get("namespace", "") == scope) and labels(meta.get("labels")) and fields(obj)

        return scope, matches

    @staticmethod
    def _seen_by(matches, event: str, obj: dict, previous: bytes | None) -> str | None:
        """The event a watch with ``matches`` sees for a change, as a real apiserver's watch cache:
        a MODIFIED object that starts matching is ADDED for it, one that stops matching is DELETED;
        None when the watch sees nothing."""
        now = matches(obj)
        if event != "MODIFIED" or previous is None:
            return event if now else None
        before = matches(json.loads(previous))
        if now:
            return "MODIFIED" if before else "ADDED"
        return "DELETED" if before else None

    def _selected(self, request: web.Request, ctx: objects.Ctx):
        scope, matches = self._scope_and_filter(request, ctx)
        return [o for o in ctx.cluster.items(ctx.res, scope) if matches(o)]

    async def watch(self, request: web.Request, ctx: objects.Ctx) -> web.StreamResponse:
        """A watch: newline-delimited JSON events (ADDED, MODIFIED, DELETED; ERROR 410 when the
        resourceVersion asked for is older than the kept history) until timeoutSeconds.

        resourceVersion "" or "0" starts with an ADDED event per current object; a number resumes
        after it. With selectors, an object that starts matching is ADDED and one that stops matching
        is DELETED. With allowWatchBookmarks=true, a BOOKMARK (the current resourceVersion) is sent
        after BOOKMARK_SECONDS without events and before the watch times out."""
        cluster, res = ctx.cluster, ctx.res
        scope, matches = self._scope_and_filter(request, ctx)
        since_text = request.query.get("resourceVersion", "")
        try:
            since = int(since_text) if since_text not in ("", "0") else None
            timeout = float(request.query.get("timeoutSeconds") or 1800)
        except ValueError as exc:
            raise ApiError(400, f"invalid resourceVersion or timeoutSeconds: {exc}") from exc
        table_version = tables.wants_table(request.headers.get("Accept", ""))
        bookmarks = _bool(request, "allowWatchBookmarks")

        def line(event: str, obj: dict) -> bytes:
            if table_version and event not in ("ERROR", "BOOKMARK"):
                obj = tables.table(table_version, res.kind, [obj], obj["metadata"].get("resourceVersion", ""))
            return json.dumps({"type": event, "object": obj}, separators=(",", ":")).encode() + b"\n"

        queue = cluster.subscribe(res)  # before reading what is there, so nothing falls in between
        try:  # until the response has started, an error is an ordinary error response
            if since is None:
                first = [line("ADDED", o) for o in cluster.items(res, scope) if matches(o)]
                sent = cluster.rv
            else:
                kept = cluster.events_since(res, since)
                if kept is None:
                    gone = ApiError(410, f"too old resource version: {since} ({cluster.history_start})").status()
                    gone["reason"] = "Expired"
                    first = [line("ERROR", gone)]
                    sent = None
                else:
                    first = []
                    for _, _, event, raw, previous in kept:
                        obj = json.loads(raw)
                        seen = self._seen_by(matches, event, obj, previous)
                        if seen:
                            first.append(line(seen, obj))
                    sent = max([since] + [rv for rv, *_ in kept])
        except BaseException:
            cluster.unsubscribe(res, queue)
            raise
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            await response.prepare(request)
            for chunk in first:
                await response.write(chunk)
            deadline = time.monotonic() + max(0.0, min(timeout, 3600.0))
            quiet_since = time.monotonic()

            def bookmark() -> bytes:  # every event up to cluster.rv is delivered: the queue is empty
                return line(
                    "BOOKMARK",
                    {
                        "kind": res.kind,
                        "apiVersion": res.api_version,
                        "metadata": {"resourceVersion": str(max(sent, cluster.rv))},
                    },
                )

            while sent is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if bookmarks and queue.empty():
                        await response.write(bookmark())
                    break
                try:
                    # wake at least every second to notice a client that went away
                    entry = await asyncio.wait_for(queue.get(), min(remaining, 1.0))
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        return response
                    if bookmarks and time.monotonic() - quiet_since >= BOOKMARK_SECONDS:
                        await response.write(bookmark())
                        quiet_since = time.monotonic()
                    continue
                if entry is None:  # the server is shutting down
                    break
                if entry == DROP:  # fleetctl drop-watches: the connection breaks, no clean end
                    if request.transport is not None:
                        request.transport.abort()
                    return response
                rv, _, event, raw, previous = entry
                if rv <= sent:
                    continue  # already part of the initial state (a read converged a roll-out)
                sent = rv
                obj = json.loads(raw)
                seen = self._seen_by(matches, event, obj, previous)
                if seen:
                    await response.write(line(seen, obj))
                    quiet_since = time.monotonic()
            await response.write_eof()
        except ConnectionResetError:  # the client went away (aiohttp's ClientConnectionResetError)
            pass
        except Exception:  # the response has started: log it, never answer a second time
            log.exception("watch of %s failed", request.path)
        finally:
            cluster.unsubscribe(res, queue)
        return response

    def list(self, request: web.Request, ctx: objects.Ctx) -> web.Response:
        """A list, in pages when asked (limit, continue). As kube-apiserver's continue token does, ours
        names the first page's resourceVersion and the key of the last object served: every page
        answers that resourceVersion (the one to watch from), and the next page starts after that
        key, so an object deleted meanwhile shifts nothing. Objects are read as they are now (etcd
        would serve the first page's snapshot): a change made between pages reaches a watch from that
        resourceVersion anyway."""
        items = self._selected(request, ctx)
        meta = {"resourceVersion": str(ctx.cluster.rv)}
        if request.query.get("continue"):
            if request.query.get("resourceVersion", "") not in ("", "0"):
                raise ApiError(400, "specifying resource version is not allowed when using continue")
            snapshot, after = _continue_state(request.query["continue"])
            if snapshot > 0:  # a negative one reads the latest (etcd3's continue)
                meta["resourceVersion"] = str(snapshot)
            items = [o for o in items if _list_key(o) > after]
        limit_text = request.query.get("limit", "")
        try:
            limit = int(limit_text) if limit_text else 0
        except ValueError as exc:
            raise ApiError(400, f'invalid value for limit: "{limit_text}"') from exc
        if 0 < limit < len(items):
            state = {
                "v": "meta.k8s.io/v1",
                "rv": int(meta["resourceVersion"]),
                "start": list(_list_key(items[limit - 1])),
            }
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
            if not request.query.get("labelSelector") and not request.query.get("fieldSelector"):
                meta["remainingItemCount"] = len(items) - limit  # only an unfiltered list counts them
            items = items[:limit]
        table_version = tables.wants_table(request.headers.get("Accept", ""))
        if table_version:
            doc = tables.table(table_version, ctx.res.kind, items, meta["resourceVersion"])
            doc["metadata"].update({k: v for k, v in meta.items() if k != "resourceVersion"})
            return _json(doc, 200, ctx.warnings)
        for item in items:
            item.pop("apiVersion", None)
            item.pop("kind", None)
        return _json(
            {"kind": f"{ctx.res.kind}List", "apiVersion": ctx.res.api_version, "metadata": meta, "items": items},
            200,
            ctx.warnings,
        )

    def delete_collection(self, request: web.Request, ctx: objects.Ctx) -> web.Response:
        items = [
            i
            for i in self._selected(request, ctx)
            if not (ctx.res.kind == "Namespace" and i["metadata"]["name"] in objects.UNDELETABLE_NAMESPACES)
        ]
        for item in items:
            sub = objects.Ctx(
                ctx.cluster,
                ctx.res,
                item["metadata"].get("namespace", ""),
                item["metadata"]["name"],
                dry_run=ctx.dry_run,
            )
            objects.delete(sub)
        return _json(
            {
                "kind": f"{ctx.res.kind}List",
                "apiVersion": ctx.res.api_version,
                "metadata": {"resourceVersion": str(ctx.cluster.rv)},
                "items": items,
            },
            200,
            ctx.warnings,
        )


# ---------------------------------------------------------------------------------------------
# admin endpoints


class AdminHandler:
    def __init__(self, fleet: Fleet):
        self.fleet = fleet

    def _auth(self, request: web.Request) -> None:
        if request.headers.get("Authorization", "") != f"Bearer {self.fleet.admin_token}":
            raise ApiError(401, "admin token required")

    def _cluster(self, request: web.Request) -> ClusterState:
        cluster = self.fleet.clusters.get(request.match_info["cluster"])
        if cluster is None:
            raise ApiError(404, f'cluster "{request.match_info["cluster"]}" not found')
        return cluster

    @staticmethod
    def describe(c: ClusterState) -> dict:
        return {
            "name": c.name,
            "role": c.spec.role,
            "version": c.git_version,
            "schemaMinor": c.minor,
            "requests": dict(c.requests),
            "labels": c.spec.labels,
            "faults": c.faults.as_dict(),
            "rolloutSeconds": c.rollout_seconds,
            "capacity": c.capacity,
            "objects": c.object_count(),
            "capi": c.spec.capi,
            "managedBy": c.spec.managed_by,
        }

    async def handle(self, request: web.Request) -> web.Response:
        try:
            self._auth(request)
            action = request.match_info["action"]
            if action == "clusters" and request.method == "GET":
                return _json({"clusters": [self.describe(c) for c in self.fleet.clusters.values()]})
            if action == "stats":
                return _json(self.stats())
            raise ApiError(404, "unknown admin endpoint")
        except ApiError as err:
            return _error(err)

    async def handle_cluster(self, request: web.Request) -> web.Response:
        try:
            self._auth(request)
            cluster = self._cluster(request)
            action = request.match_info["action"]
            if request.method == "GET" and action == "":
                return _json(self.describe(cluster))
            if request.method == "GET" and action == "log":
                return _json({"writes": list(cluster.write_log)})
            if request.method == "GET" and action == "object":
                return self.get_object(cluster, request.query)
            if request.method != "POST":
                raise ApiError(405, "use POST")
            body = await _read_body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "a JSON object is expected")
            if action == "faults":
                merged = {**cluster.faults.as_dict(), **body}
                cluster.faults = parse_faults(merged)
                if cluster.faults.down:  # an apiserver that is down holds no watch open
                    cluster.drop_watches()
                return _json(self.describe(cluster))
            if action == "version":
                try:
                    cluster.set_version(str(body.get("gitVersion", "")))
                except FleetSpecError as exc:
                    raise ApiError(400, str(exc)) from exc
                return _json(self.describe(cluster))
            if action == "kubelets":
                nodes = body.get("nodes")
                if nodes is not None and (not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes)):
                    raise ApiError(400, '"nodes" must be a list of node names')
                changed = cluster.set_kubelet_version(str(body.get("kubeletVersion", "")), nodes)
                return _json({**self.describe(cluster), "upgradedNodes": changed})
            if action == "capi":  # {"machinesStuck": bool}: new Machines of this workload cluster never come up
                if self.fleet.capi is None or not cluster.spec.managed_by:
                    raise ApiError(400, f"{cluster.name} is not managed by a Cluster API management cluster")
                self.fleet.capi.set_stuck(cluster.name, bool(body.get("machinesStuck")))
                return _json({**self.describe(cluster), "machinesStuck": cluster.name in self.fleet.capi.stuck})
            if action == "rollout":
                cluster.rollout_seconds = float(body.get("seconds", cluster.rollout_seconds))
                return _json(self.describe(cluster))
            if action == "capacity":
                cluster.capacity = parse_capacity(body.get("pods"), cluster.name)
                return _json(self.describe(cluster))
            if action == "drop-watches":
                return _json({**self.describe(cluster), "droppedWatches": cluster.drop_watches()})
            if action == "edit":
                return self.external_edit(cluster, body)
            if action == "delete":
                return self.external_delete(cluster, body)
            raise ApiError(404, "unknown admin endpoint")
        except FleetSpecError as exc:
            return _error(ApiError(400, str(exc)))
        except ApiError as err:
            return _error(err)

    @staticmethod
    def _resource(cluster: ClusterState, api_version: str, kind: str) -> schemas.ApiResource:
        res = cluster.find_resource(api_version or "", kind or "")
        if res is None:
            raise ApiError(404, f"no resource for {api_version} {kind} at Kubernetes 1.{cluster.minor}")
        return res

    def get_object(self, cluster: ClusterState, query) -> web.Response:
        res = self._resource(cluster, query.get("apiVersion", ""), query.get("kind", ""))
        namespace = query.get("namespace", "") if res.namespaced else ""
        obj = cluster.load(res, namespace, query.get("name", ""))
        if obj is None:
            raise not_found(res.plural, res.group, query.get("name", ""))
        return _json(obj)

    def external_edit(self, cluster: ClusterState, body: dict) -> web.Response:
        res = self._resource(cluster, body.get("apiVersion", ""), body.get("kind", ""))
        namespace = body.get("namespace") or "" if res.namespaced else ""
        ctx = objects.Ctx(
            cluster,
            res,
            namespace,
            body.get("name"),
            field_validation="Ignore",
            field_manager=body.get("fieldManager") or "kubectl-edit",
        )
        obj = objects.patch(ctx, "merge", body.get("mergePatch") or {})
        return _json(obj)

    def external_delete(self, cluster: ClusterState, body: dict) -> web.Response:
        res = self._resource(cluster, body.get("apiVersion", ""), body.get("kind", ""))
        namespace = body.get("namespace") or "" if res.namespaced else ""
        return _json(objects.delete(objects.Ctx(cluster, res, namespace, body.get("name"))))

    def stats(self) -> dict:
        import resource as _resource

        return {
            "clusters": len(self.fleet.clusters),
            "objects": sum(c.object_count() for c in self.fleet.clusters.values()),
            "maxRssMb": _resource.getrusage(_resource.RUSAGE_SELF).ru_maxrss / 1024,
            "rssMb": _current_rss_mb(),
        }


def _current_rss_mb() -> float:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def build_app(fleet: Fleet) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY * 4)

    async def end_watches(_app) -> None:
        for cluster in list(fleet.clusters.values()):
            cluster.close_watches()

    app.on_shutdown.append(end_watches)
    if fleet.capi is not None:
        controller = fleet.capi

        async def start_capi(app_) -> None:
            app_["capi"] = asyncio.get_running_loop().create_task(capi.run(controller))

        async def stop_capi(app_) -> None:
            app_["capi"].cancel()

        app.on_startup.append(start_capi)
        app.on_cleanup.append(stop_capi)
    cluster_handler = ClusterHandler(fleet)
    admin = AdminHandler(fleet)
    app.router.add_route("*", "/_fleet/clusters/{cluster}/{action:[a-z-]*}", admin.handle_cluster)
    app.router.add_route("*", "/_fleet/{action}", admin.handle)
    app.router.add_route("*", "/clusters/{cluster}/{tail:.*}", cluster_handler)
    app.router.add_route("*", "/clusters/{cluster}", cluster_handler)
    return app
