"""What the run view shows, shaped from run records and events: summaries, slim events, node details."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from ice_mcp.observability.tracing import trace_id_of
from ice_mcp.store.node_states import Attempt, fold
from ice_mcp.store.vocabulary import NODE_STATE_EVENTS, RUN_EVENTS

TEXT_LIMIT = 200_000  # characters of one output or input shown; the rest is cut with a note
ERROR_TEXT_LIMIT = 2_000
STREAMED = NODE_STATE_EVENTS | RUN_EVENTS  # what a page hears live: not the chatty node_event
_SLIM_DATA = ("duration_ms", "cost_usd", "tokens", "delay_seconds", "status", "workflow")


def json_text(value: Any, limit: int = TEXT_LIMIT) -> str:
    """`value` as indented JSON text for a <pre>, cut at `limit` characters."""
    try:
        text = orjson.dumps(value, default=str, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # integers beyond 64 bits
        text = json.dumps(value, default=str, indent=2)
    if len(text) > limit:
        return text[:limit] + f"\n… ({len(text) - limit:,} more characters not shown)"
    return text


def _short(text: Any, limit: int = ERROR_TEXT_LIMIT) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "…"


def short_error(error: Any) -> dict[str, Any] | None:
    """An error's code and message, cut to a readable length."""
    if not isinstance(error, Mapping):
        return None if error is None else {"code": "error", "message": _short(error)}
    return {"code": str(error.get("code", "error")), "message": _short(error.get("message", ""))}


def root_cause(error: Any) -> dict[str, Any] | None:
    """The failure at the bottom of nested `node_failed` errors, and the path of nodes down to it."""
    if not isinstance(error, Mapping):
        return None
    path: list[str] = []
    cause: Any = error
    for _ in range(64):
        details = cause.get("details") if isinstance(cause, Mapping) else None
        if not (isinstance(cause, Mapping) and cause.get("code") == "node_failed" and isinstance(details, Mapping)):
            break
        if isinstance(details.get("path"), list) and details.get("cause") is not None:
            path += [str(p) for p in details["path"] if not path or str(p) != path[-1]]
            cause = details["cause"]
        else:
            path.append(str(details.get("node_id")))
            cause = details.get("error") or {}
    if not path:
        return None
    return {"path": path, **(short_error(cause) or {})}


def run_summary(record: Any) -> dict[str, Any]:
    """One row of the runs list."""
    return {
        "run_id": record.run_id,
        "workflow": record.workflow,
        "version": record.workflow_version,
        "status": record.status,
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        "duration_ms": None if record.duration_ms is None else round(record.duration_ms, 1),
        "cost_usd": record.cost_usd,
        "tokens": record.usage.total,
        "error": short_error(record.error),
        "retry_of": record.retry_of,
        "trigger": run_trigger(getattr(record, "trigger", None)),
    }


def run_trigger(trigger: Any) -> dict[str, Any] | None:
    """What started a run, as the page links it: a schedule's id and slot, an evaluation's id, case and repetition
    (None: a call)."""
    if not isinstance(trigger, Mapping) or trigger.get("kind") in (None, "call"):
        return None
    shown: dict[str, Any] = {"kind": str(trigger["kind"])}
    for key in ("schedule_id", "slot", "previous_slot", "eval_id", "case", "repetition"):
        if trigger.get(key) is not None:
            shown[key] = _short(trigger[key], 200)
    for key in ("manual", "backfill"):
        if trigger.get(key):
            shown[key] = True
    return shown


def run_detail(record: Any) -> dict[str, Any]:
    """The run as its page header and summary panel show it. `node_states` and `node_durations`: the record's
    top-level node states and how long the ended ones took, drawn before the events come (and for nodes a retry
    reused, which have no events in the new run)."""
    return {
        **run_summary(record),
        "inputs": json_text(record.inputs),
        "outputs": None if record.outputs is None else json_text(record.outputs),
        "root_cause": root_cause(record.error),
        "node_states": {node_id: node.status for node_id, node in record.nodes.items() if node.status != "pending"},
        "node_durations": {node_id: node.duration_ms for node_id, node in record.nodes.items()
                           if node.status in ("succeeded", "failed") and node.duration_ms},
        "trace_id": trace_id_of(record),  # to look the run up in a trace viewer (None: not traced)
    }


