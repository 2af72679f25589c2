"""The `/ui` routes: the page and its assets, a JSON API, and server-sent event streams of runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from ice_mcp.blueprint.models import Blueprint
from ice_mcp.errors import IceError
from ice_mcp.operations.run_ids import resolve_run_id
from ice_mcp.principals import isolated
from ice_mcp.server.auth.callers import bearer_token, caller_id, principal_of, same_secret
from ice_mcp.server.web.ui.editor import editor_api
from ice_mcp.server.web.ui.evals import eval_api
from ice_mcp.server.web.ui.graph import blueprint_graph, plan_graph
from ice_mcp.server.web.ui.inputs import NotRenderable, outputs_from_events, rendered_inputs
from ice_mcp.server.web.ui.schedules import schedule_api
from ice_mcp.server.web.ui.views import (
    STREAMED,
    controls_note,
    json_text,
    node_detail,
    reused_node,
    role_note,
    run_detail,
    run_summary,
    slim_event,
)
from ice_mcp.store.records import ACTIVE
from ice_mcp.store.vocabulary import EventType

logger = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
ASSETS = {"app.js": "text/javascript", "dag.js": "text/javascript", "dom.js": "text/javascript",
          "schedules.js": "text/javascript", "evals.js": "text/javascript", "app.css": "text/css"}
SECURITY_HEADERS = {
    # Every asset is ours: nothing inline, nothing from elsewhere, never framed.
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}
FEED_SECONDS = 0.5  # how often the runs list looks for runs started or changed by any process
FEED_RUNS = 100  # the newest runs the live list watches
TAIL_SECONDS = 0.1  # how often a stream follows a run that another process is running
KEEPALIVE_SECONDS = 10.0
MAX_BATCH = 5_000  # events in one stream message
MAX_LIMIT = 500

Endpoint = Callable[[Request], Awaitable[Response]]


@dataclass(slots=True)
class UiConfig:
    """Who may do what on the page. `start_needs_admin`: starting runs needs the admin token too
    (the `ice-mcp ui` viewer is read-only without it); `startable` says whether a workflow may run here."""

    admin_token: str | None = None
    read_only: bool = False
    start_needs_admin: bool = False
    startable: Callable[[str], bool] = field(default=lambda name: True)
    mode: str = "server"
    oauth: bool = False  # callers sign in: cancelling or retrying one's own run needs ice:run, not the admin token
    token_configured: bool = False  # ICE_MCP_TOKEN: every request needs a token, so the page has a Token dialog
    workspace: str | None = None  # the workspace's absolute path: told to admins only (file paths are relative to it)


class UiError(IceError):
    """A refused UI request: `status` is its HTTP status."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message, code=code)
        self.status = status


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS), status_code=status,
                    media_type="application/json", headers={"Cache-Control": "no-store"})


def _error(status: int, code: str, message: str) -> Response:
    return _json({"error": {"code": code, "message": message}}, status)


def _sse(data: Any) -> bytes:
    return b"data: " + orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS) + b"\n\n"


