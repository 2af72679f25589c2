"""The blueprint editor's routes (/ui/editor and /ui/api/editor/*): they translate to the orchestrator and the blueprint
round-trip (parse, apply an edit to the text, validate, save, versions), doing no blueprint work of their own."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from ice_mcp.blueprint.models import Blueprint, NodeBase
from ice_mcp.blueprint.roundtrip import apply_edit, parse_document
from ice_mcp.errors import IceError
from ice_mcp.operations.blueprint_tools import draft
from ice_mcp.versions import canonical

STATIC = Path(__file__).parent / "static"
# The editor's page and what it loads; dag.js and dom.js are the run view's own, shared.
ASSETS = {**{name: "text/javascript" for name in (
    "editor-main.js", "editor-http.js", "editor.js", "editor-canvas.js", "editor-model.js", "schema-form.js", "layout.js",
    "dagre.min.js", "dag.js", "dom.js")}, "app.css": "text/css", "editor.css": "text/css", "dagre.LICENSE.txt": "text/plain"}
MAX_TEXT = 1024 * 1024
BLANK = 'schema_version: "1"\nname: new_workflow\ndescription: ""\nnodes: []\n'

Endpoint = Callable[[Request], Awaitable[Response]]
Route = tuple[str, Endpoint, str]


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS), status_code=status,
                    media_type="application/json", headers={"Cache-Control": "no-store"})


def _pruned(schema: dict[str, Any], drop: set[str]) -> dict[str, Any]:
    """A model's JSON Schema without the `drop` properties and the definitions only they used (a container's
    sub-graph fields hold every node model: the form edits them on the canvas, not as fields)."""
    defs = dict(schema.get("$defs", {}))
    if "$ref" in schema:  # a recursive model's schema is a reference to its own definition
        schema = dict(defs[schema["$ref"].rsplit("/", 1)[-1]])
    schema = {k: v for k, v in schema.items() if k != "$defs"}
    schema["properties"] = {k: v for k, v in schema.get("properties", {}).items() if k not in drop}
    if "required" in schema:
        schema["required"] = [k for k in schema["required"] if k not in drop]
    kept: dict[str, Any] = {}
    todo = [schema]
    while todo:
        text = orjson.dumps(todo.pop()).decode()
        for name in defs:
            if name not in kept and f'"#/$defs/{name}"' in text:
                kept[name] = defs[name]
                todo.append(defs[name])
    if kept:
        schema["$defs"] = kept
    return schema


def node_type_info(model: type[NodeBase]) -> dict[str, Any]:
    """What the editor needs of a node type: its form's schema, its sub-graph fields, its drawing's label fields."""
    subgraphs = []
    for field in model.subgraph_fields:
        annotation = repr(model.model_fields[field].annotation)
        subgraphs.append({"field": field, "nested": annotation.count("list[") > 1})
    schema = _pruned(model.model_json_schema(by_alias=True), set(model.subgraph_fields))
    return {"schema": schema, "subgraphs": subgraphs, "label": list(model.drawing.label),
            "container": model.drawing.inside is not None,
            "multiline": [*model.template_fields, *model.expression_fields, "code", "description"]}


def catalogue(orc: Any) -> dict[str, Any]:
    """The node types (from the orchestrator's own set, custom ones too), the live tool catalogue with input
    schemas, the workflow's own fields, and the registered workflows' names."""
    types = {name: node_type_info(model) for name, model in orc.node_models.models.items()}
    tools = [{"name": name, "description": entry.description or "", "input_schema": entry.input_schema}
             for name, entry in sorted(orc.registry.tools.items())]
    workflow = _pruned(Blueprint.model_json_schema(by_alias=True), {"nodes"})
    return {"node_types": types, "tools": tools, "workflow_schema": workflow, "common_fields": list(NodeBase.model_fields),
            "workflows": sorted(orc.registry.workflows)}


def issues_of(report: Any) -> dict[str, Any]:
    """A validation report as the editor pins it: every issue with its node and field path."""
    def one(issue: Any, severity: str) -> dict[str, Any]:
        data = issue.model_dump(mode="json", exclude_none=True)
        data["severity"] = severity
        data["node"] = data.get("node_id")  # the form pins by `field` (dotted), the text pane by `line`
        return data

    return {"ok": report.ok, "issues": [*(one(i, "error") for i in report.errors),
                                         *(one(i, "warning") for i in report.warnings)]}


def unreadable(exc: IceError) -> dict[str, Any]:
    """Text that does not parse: no blueprint, one issue saying where (the parser's own words)."""
    return {"ok": False, "blueprint": None, "issues": [{"code": exc.code, "message": exc.message, "severity": "error"}]}


def checked_text(orc: Any, text: str) -> dict[str, Any]:
    """The text read as the engine reads it, and what the server's validator says of it (blueprint_validate's check)."""
    try:
        document = parse_document(text)
    except IceError as exc:
        return unreadable(exc)
    return {"blueprint": document.blueprint, **issues_of(orc.validate(text))}


def synced_text(orc: Any, text: str, blueprint: Any) -> dict[str, Any]:
    """The new blueprint written into the old text (only the lines that differ change), and its issues."""
    if not isinstance(blueprint, dict):
        raise IceError("blueprint must be an object", code="invalid_blueprint")
    new = apply_edit(text, blueprint)
    return {"text": new, **issues_of(orc.validate(new))}


STATUS = {"version_conflict": 409, "unknown_workflow": 404, "unknown_version": 404, "forbidden": 403}


def detailed(handler: Endpoint) -> Endpoint:
    """A refusal with its details (a version conflict names the version now current; an invalid blueprint lists its
    issues, each at its line), which the page shows; the guard's own answer carries code and message only."""
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except IceError as exc:
            if getattr(exc, "status", None) is not None:
                raise  # the guard's own refusals (403, 404 ...) answer as they are
            error = {"code": exc.code, "message": exc.message, "details": exc.details or {}}
            return _json({"error": error}, STATUS.get(exc.code, 400))

    return endpoint


def current_of(history: list[Any]) -> int | None:
    """The current version in a workflow's history (None: a file's workflow, never saved here)."""
    return next((entry.version for entry in history if entry.current), None)


def workflow_text(orc: Any, name: str, version: int | None) -> dict[str, Any]:
    """A workflow's document text: the version asked, else the current one, else the text it was loaded from."""
    history = orc.blueprint_history(name)
    current = current_of(history)
    shown = version if version is not None else current
    if shown is not None:
        stored = orc.blueprint_version(name, shown)
        text = stored.text if stored.text is not None else canonical(stored.source)
    else:  # a workflow from a file, not saved here yet: the file's own bytes, else the blueprint_edit tool's draft
        entry = orc.registry.workflows.get(name)
        file = Path(entry.source) if entry is not None and entry.source != "runtime" else None
        text = (file.read_bytes().decode("utf-8") if file is not None and file.is_file()
                else draft(orc, {"name": name})["text"])
    return {"name": name, "version": current, "shown_version": shown, "text": text}


def editor_api(orc: Any, refused: Callable[[int, str, str], Exception], *, is_admin: Callable[[Request], bool],
               headers: dict[str, str]) -> list[Route]:
    """The editor's page, assets and API, as (path, handler, method) for routes.py's guarded list. `refused(status,
    code, message)` makes the error the guard answers with; writes need `is_admin`."""
    page = (STATIC / "editor.html").read_bytes()
    assets = {name: (STATIC / name).read_bytes() for name in ASSETS}

    async def body_of(request: Request) -> dict[str, Any]:
        raw = await request.body()
        if len(raw) > 2 * MAX_TEXT:
            raise refused(413, "too_large", "the request body is too large")
        try:
            data = orjson.loads(raw or b"{}")
        except orjson.JSONDecodeError:
            raise refused(400, "invalid_json", "the request body is not JSON") from None
        if not isinstance(data, dict):
            raise refused(400, "invalid_json", "the request body must be a JSON object")
        return data

    def text_of(data: dict[str, Any]) -> str:
        text = data.get("text")
        if not isinstance(text, str):
            raise refused(400, "invalid_text", "text must be the blueprint's text")
        return text

    def need_admin(request: Request, what: str) -> None:
        if not is_admin(request):
            raise refused(403, "forbidden", f"{what} is refused: it needs the admin token (or the ice:run scope)")

    async def editor_page(request: Request) -> Response:
        return Response(page, media_type="text/html; charset=utf-8", headers=headers)

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in assets:
            raise refused(404, "not_found", "no such asset")
        return Response(assets[name], media_type=f"{ASSETS[name]}; charset=utf-8", headers=headers)

    async def catalogue_route(request: Request) -> Response:
        return _json(await asyncio.to_thread(catalogue, orc))

    async def parse(request: Request) -> Response:
        text = text_of(await body_of(request))
        return _json(await asyncio.to_thread(checked_text, orc, text))

    async def sync(request: Request) -> Response:
        data = await body_of(request)
        text = text_of(data)
        return _json(await asyncio.to_thread(synced_text, orc, text, data.get("blueprint")))

    def number(value: Any, what: str) -> int:
        try:
            return int(value)
        except (TypeError, ValueError):
            raise refused(400, "invalid_version", f"{what} must be a version number") from None

    async def workflow(request: Request) -> Response:
        name = request.path_params["name"]
        asked = request.query_params.get("version")
        opened = await asyncio.to_thread(workflow_text, orc, name, None if asked is None else number(asked, "version"))
        return _json({**opened, **await asyncio.to_thread(checked_text, orc, opened["text"])})

    async def head(request: Request) -> Response:
        history = await asyncio.to_thread(orc.blueprint_history, request.path_params["name"])
        return _json({"version": current_of(history)})

    async def versions(request: Request) -> Response:
        history = await asyncio.to_thread(orc.blueprint_history, request.path_params["name"])
        return _json({"versions": [entry.to_dict() for entry in history]})

    async def diff(request: Request) -> Response:
        query = request.query_params
        a, b = number(query.get("a"), "a"), number(query.get("b"), "b")
        return _json(await asyncio.to_thread(orc.blueprint_diff, request.path_params["name"], a, b))

    async def save(request: Request) -> Response:
        need_admin(request, "saving a workflow")
        data = await body_of(request)
        text = text_of(data)
        base = data.get("base_version")
        base = None if base is None else number(base, "base_version")
        saved = await asyncio.to_thread(orc.save_blueprint_text, request.path_params["name"], text, base)
        return _json(saved.to_dict())

    async def rollback(request: Request) -> Response:
        need_admin(request, "rolling a workflow back")
        data = await body_of(request)
        saved = await asyncio.to_thread(orc.rollback_blueprint, request.path_params["name"],
                                        number(data.get("version"), "version"))
        return _json(saved.to_dict())

    async def blank(request: Request) -> Response:
        return _json({"text": BLANK, "version": None, **await asyncio.to_thread(checked_text, orc, BLANK)})

    return [
        ("/ui/editor", editor_page, "GET"),
        ("/ui/editor/", editor_page, "GET"),
        ("/ui/editor/static/{name}", asset, "GET"),
        ("/ui/editor/{name}", editor_page, "GET"),
        ("/ui/api/editor/catalogue", catalogue_route, "GET"),
        ("/ui/api/editor/parse", parse, "POST"),
        ("/ui/api/editor/sync", sync, "POST"),
        ("/ui/api/editor/blank", blank, "GET"),
        ("/ui/api/editor/workflows/{name}", detailed(workflow), "GET"),
        ("/ui/api/editor/workflows/{name}/head", detailed(head), "GET"),
        ("/ui/api/editor/workflows/{name}/versions", detailed(versions), "GET"),
        ("/ui/api/editor/workflows/{name}/diff", detailed(diff), "GET"),
        ("/ui/api/editor/workflows/{name}/save", detailed(save), "POST"),
        ("/ui/api/editor/workflows/{name}/rollback", detailed(rollback), "POST"),
    ]
