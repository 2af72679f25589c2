"""The run, blueprint and network tools every server offers (their names and input schemas)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types as types

_KEY = {"type": "string", "description": "Retrying with the same key attaches to the same run."}
_WAIT = {
    "type": "number",
    "minimum": 0,
    "description": "Seconds to wait for the run before answering `running`.",
}
_BLUEPRINT = {
    "anyOf": [{"type": "object"}, {"type": "string"}],
    "description": "A blueprint: a JSON object, or JSON/YAML text (see the ice://docs/blueprint-format resource).",
}


@dataclass(frozen=True, slots=True)
class Builtin:
    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: types.ToolAnnotations
    admin: bool = False
    alias: str | None = None


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


_READ = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

BUILTINS: tuple[Builtin, ...] = (
    Builtin(
        "run_status",
        "The record of a run: status, per-node states, outputs so far.",
        _obj({"run_id": {"type": "string"}}, ["run_id"]),
        _READ,
    ),
    Builtin(
        "run_result",
        "Wait (up to wait_seconds) for a run to finish and return its result envelope.",
        _obj({"run_id": {"type": "string"}, "wait_seconds": _WAIT}, ["run_id"]),
        _READ,
    ),
    Builtin(
        "run_cancel",
        "Cancel a running run and every node running in it.",
        _obj({"run_id": {"type": "string"}}, ["run_id"]),
        types.ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
        ),
    ),
    Builtin(
        "run_retry",
        "Run a finished run again as a new run: nodes it finished are reused, the failed node (or"
        " from_node) and everything after it run again.",
        _obj(
            {
                "run_id": {"type": "string"},
                "from_node": {"type": "string", "description": "re-run from this top-level node"},
                "wait_seconds": _WAIT,
            },
            ["run_id"],
        ),
        types.ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
        ),
    ),
    Builtin(
        "run_respond",
        "Answer the question a waiting `human` node asked (run_status shows it under `questions`, with the "
        "schema the answer must fit; an approval is {approved, reason}). Returns the run as it stands after "
        "the answer (up to wait_seconds).",
        _obj(
            {
                "run_id": {"type": "string"},
                "node": {"type": "string", "description": "the node's path, as run_status lists it"},
                "answer": {"type": "object", "description": "an object that fits the question's schema"},
                "wait_seconds": _WAIT,
            },
            ["run_id", "node", "answer"],
        ),
        # Answering does not change the world by itself: the run's own nodes do (and are annotated).
        types.ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    ),
    Builtin(
        "run_list",
        "Recent runs, newest first, optionally filtered by workflow and status.",
        _obj(
            {
                "workflow": {"type": "string"},
                "status": {
                    "type": "string",
                    "enum": [
                        "running",
                        "succeeded",
                        "failed",
                        "cancelled",
                        "timed_out",
                        "over_budget",
                        "input_required",
                    ],
                },
                "limit": {"type": "integer", "minimum": 1, "maximum": 500},
            }
        ),
        _READ,
    ),
    Builtin(
        "blueprint_validate",
        "Check a blueprint without running it: every problem with a suggestion, and a cost estimate.",
        _obj({"blueprint": _BLUEPRINT}, ["blueprint"]),
        _READ,
    ),
    Builtin(
        "blueprint_register",
        "Add or replace workflow_<name> from a blueprint (validate_only: just check it).",
        _obj({"blueprint": _BLUEPRINT, "validate_only": {"type": "boolean"}}, ["blueprint"]),
        types.ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
        ),
        admin=True,
    ),
    Builtin(
        "blueprint_delete",
        "Remove a registered workflow (and its workflow_<name> tool).",
        _obj({"name": {"type": "string"}}, ["name"]),
        types.ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
        ),
        admin=True,
    ),
    Builtin(
        "blueprint_run",
        "Run a blueprint given inline without registering it.",
        _obj(
            {
                "blueprint": _BLUEPRINT,
                "inputs": {"type": "object"},
                "idempotency_key": _KEY,
                "wait_seconds": _WAIT,
            },
            ["blueprint"],
        ),
        types.ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
        ),
    ),
    Builtin(
        "network_execute",
        "Run a network manifest (several workflows with dependencies), given as YAML text or an object.",
        _obj(
            {
                "manifest": {
                    "anyOf": [{"type": "object"}, {"type": "string"}],
                    "description": "A network manifest (api_version: network.v0), as an object or YAML text",
                },
                "wait_seconds": _WAIT,
                "idempotency_key": _KEY,
            },
            ["manifest"],
        ),
        types.ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
        ),
        alias="network.execute",
    ),
)

BY_NAME: dict[str, Builtin] = {b.name: b for b in BUILTINS}
ALIASES: dict[str, str] = {b.alias: b.name for b in BUILTINS if b.alias}