class RunsFeed:
    """One watcher of the newest runs for every open runs list: it reads them every FEED_SECONDS
    while someone listens and hands each listener the rows that changed."""

    def __init__(self, orc: Any) -> None:
        self.orc = orc
        self.listeners: set[asyncio.Queue[list[dict[str, Any]]]] = set()
        self.rows: dict[str, dict[str, Any]] = {}
        self._task: asyncio.Task[None] | None = None

    def subscribe(self) -> asyncio.Queue[list[dict[str, Any]]]:
        queue: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue(maxsize=64)
        if self.rows:  # what changed between the page's first read and now is in here
            queue.put_nowait(list(self.rows.values()))
        self.listeners.add(queue)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch(), name="ice_mcp-ui-runs")
        return queue

    def unsubscribe(self, queue: asyncio.Queue[list[dict[str, Any]]]) -> None:
        self.listeners.discard(queue)

    async def snapshot(self, *, status: str | None = None, workflow: str | None = None,
                       limit: int = FEED_RUNS) -> list[dict[str, Any]]:
        """The newest runs, live ones as this process sees them; the store is read in a thread."""
        store = self.orc.store
        stored = (await asyncio.to_thread(store.list, status=status, workflow=workflow, limit=limit,
                                          principal=isolated()) if store is not None else [])
        rows = {record.run_id: run_summary(record) for record in stored}
        if store is None:
            live = self.orc.list_runs(status=status, workflow=workflow, limit=limit)
        else:  # only the runs this process is running are newer in memory than in the store
            handles = [self.orc.get_handle(row["run_id"]) for row in rows.values()
                       if row["status"] in ACTIVE]
            live = [handle.record for handle in handles if handle is not None]
        rows.update((record.run_id, run_summary(record)) for record in live)
        kept = [row for row in rows.values() if status in (None, row["status"])]
        return sorted(kept, key=lambda row: row["started_at"] or 0, reverse=True)[:limit]

    async def _watch(self) -> None:
        while self.listeners:
            try:
                rows = await self.snapshot()
            except Exception:  # a store hiccup: try again next time
                logger.exception("ui: reading the runs failed")
                rows = []
            changed = [row for row in rows if self.rows.get(row["run_id"]) != row]
            self.rows = {row["run_id"]: row for row in rows}
            if changed:
                for queue in list(self.listeners):
                    with contextlib.suppress(asyncio.QueueFull):  # a stalled page misses rows, never blocks us
                        queue.put_nowait(changed)
            await asyncio.sleep(FEED_SECONDS)


