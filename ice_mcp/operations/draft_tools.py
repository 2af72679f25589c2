"""The drafting tool: `blueprint_draft`, a blueprint that validates from a goal in words (ice_mcp.drafting's loop),
with its Mermaid drawing. One `BuiltinTool` entry, spliced into BUILTINS."""

from __future__ import annotations

import asyncio
from typing import Any

from ice_mcp.drafting.loop import DEFAULT_MAX_ATTEMPTS, MAX_ATTEMPTS, draft_blueprint
from ice_mcp.operations.diagram import mermaid
from ice_mcp.operations.tool_table import Answer, BuiltinCall, BuiltinTool, Hints, Reply, obj_schema

CONSTRAINTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "What the draft must respect beyond the goal.",
    "properties": {
        "max_attempts": {"type": "integer", "minimum": 1, "maximum": MAX_ATTEMPTS,
                         "description": f"Model answers at most, the first included (default {DEFAULT_MAX_ATTEMPTS})."},
        "model": {"type": "string", "description": "The drafting model (default: the configured default model)."},
        "provider": {"type": "string", "description": "Its provider, when its name does not say."},
        "max_tokens": {"type": "integer", "minimum": 256, "maximum": 32768,
                       "description": "Most tokens of one answer (default 4096)."},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "name": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,47}$", "description": "The workflow's name."},
        "notes": {"type": "string", "maxLength": 4000,
                  "description": "Anything else the draft must respect, in words."},
    },
    "additionalProperties": False,
}
_ATTEMPT = {"type": "object", "properties": {
    "attempt": {"type": "integer"}, "valid": {"type": "boolean"}, "issues": {"type": "integer"},
    "input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"}, "cost_usd": {"type": "number"},
    "model_ms": {"type": "number"}, "overhead_ms": {"type": "number"}}}
DRAFT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "valid": {"type": "boolean", "description": "Always true: a draft that does not validate is an error."},
        "name": {"type": "string"},
        "blueprint": {"type": "object", "description": "The blueprint, as blueprint_register takes it."},
        "yaml": {"type": "string", "description": "The blueprint as YAML."},
        "draft": {"type": "string", "description": "The model's last Draft as written (placeholders, TODOs)."},
        "estimate": {"type": "object", "description": "The validator's cost estimate per run."},
        "warnings": {"type": "array", "items": {"type": "object"}},
        "attempts": {"type": "array", "items": _ATTEMPT},
        "assumes": {"type": "object", "description": "missing_tools, invented_inputs, placeholders {path, what}, "
                    "todos, notes: what to settle before it runs for real."},
        "diagram": {"type": "string", "description": "A Mermaid flowchart of the workflow."},
        "model": {"type": "string"}, "provider": {"type": "string"},
        "usage": {"type": "object", "description": "input_tokens, output_tokens, cost_usd of every attempt."},
    },
    "required": ["valid", "blueprint", "yaml", "estimate", "attempts", "assumes"],
}


async def blueprint_draft(call: BuiltinCall) -> Answer:
    orc = call.orc
    result = await draft_blueprint(orc, call.args["goal"], call.args.get("constraints"))
    answer = result.as_dict()
    answer["diagram"] = await asyncio.to_thread(lambda: mermaid(orc.compile(result.blueprint)))
    return Reply(answer)


DRAFT_TOOLS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        "blueprint_draft", "Draft a workflow from a goal in words: the server's model writes a blueprint from this "
        "server's tools, the validator's issues go back to it until it validates (max_attempts). Returns the "
        "blueprint (and YAML), its cost estimate per run, a Mermaid diagram, each attempt's tokens and cost, and "
        "what it still assumes. Registers nothing: review it, then blueprint_register.",
        obj_schema({"goal": {"type": "string", "minLength": 1, "maxLength": 8000,
                             "description": "What the workflow should do, in plain words."},
                    "constraints": CONSTRAINTS_SCHEMA}, ["goal"]),
        # It keeps nothing, but it spends the operator's model budget: a caller who may start runs may draft.
        Hints(read_only=False, destructive=False, idempotent=False, open_world=True),
        blueprint_draft, scope="run", output_schema=DRAFT_SCHEMA, rpc="blueprint.draft", cli=("draft",)),
)
