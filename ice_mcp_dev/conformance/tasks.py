"""The tasks scenarios' fixtures: ordinary workflows (and the tools they call), so the suite drives real runs, tasks and questions."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from ice_mcp.errors import IceError, NodeFailure
from ice_mcp_dev.conformance.blocks import NAME_SCHEMA, Ctx, text_result


def _seconds(value: str) -> dict[str, Any]:
    return {"id": "work", "type": "tool", "tool_name": "sleep", "tool_args": {"seconds": value}}


TASK_WORKFLOWS: list[dict[str, Any]] = [
    {"name": "slow_compute", "description": "Sleeps `seconds`, then answers (a task when it takes a while).",
     "inputs": {"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0},
                                                 "label": {"type": "string"}}, "required": ["seconds"]},
     "outputs": {"label": "{{ inputs.label }}", "slept": "{{ work.slept }}"},
     "nodes": [_seconds("{{ inputs.seconds }}")]},
    {"name": "failing_job", "description": "Fails after about a second (always a task).", "execution": "task",
     "nodes": [_seconds("1"), {"id": "fail", "type": "tool", "tool_name": "conformance_fail",
                              "tool_args": {"why": "{{ work.slept }}"}}]},
    {"name": "protocol_error_job", "description": "Breaks inside the server (always a task).", "execution": "task",
     "nodes": [{"id": "crash", "type": "tool", "tool_name": "conformance_crash"}]},
    {"name": "confirm_delete", "description": "Asks to confirm, then deletes (always a task).", "execution": "task",
     "inputs": {"type": "object", "properties": {"filename": {"type": "string"}}, "required": ["filename"]},
     "outputs": {"deleted": "{{ inputs.filename }}", "confirmed": "{{ ask.answer.confirm }}"},
     "nodes": [{"id": "ask", "type": "human", "prompt": "Delete {{ inputs.filename }}?",
                "schema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}}]},
    {"name": "multi_input", "description": "Asks two questions at once (always a task).", "execution": "task",
     "outputs": {"name": "{{ name.answer.name }}", "confirm": "{{ sure.answer.confirm }}"},
     "nodes": [{"id": "name", "type": "human", "prompt": "What is your name?", "schema": NAME_SCHEMA},
               {"id": "sure", "type": "human", "prompt": "Are you sure?",
                "schema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}}]},
    {"name": "test_tool_with_task", "description": "Asks a name in the call, then goes on as a task.",
     "outputs": {"greeting": "Hello, {{ user_name.answer.name }}!"},
     "nodes": [{"id": "user_name", "type": "human", "prompt": "What is your name?", "schema": NAME_SCHEMA},
               {**_seconds("2"), "dependencies": ["user_name"]}]},
]

GREET = types.Tool(name="greet", description="Says hello (never a task).",
                   input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})


def conformance_fail(why: Any = None) -> dict[str, Any]:
    """Fails like a tool does (a tool error the model reads)."""
    raise NodeFailure(f"the job failed (after {why} s)", code="job_failed", retryable=False)


def conformance_crash() -> dict[str, Any]:
    """Fails like the server itself broke (a task `failed`, not a tool error)."""
    raise IceError("the fixture broke inside the server", code="internal_error")


async def greet(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    """The native tool `greet`, answered in the call."""
    return text_result(f"Hello, {(params.arguments or {}).get('name')}!")