class RunViews:
    """The graphs of runs and workflows, compiled once and kept for the last few runs."""

    def __init__(self, orc: Any) -> None:
        self.orc = orc
        self._graphs: OrderedDict[str, dict[str, Any] | None] = OrderedDict()
        self._plans: OrderedDict[str, tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()  # requests use these caches from worker threads

    def _cached(self, cache: OrderedDict[str, Any], key: str, make: Callable[[], Any]) -> Any:
        with self._lock:
            if key in cache:
                cache.move_to_end(key)
                return cache[key]
        value = make()
        if value is None or value == (None, None):
            return value  # not known yet (a run another process has only just started): ask again next time
        with self._lock:
            cache[key] = value
            while len(cache) > 16:
                cache.popitem(last=False)
        return value

    def workflow_plan(self, name: str) -> Any:
        """A registered workflow's plan, or None when it is unknown or does not compile here."""
        entry = self.orc.registry.workflows.get(name)
        if entry is None:
            return None
        if entry.plan is None:
            try:
                entry.plan = self.orc.compile(entry.blueprint)
            except IceError:
                return None
        return entry.plan

    def run_plan(self, run_id: str) -> tuple[Any, Any]:
        """(plan or None, blueprint or None) of a run: its live plan, else its kept blueprint compiled."""
        if not self._visible(run_id):
            return None, None
        return self._cached(self._plans, run_id, lambda: self._run_plan(run_id))

    def _visible(self, run_id: str) -> bool:
        """Another principal's run is an unknown one (OAuth); the caches below are shared by everyone."""
        return isolated() is None or self.orc.get_run(run_id) is not None

    def _run_plan(self, run_id: str) -> tuple[Any, Any]:
        handle = self.orc.get_handle(run_id)
        plan, blueprint = (handle.plan, handle.plan.blueprint) if handle is not None and handle.plan else (None, None)
        if plan is None:
            stored = self.orc.store.run(run_id) if self.orc.store is not None else None
            source = stored.blueprint if stored is not None else None
            if source is None and stored is not None:
                entry = self.orc.registry.workflows.get(stored.record.workflow)
                source = entry.blueprint if entry is not None else None
            if source is not None:
                try:
                    plan = self.orc.compile(source)
                    blueprint = plan.blueprint
                except IceError:
                    blueprint = _parse_blueprint(self.orc, source)
        return plan, blueprint

    def run_graph(self, run_id: str) -> dict[str, Any] | None:
        if not self._visible(run_id):
            return None
        return self._cached(self._graphs, run_id, lambda: self.graph_of(*self.run_plan(run_id)))

    def graph_of(self, plan: Any, blueprint: Any) -> dict[str, Any] | None:
        if plan is not None:
            return plan_graph(plan, self.workflow_plan)
        if blueprint is not None:
            return {**blueprint_graph(blueprint, self.workflow_plan), "approximate": True}
        return None

    def events(self, run_id: str, after: int = -1) -> list[dict[str, Any]]:
        """A run's events (outputs included) from memory when it runs here, else from the store."""
        handle = self.orc.get_handle(run_id)
        if handle is not None:
            return [event.to_dict() for event in handle.events.events[after + 1:]]
        if self.orc.store is None or not self._visible(run_id):
            return []
        return self.orc.store.events(run_id, after=after)

    def node(self, run_id: str, node_id: str, record: Any) -> dict[str, Any]:
        """A node's detail, with its inputs rendered again from what the run had at that point."""
        events = self.events(run_id)
        detail = node_detail(node_id, events)
        kept = record.nodes.get(node_id)
        if detail["status"] == "pending" and kept is not None and kept.status != "pending":
            detail.update(reused_node(kept, record.retry_of))  # reused by a retry: no events of its own
        plan, blueprint = self.run_plan(run_id)
        spec = _spec_of(blueprint, node_id)
        detail["spec"] = None if spec is None else json_text(
            spec.model_dump(mode="json", exclude=set(spec.subgraph_fields), exclude_defaults=True))
        if spec is not None:
            detail.setdefault("type", spec.type)
        if detail["status"] == "pending":
            detail["inputs"], detail["inputs_note"] = None, "the node has not started"
        elif plan is None:
            detail["inputs"], detail["inputs_note"] = None, "the workflow does not compile in this process"
        else:
            try:
                outputs = {**{k: n.output for k, n in record.nodes.items() if n.status == "succeeded"},
                           **outputs_from_events(events)}
                inputs = rendered_inputs(plan, record.inputs, outputs, node_id, self.workflow_plan)
                detail["inputs"], detail["inputs_note"] = json_text(inputs), None
            except NotRenderable as exc:
                detail["inputs"], detail["inputs_note"] = None, str(exc)
            except Exception as exc:  # the template's own failure: often the very reason the node failed
                detail["inputs"], detail["inputs_note"] = None, f"rendering failed: {getattr(exc, 'message', exc)}"
        return detail


def _parse_blueprint(orc: Any, source: Any) -> Any:
    try:
        return source if isinstance(source, Blueprint) else orc.node_models.blueprint.model_validate(source)
    except ValueError:
        return None


def _spec_of(blueprint: Any, node_id: str) -> Any:
    """The blueprint spec of a node by its event id (`loop[2].inner`), where the blueprint has it inline."""
    specs = list(blueprint.nodes) if blueprint is not None else []
    found = None
    for segment in node_id.split("."):
        name = segment.split("[", 1)[0]
        found = next((spec for spec in specs if spec.id == name), None)
        if found is None:
            return None
        graphs = found.inner_graphs() if found.subgraph_fields else []
        if graphs and found.drawing.inside != "branch":
            specs = graphs[0][1]
        elif graphs and "[" in segment:
            index = int(segment[segment.index("[") + 1:-1])
            specs = graphs[index][1] if index < len(graphs) else []
        else:
            specs = []
    return found


def ui_routes(orc: Any, config: UiConfig, security: Any) -> list[BaseRoute]:
    """The routes under /ui. `security` is the transport's Host/Origin allow-list check."""
    feeds: dict[str | None, RunsFeed] = {}  # one per principal under OAuth (its watcher reads as that principal)
    views = RunViews(orc)

    def feed_of() -> RunsFeed:
        owner = isolated()
        if owner not in feeds:
            feeds[owner] = RunsFeed(orc)
        return feeds[owner]
    page = (STATIC / "index.html").read_bytes()
    assets = {name: (STATIC / name).read_bytes() for name in ASSETS}

    def is_admin(request: Request) -> bool:
        if config.oauth:
            return not config.read_only and principal_of(request).allows("ice:run")
        return not config.read_only and same_secret(bearer_token(request.headers), config.admin_token)

    def can_start(request: Request, name: str) -> bool:
        return config.startable(name) and (is_admin(request) or not config.start_needs_admin)

    def guarded(handler: Endpoint, *, post: bool = False) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            rejected = await security.validate_request(request, is_post=post)
            if rejected is not None:
                return rejected
            try:
                return await handler(request)
            except UiError as exc:
                return _error(exc.status, exc.code, exc.message)
            except IceError as exc:
                return _error(400, exc.code, exc.message)
            except Exception:  # never a traceback to the page
                logger.exception("ui: %s %s failed", request.method, request.url.path)
                return _error(500, "internal_error", "the server could not answer this request")

        return endpoint

    async def body_of(request: Request) -> dict[str, Any]:
        try:
            data = orjson.loads(await request.body() or b"{}")
        except orjson.JSONDecodeError:
            raise UiError(400, "invalid_json", "the request body is not JSON") from None
        if not isinstance(data, dict):
            raise UiError(400, "invalid_json", "the request body must be a JSON object")
        return data

    def run_id_of(request: Request) -> str:
        """The run a path names: its id, or a unique start of it (the runs list shows the first 12 characters)."""
        try:
            return resolve_run_id(orc, request.path_params["run_id"])
        except IceError as exc:
            raise UiError(409 if exc.code == "ambiguous_run_id" else 404, exc.code, exc.message) from None

    def record_of(run_id: str) -> Any:
        record = orc.get_run(run_id)
        if record is None:
            raise UiError(404, "unknown_run", f"unknown run {run_id!r}")
        return record

    def need_admin(request: Request, what: str) -> None:
        if not is_admin(request):
            why = "the server is read-only" if config.read_only else "it needs the admin token"
            raise UiError(403, "forbidden", f"{what} is refused: {why}")

    # -- the page --------------------------------------------------------------------------

    async def index(request: Request) -> Response:
        return Response(page, media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in assets:
            return _error(404, "not_found", "no such asset")
        return Response(assets[name], media_type=f"{ASSETS[name]}; charset=utf-8", headers=SECURITY_HEADERS)

    # -- the API ---------------------------------------------------------------------------

    async def session(request: Request) -> Response:
        admin = is_admin(request)
        can_start = not config.start_needs_admin or admin
        return _json({"admin": admin, "mode": config.mode, "read_only": config.read_only,
                      "admin_configured": bool(config.admin_token), "token_configured": config.token_configured,
                      "oauth": config.oauth, "can_start": can_start,
                      "role": "admin" if admin else "viewer", "role_note": role_note(config, admin, can_start),
                      "controls_note": None if admin else controls_note(config),
                      "workspace": config.workspace if admin else None})

    async def runs(request: Request) -> Response:
        query = request.query_params
        try:
            limit = max(1, min(int(query.get("limit") or 100), MAX_LIMIT))
        except ValueError:
            raise UiError(400, "invalid_limit", "limit must be a whole number") from None
        rows = await feed_of().snapshot(status=query.get("status") or None, workflow=query.get("workflow") or None,
                                   limit=limit)
        return _json({"runs": rows})

    async def runs_stream(request: Request) -> Response:
        feed = feed_of()
        queue = feed.subscribe()

        async def stream() -> AsyncIterator[bytes]:
            try:
                yield b": runs\n\n"
                while True:
                    try:
                        rows = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                    except TimeoutError:
                        yield b": keepalive\n\n"
                        continue
                    yield _sse({"runs": rows})
            finally:
                feed.unsubscribe(queue)

        return _stream(stream())

    async def run(request: Request) -> Response:
        run_id = run_id_of(request)
        record = record_of(run_id)
        handle = orc.get_handle(run_id)
        here = handle is not None and not handle.done
        # A finished record no longer changes: its (maybe large) outputs are formatted off the event loop.
        detail = run_detail(record) if here else await asyncio.to_thread(run_detail, record)
        graph = await asyncio.to_thread(views.run_graph, run_id)
        return _json({"run": detail, "graph": graph, "here": here})

    async def run_events(request: Request) -> Response:
        run_id = run_id_of(request)
        record_of(run_id)
        try:
            after = int(request.query_params.get("after", -1))
        except ValueError:
            raise UiError(400, "invalid_after", "after must be an event number") from None
        handle = orc.get_handle(run_id)
        source = (_live_events(handle, after) if handle is not None
                  else _tailed_events(orc, run_id, after))
        return _stream(source)

    async def node(request: Request) -> Response:
        run_id = run_id_of(request)
        node_id = request.query_params.get("id") or ""
        if not node_id or len(node_id) > 2_000:
            raise UiError(400, "invalid_node", "give the node id as ?id=")
        record = record_of(run_id)
        return _json(await asyncio.to_thread(views.node, run_id, node_id, record))

    async def cancel(request: Request) -> Response:
        need_admin(request, "cancelling a run")  # before the run is looked up: a refusal says nothing of which runs exist
        run_id = run_id_of(request)
        record = record_of(run_id)
        if record.done:
            raise UiError(409, code="run_finished", message=f"run {run_id} already ended ({record.status})")
        await orc.cancel(run_id)  # here, or (a signal through the store) in the process that runs it
        return _json({"run_id": run_id, "status": record_of(run_id).status})

    async def retry(request: Request) -> Response:
        need_admin(request, "retrying a run")  # before the run is looked up: a refusal says nothing of which runs exist
        run_id = run_id_of(request)
        data = await body_of(request)
        from_node = data.get("from_node")
        if from_node is not None and not isinstance(from_node, str):
            raise UiError(400, "invalid_node", "from_node must be a node id")
        record_of(run_id)
        handle = await orc.retry(run_id, from_node, caller=caller_id(request))
        return _json({"run_id": handle.run_id, "retry_of": run_id})

    async def workflows(request: Request) -> Response:
        items = []
        for name in sorted(orc.registry.workflows):
            entry = orc.registry.workflows[name]
            items.append({"name": name, "description": entry.blueprint.description or "",
                          "version": entry.version, "nodes": len(entry.blueprint.nodes),
                          "can_start": can_start(request, name)})
        return _json({"workflows": items})

    async def workflow(request: Request) -> Response:
        name = request.path_params["name"]
        entry = orc.registry.workflows.get(name)
        if entry is None:
            raise UiError(404, "unknown_workflow", f"unknown workflow {name!r}")
        plan = await asyncio.to_thread(views.workflow_plan, name)
        graph = await asyncio.to_thread(views.graph_of, plan, entry.blueprint)
        return _json({"name": name, "description": entry.blueprint.description or "", "version": entry.version,
                      "inputs": entry.blueprint.inputs, "graph": graph, "can_start": can_start(request, name)})

    async def start(request: Request) -> Response:
        name = request.path_params["name"]
        if orc.registry.workflows.get(name) is None:
            raise UiError(404, "unknown_workflow", f"unknown workflow {name!r}")
        if not can_start(request, name):
            why = ("it may change data and the server is read-only" if not config.startable(name)
                   else "this viewer is read-only without the admin token")
            raise UiError(403, "forbidden", f"starting {name} is refused: {why}")
        data = await body_of(request)
        inputs = data.get("inputs", {})
        if not isinstance(inputs, dict):
            raise UiError(400, "invalid_inputs", "inputs must be a JSON object")
        handle = await orc.start(name, inputs, caller=caller_id(request))
        return _json({"run_id": handle.run_id})

    api: list[tuple[str, Endpoint, str]] = [
        ("/ui/api/session", session, "GET"),
        ("/ui/api/runs", runs, "GET"),
        ("/ui/api/runs/stream", runs_stream, "GET"),
        ("/ui/api/runs/{run_id}", run, "GET"),
        ("/ui/api/runs/{run_id}/events", run_events, "GET"),
        ("/ui/api/runs/{run_id}/node", node, "GET"),
        ("/ui/api/runs/{run_id}/cancel", cancel, "POST"),
        ("/ui/api/runs/{run_id}/retry", retry, "POST"),
        ("/ui/api/workflows", workflows, "GET"),
        ("/ui/api/workflows/{name}", workflow, "GET"),
        ("/ui/api/workflows/{name}/start", start, "POST"),
        *((path, _answering(handler), "GET") for path, handler in schedule_api(orc, UiError)),
        *editor_api(orc, UiError, is_admin=is_admin, headers=SECURITY_HEADERS),
        *eval_api(orc, UiError),
    ]
    return [
        Route("/ui", guarded(index), methods=["GET"]),
        Route("/ui/", guarded(index), methods=["GET"]),
        Route("/ui/static/{name}", guarded(asset), methods=["GET"]),
        *(Route(path, guarded(handler, post=method == "POST"), methods=[method]) for path, handler, method in api),
    ]


def _answering(handler: Callable[[Request], Awaitable[Any]]) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        return _json(await handler(request))

    return endpoint


def _stream(source: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(source, media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def _batch(events: list[dict[str, Any]], last_seq: int) -> bytes:
    return _sse({"events": [slim_event(e) for e in events if e["type"] in STREAMED], "last_seq": last_seq})


async def _live_events(handle: Any, after: int) -> AsyncIterator[bytes]:
    """A run of this process: its events so far, then each as it happens (a listener on its log)."""
    queue: asyncio.Queue[Any] = asyncio.Queue()

    def listener(event: Any) -> None:
        if event.type in STREAMED:  # chatty node_event traffic never piles up behind a slow page
            queue.put_nowait(event)

    handle.events.listeners.append(listener)
    try:
        backlog = handle.events.events[after + 1:]  # taken in the same loop step the listener starts
        last = backlog[-1].seq if backlog else after
        yield _batch([e.to_dict() for e in backlog], last)
        finished = any(e.type == EventType.RUN_FINISHED for e in backlog)
        while not finished and not (handle.done and queue.empty()):
            try:
                first = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
            except TimeoutError:
                yield b": keepalive\n\n"
                continue
            batch = [first]
            while not queue.empty() and len(batch) < MAX_BATCH:
                batch.append(queue.get_nowait())
            batch = [e for e in batch if e.seq > last]
            if not batch:
                continue
            last = batch[-1].seq
            finished = any(e.type == EventType.RUN_FINISHED for e in batch)
            yield _batch([e.to_dict() for e in batch], last)
        yield b"event: end\ndata: {}\n\n"
    finally:
        with contextlib.suppress(ValueError):
            handle.events.listeners.remove(listener)


async def _tailed_events(orc: Any, run_id: str, after: int) -> AsyncIterator[bytes]:
    """A run kept in the store (finished, or run by another process): follow its journal as it grows."""
    last, quiet_since = after, time.monotonic()
    while True:
        events = await asyncio.to_thread(orc.store.events, run_id, after=last) if orc.store is not None else []
        if events:
            last = events[-1]["seq"]
            quiet_since = time.monotonic()
            for start in range(0, len(events), MAX_BATCH):
                chunk = events[start:start + MAX_BATCH]
                yield _batch(chunk, chunk[-1]["seq"])
            if any(e["type"] == EventType.RUN_FINISHED for e in events):
                break
        else:
            record = orc.get_run(run_id)
            if record is None or (record.done and time.monotonic() - quiet_since > 1.0):
                break  # ended without a closing event (a run cancelled before it started, an old journal)
            if time.monotonic() - quiet_since > KEEPALIVE_SECONDS:
                quiet_since = time.monotonic()
                yield b": keepalive\n\n"
        await asyncio.sleep(TAIL_SECONDS)
    yield b"event: end\ndata: {}\n\n"
