"""Run records to MCP tool results: the envelope as structuredContent plus the same JSON as text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import mcp_types as types
import orjson

from ice_mcp.observability.tracing import trace_id_of
from ice_mcp.operations import result_schemas
from ice_mcp.store.records import RunRecord

TRACE_ID_META = "io.ice_mcp/trace_id"  # the run's trace, to look up in a trace viewer
FAILED = frozenset({"failed", "cancelled", "timed_out", "over_budget"})

# Each tool's outputSchema (result_schemas.py); this one is the envelope with untyped outputs.
ENVELOPE_SCHEMA: dict[str, Any] = result_schemas.ENVELOPE_SCHEMA


def to_json(value: Any) -> str:
    """Compact JSON text (orjson: several times faster on every call's envelope); stdlib json for what
    orjson refuses (integers beyond 64 bits)."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value, default=str, ensure_ascii=False)


def failed_node(record: RunRecord) -> tuple[str | None, str | None]:
    """The node that failed the run and its message, if the record says."""
    error = record.error
    if isinstance(error, Mapping) and error.get("node_id"):
        return str(error["node_id"]), str(error.get("message") or "")
    for node_id, node in record.nodes.items():
        if node.status == "failed":
            node_error = node.error
            message = node_error.get("message") if isinstance(node_error, Mapping) else node_error
            return str(node_id), str(message or "")
    return None, None


def failure_text(record: RunRecord) -> str:
    node_id, message = failed_node(record)
    if message is None and isinstance(record.error, Mapping):
        message = str(record.error.get("message") or "")
    where = f" at node '{node_id}'" if node_id else ""
    reason = f": {message}" if message else ""
    return f"Run {record.run_id} {record.status}{where}{reason}"


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def run_result(record: RunRecord, view_url: str | None = None) -> types.CallToolResult:
    """The envelope of a run (finished or still running) as a tool result: the record read once; a run still
    going says how to follow it (and where to watch it, `view_url`, when the server serves the run view)."""
    env = record.envelope()
    content: list[types.ContentBlock] = [_text(to_json(env))]
    is_error = record.status in FAILED
    if is_error:
        content.append(_text(failure_text(record)))
    elif record.status in ("running", "queued"):
        content.append(_text(following_text(record.run_id, record.status, view_url)))
    elif record.status == "input_required":
        asks = "; ".join(f"node {path!r} asks: {q.get('question')}" for path, q in record.questions.items())
        content.append(_text(f"Run {record.run_id} waits for an answer ({asks}). Ask the user, then call "
                             f"run_respond(run_id, node, answer) with an answer that fits the node's schema."))
    trace_id = trace_id_of(record)
    meta = {TRACE_ID_META: trace_id} if trace_id is not None else None
    return types.CallToolResult(content=content, structured_content=env, is_error=is_error, _meta=meta)


def following_text(run_id: str, status: str, view_url: str | None = None) -> str:
    """What a model reads when the call's wait budget ran out before the run ended: exactly how to follow it."""
    text = (f"Run {run_id} is still {status}: it goes on without this call. Call "
            f"run_result(run_id=\"{run_id}\") to wait for its result (call it again while it answers running); "
            f"run_status(run_id=\"{run_id}\") shows its nodes, run_cancel(run_id=\"{run_id}\") stops it.")
    return f"{text} Watch it live at {view_url}" if view_url else text


def json_result(value: Any, *, is_error: bool = False) -> types.CallToolResult:
    """Any JSON-able value as a tool result (object values also as structuredContent)."""
    structured = value if isinstance(value, dict) else {"result": value}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=to_json(value))],
        structured_content=structured,
        is_error=is_error,
    )


def error_result(
    code: str, message: str, details: Mapping[str, Any] | None = None
) -> types.CallToolResult:
    """A tool-level failure the model can read and act on."""
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = dict(details)
    env = {
        "run_id": None,
        "status": "error",
        "outputs": None,
        "error": error,
        "cost_usd": None,
        "duration_ms": None,
    }
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text=to_json(env)),
            types.TextContent(type="text", text=message),
        ],
        structured_content=env,
        is_error=True,
    )
