"""The blueprint editing tools: a workflow's versions, the diff between two, a rollback, a save of document text
(refused when another save came first) and a draft opened in the editor (the MCP App `ui://ice/blueprint-editor`).

Each is one `BuiltinTool` entry and one handler over the orchestrator's versions API (`ice_mcp.versions`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ice_mcp.blueprint.models import Blueprint
from ice_mcp.blueprint.pinning import pin
from ice_mcp.blueprint.roundtrip import parse_document
from ice_mcp.errors import IceError
from ice_mcp.operations.result_schemas import REPORT_SCHEMA
from ice_mcp.operations.run_graph import blueprint_graph, plan_graph, workflow_lookup
from ice_mcp.operations.tool_table import (
    BLUEPRINT_SCHEMA,
    READ_ONLY,
    Answer,
    BuiltinCall,
    BuiltinTool,
    Hints,
    Reply,
    obj_schema,
)
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.versions import RUNS_SCANNED, canonical

EDITOR_URI = "ui://ice/blueprint-editor"  # the MCP App blueprint_edit's result is drawn in
# It makes an old version current (as a new one, so nothing is lost); once more to the same version changes nothing.
REPLACES = Hints(read_only=False, destructive=True, idempotent=True, open_world=False)
SAVES = Hints(read_only=False, destructive=True, idempotent=False, open_world=False)

_NAME = {"type": "string", "minLength": 1, "description": "The workflow's name."}
_VERSION = {"type": "integer", "minimum": 1}
_NULLABLE_INT = {"type": ["integer", "null"]}
_TEXT = {"type": "string", "description": "The blueprint's document text (YAML or JSON), comments and all."}
VERSIONS_SCHEMA = obj_schema({
    "name": {"type": "string"},
    "versions": {"type": "array", "description": "Newest first.", "items": obj_schema({
        "version": {"type": "integer"}, "created_at": {"type": ["string", "null"]}, "current": {"type": "boolean"},
        "runs": {"type": "integer", "description": f"Runs of this version among the latest {RUNS_SCANNED}."},
        "has_text": {"type": "boolean", "description": "Saved from document text (else diffed as canonical YAML)."}},
        ["version", "created_at", "current", "runs", "has_text"])},
    "runs_scanned": {"type": "integer"}}, ["name", "versions"])
DIFF_SCHEMA = obj_schema({
    "name": {"type": "string"}, "from_version": {"type": "integer"}, "to_version": {"type": "integer"},
    "compared": {"type": "string", "enum": ["text", "canonical"],
                 "description": "text: the saved texts; canonical: both as YAML in one layout (a version has no text)."},
    "diff": {"type": "string", "description": "A unified diff (empty: the same)."},
    "changed_lines": {"type": "integer"}}, ["name", "from_version", "to_version", "compared", "diff"])
SAVED_SCHEMA = obj_schema({
    "name": {"type": "string"}, "version": {"type": "integer", "description": "The version now current."},
    "previous_version": _NULLABLE_INT,
    "created": {"type": "boolean", "description": "False: the same as the current version, which stays."},
    "report": REPORT_SCHEMA}, ["name", "version", "previous_version", "created", "report"])
EDIT_SCHEMA = obj_schema({
    "name": {"type": ["string", "null"]},
    "version": {**_NULLABLE_INT, "description": "The registered version the draft starts from (its base_version)."},
    "format": {"type": "string", "enum": ["yaml", "json"]},
    "text": {"type": "string", "description": "The draft's document text."},
    "report": REPORT_SCHEMA,
    "graph": {"type": ["object", "null"], "description": "The draft drawn: nodes, dependencies, containers "
              "(approximate when it does not compile)."}}, ["format", "text", "report", "graph"])


async def blueprint_versions(call: BuiltinCall) -> Answer:
    name = call.args["name"]
    history = await asyncio.to_thread(call.orc.blueprint_history, name)
    return Reply({"name": name, "versions": [entry.to_dict() for entry in history], "runs_scanned": RUNS_SCANNED})


async def blueprint_diff(call: BuiltinCall) -> Answer:
    args = call.args
    return Reply(await asyncio.to_thread(call.orc.blueprint_diff, args["name"], args["from_version"],
                                         args["to_version"]))


async def blueprint_rollback(call: BuiltinCall) -> Answer:
    saved = await asyncio.to_thread(call.orc.rollback_blueprint, call.args["name"], call.args["version"])
    return Reply(saved.to_dict())


async def blueprint_save(call: BuiltinCall) -> Answer:
    args = call.args
    saved = await asyncio.to_thread(call.orc.save_blueprint_text, args["name"], args["text"],
                                    args.get("base_version"))
    return Reply(saved.to_dict())


async def blueprint_edit(call: BuiltinCall) -> Answer:
    return Reply(await asyncio.to_thread(draft, call.orc, call.args))


def draft(orc: Orchestrator, args: dict[str, Any]) -> dict[str, Any]:
    """A draft to edit: its text (given, the workflow's current version's, or the blueprint as YAML), the
    version it starts from, its validation report (issues pinned to lines) and its graph."""
    name, text, given = args.get("name"), args.get("text"), args.get("blueprint")
    version = None
    if given is None and name is None:
        raise IceError("give a blueprint, or the name of a registered workflow", code="invalid_arguments")
    if name is not None:
        history = orc.blueprint_history(name)
        current = next((entry.version for entry in history if entry.current), None)
        version = current
        if text is None and given is None:
            stored = orc.blueprint_version(name, current) if current is not None else None
            entry = orc.registry.workflows.get(name)
            text = (stored.text if stored is not None and stored.text is not None
                    else canonical(stored.source) if stored is not None
                    else canonical(entry.blueprint.model_dump(mode="json", by_alias=True, exclude_unset=True))
                    if entry is not None else None)
    if text is None:
        text = given if isinstance(given, str) else canonical(dict(given or {}))
    document = parse_document(text)
    data = document.blueprint
    report = pin(orc.validate(data if isinstance(data, dict) else {}), text)
    return {"name": data.get("name", name) if isinstance(data, dict) else name, "version": version,
            "format": document.format, "text": text, "report": report.model_dump(mode="json", exclude_none=True),
            "graph": draft_graph(orc, data)}


def draft_graph(orc: Orchestrator, data: Any) -> dict[str, Any] | None:
    """A draft's graph: compiled when it compiles, else drawn from what parses of it, else None."""
    if not isinstance(data, dict):
        return None
    try:
        return plan_graph(orc.compile(data), workflow_lookup(orc))
    except IceError:
        pass
    try:
        blueprint: Blueprint = orc.node_models.blueprint.model_validate(data)
    except ValueError:
        return None
    return {**blueprint_graph(blueprint, workflow_lookup(orc)), "approximate": True}