def reused_node(node: Any, retry_of: str | None) -> dict[str, Any]:
    """A node's detail from the run record alone (a node a retry reused from the run it retries)."""
    return {"status": node.status, "duration_ms": node.duration_ms, "cost_usd": node.cost_usd,
            "tokens": node.usage.as_dict(), "output": None if node.output is None else json_text(node.output),
            "error": None if node.error is None else json_text(node.error, ERROR_TEXT_LIMIT * 10),
            "root_cause": root_cause(node.error) or short_error(node.error),
            "reused_from": retry_of}


def slim_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """An event as the page needs it live: no outputs (a click fetches them), short errors."""
    slim: dict[str, Any] = {"seq": event["seq"], "type": event["type"], "ts": event["ts"]}
    if event.get("node_id") is not None:
        slim["node_id"] = event["node_id"]
    if event.get("attempt") is not None:
        slim["attempt"] = event["attempt"]
    data = event.get("data") or {}
    if "type" in data:
        slim["node_type"] = data["type"]
    for key in _SLIM_DATA:
        if key in data:
            slim[key] = data[key]
    if data.get("error") is not None:
        slim["error"] = short_error(data["error"])
    return slim


def node_detail(node_id: str, events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Everything the events say about one node: state, attempts, cost, output, error and root cause."""
    detail: dict[str, Any] = {"node_id": node_id, "status": "pending", "attempts": [], "duration_ms": None,
                              "cost_usd": None, "tokens": None, "output": None, "error": None, "root_cause": None}
    state = fold(event for event in events if event.get("node_id") == node_id).get(node_id)
    if state is None:
        return detail
    detail["status"] = state.phase
    if state.status in ("succeeded", "failed"):
        detail.update(type=state.node_type, duration_ms=state.duration_ms, cost_usd=state.cost_usd,
                      tokens=state.usage.as_dict() if state.status == "succeeded" else None)  # a failure has none
        if state.status == "succeeded":
            detail["output"] = json_text(state.output)
        else:
            detail["error"] = json_text(state.error, ERROR_TEXT_LIMIT * 10)
            detail["root_cause"] = root_cause(state.error) or short_error(state.error)
    if (question := state.last_question()) is not None:
        detail["question"] = _short(question.get("question", ""))
    detail["attempts"] = [_attempt(state.by_attempt[number]) for number in sorted(state.by_attempt)]
    return detail


def _attempt(attempt: Attempt) -> dict[str, Any]:
    shown: dict[str, Any] = {"attempt": attempt.number, "started_at": attempt.started_at, "outcome": attempt.outcome}
    if attempt.outcome == "retried":
        shown.update(error=short_error(attempt.error), delay_seconds=attempt.delay_seconds)
    return shown


def controls_note(config: Any) -> str:
    """Why the run page shows no Cancel or Retry (a UiConfig's server), and how to have them."""
    if config.read_only:
        return "This server is read-only: runs are not cancelled or retried here."
    if config.oauth:
        return ("Cancel and Retry need a sign-in that may run workflows (the ice:run scope): ask your "
                "assistant for a new link to this page (the ui_link tool).")
    if not config.admin_token:
        return ("Cancel and Retry are off: this server has no admin token. Start it with "
                "ICE_MCP_ADMIN_TOKEN set to a secret of yours, then type that secret into Token (top right).")
    return "Cancel and Retry need the admin token: type it into Token (top right)."


def role_note(config: Any, admin: bool, can_start: bool) -> str:
    """What "admin" or "viewer" means on the page."""
    if admin:
        return "admin: you may start, cancel and retry runs."
    seen = "your runs" if config.oauth else "every run"
    return f"viewer: you see {seen}{' and may start workflows' if can_start else ''}. {controls_note(config)}"