BLUEPRINT_TOOLS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        "blueprint_versions", "The versions kept of a workflow registered at run time, newest first: when each was "
        "made, which is current, how many runs ran it.",
        obj_schema({"name": _NAME}, ["name"]), READ_ONLY, blueprint_versions, output_schema=VERSIONS_SCHEMA,
        rpc="blueprint.versions", cli=("blueprints", "versions")),
    BuiltinTool(
        "blueprint_diff", "A unified diff between two versions of a workflow (their texts as saved).",
        obj_schema({"name": _NAME, "from_version": _VERSION, "to_version": _VERSION},
                   ["name", "from_version", "to_version"]),
        READ_ONLY, blueprint_diff, output_schema=DIFF_SCHEMA, rpc="blueprint.diff", cli=("blueprints", "diff")),
    BuiltinTool(
        "blueprint_rollback", "Make an old version of a workflow current again, as a new version (runs keep the "
        "version they ran).",
        obj_schema({"name": _NAME, "version": {**_VERSION, "description": "The version to bring back."}},
                   ["name", "version"]),
        REPLACES, blueprint_rollback, scope="admin", output_schema=SAVED_SCHEMA, rpc="blueprint.rollback",
        cli=("blueprints", "rollback")),
    BuiltinTool(
        "blueprint_save", "Validate a workflow's document text and save it as its new version, comments and layout "
        "kept. With base_version (the version the edit started from), refused with version_conflict if someone "
        "saved since.",
        obj_schema({"name": _NAME, "text": _TEXT,
                    "base_version": {**_VERSION, "description": "The version this text was edited from."}},
                   ["name", "text"]),
        SAVES, blueprint_save, scope="admin", output_schema=SAVED_SCHEMA, rpc="blueprint.save",
        cli=("blueprints", "save")),
    BuiltinTool(
        "blueprint_edit", "Open a blueprint draft in the editor: a registered workflow by name (its current "
        "text), or a blueprint; answers the text, its validation report and its graph. Saving is blueprint_save.",
        obj_schema({"name": {**_NAME, "description": "A registered workflow to edit."},
                    "blueprint": BLUEPRINT_SCHEMA,
                    "text": {**_TEXT, "description": "A draft's text (for `name`: instead of its current one)."}}),
        READ_ONLY, blueprint_edit, output_schema=EDIT_SCHEMA, rpc="blueprint.edit", cli=("blueprints", "edit")),
)
