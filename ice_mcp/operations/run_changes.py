"""`run_status` for a view that follows a run (the MCP App): only what changed since its last answer, or one node.

A view polls about once a second through its host, so an answer while nothing happens stays a few hundred bytes:
the run's status and the node events it has not seen (`seen`), the graph only on the first call, outputs and
questions only when something changed. `node` answers one node's detail when the user opens it.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

import orjson

from ice_mcp.errors import IceError
from ice_mcp.network import NETWORK_ID_PREFIX
from ice_mcp.operations.run_graph import run_graph
from ice_mcp.operations.tool_table import Answer, BuiltinCall, Handler, Reply
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.store.node_states import fold
from ice_mcp.store.records import RunRecord
from ice_mcp.store.vocabulary import EventType

MAX_EVENTS = 1_000  # node events in one answer: a view far behind catches up over a few polls
TEXT_LIMIT = 20_000  # characters of a node's output or error in its detail, or of a run's outputs
MESSAGE_LIMIT = 300  # characters of an error message carried by an event
FOLLOW_PROPERTIES: dict[str, Any] = {
    "seen": {"type": "integer", "minimum": -1,
             "description": "For a view following the run: the `seen` of your previous answer (-1 the first time, "
                            "to also get the graph). The answer then holds only what changed since."},
    "node": {"type": "string", "description": "For a view: one node's detail (its path, as events name it)."},
}

Event = tuple[int, str, str | None, Mapping[str, Any], int | None]  # (seq, type, node_id, data, attempt)


def following(handler: Handler) -> Handler:
    """`handler` (run_status), answering a view's `seen` or `node` argument itself."""

    async def answer(call: BuiltinCall) -> Answer:
        if call.args.get("node") is not None:
            return Reply(node_detail(call.orc, call.args["run_id"], call.args["node"]))
        if call.args.get("seen") is not None:
            return Reply(changes(call.orc, call.args["run_id"], int(call.args["seen"])))
        return await handler(call)

    return answer


def _unknown(run_id: str) -> IceError:
    return IceError(f"unknown run {run_id!r}", code="unknown_run")


def _text(value: Any, limit: int = TEXT_LIMIT) -> str:
    """`value` as indented JSON text, cut at `limit` characters."""
    try:
        text = orjson.dumps(value, default=str, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # integers beyond 64 bits
        text = json.dumps(value, default=str, indent=2)
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit:,} more characters)"


def _message(error: Any) -> str:
    message = error.get("message", "") if isinstance(error, Mapping) else error
    return str(message)[:MESSAGE_LIMIT]


def _events(orc: Orchestrator, run_id: str, seen: int) -> list[Event]:
    """The run's events from number `seen` on: from memory when it runs here, else from the store."""
    handle = orc.get_handle(run_id)
    if handle is not None:
        return [(e.seq, e.type, e.node_id, e.data, e.attempt) for e in handle.events.events[seen:]]
    if orc.store is None:
        return []
    return [(e["seq"], e["type"], e.get("node_id"), e.get("data") or {}, e.get("attempt"))
            for e in orc.store.events(run_id, after=seen - 1)]


def _slim(event: Event) -> dict[str, Any]:
    seq, kind, node_id, data, _ = event
    slim: dict[str, Any] = {"seq": seq, "type": kind, "node_id": node_id}
    if data.get("error") is not None:
        slim["error"] = _message(data["error"])
    return slim


def _questions(record: RunRecord) -> dict[str, Any]:
    return {path: {"question": q.get("question"), "schema": q.get("schema"), "approval": bool(q.get("approval"))}
            for path, q in record.questions.items()}


def changes(orc: Orchestrator, run_id: str, seen: int) -> dict[str, Any]:
    """What a view that has seen `seen` events of the run lacks (-1: everything, with the graph)."""
    if run_id.startswith(NETWORK_ID_PREFIX) and (network := orc.network_status(run_id)) is not None:
        return _network_changes(network, seen)
    record = orc.get_run(run_id)
    if record is None:
        raise _unknown(run_id)
    first = seen < 0
    events = _events(orc, run_id, max(seen, 0))
    node_events = [event for event in events if event[2] is not None]
    if first:  # a node's last event is all a new view needs to draw it
        last = {event[2]: event for event in node_events}
        node_events = sorted(last.values(), key=lambda event: event[0])
    more = len(node_events) > MAX_EVENTS
    if more:
        node_events = node_events[:MAX_EVENTS]
    told = node_events[-1][0] + 1 if more else (events[-1][0] + 1 if events else max(seen, 0))
    answer: dict[str, Any] = {"run_id": record.run_id, "workflow": record.workflow, "status": record.status,
                              "seen": told, "events": [_slim(event) for event in node_events]}
    if more:
        answer["more"] = True
    if record.done:  # the journal may trail a record read through the store: the view waits for its end
        answer["final"] = not more and any(event[1] == EventType.RUN_FINISHED for event in events)
    if first:
        answer["graph"] = run_graph(orc, run_id)
        # Nodes a retry reused have no events in this run: their states come from the record.
        answer["node_states"] = {node_id: node.status for node_id, node in record.nodes.items()
                                 if node.status != "pending"}
    if first or events:
        answer.update(cost_usd=record.cost_usd, duration_ms=record.duration_ms, questions=_questions(record),
                      error=None if record.error is None else _message(record.error),
                      outputs=None if record.outputs is None else _text(record.outputs))
    return answer


def _network_changes(network: Mapping[str, Any], seen: int) -> dict[str, Any]:
    """A network's workflows and their runs, when they changed since the answer whose `seen` the view sends."""
    workflows = {wid: {"status": w.get("status"), "run_id": w.get("run_id")}
                 for wid, w in (network.get("workflows") or {}).items()}
    digest = zlib.crc32(orjson.dumps(workflows, option=orjson.OPT_SORT_KEYS))
    answer: dict[str, Any] = {"run_id": network.get("network_id"), "kind": "network",
                              "workflow": network.get("network"), "status": network.get("status"),
                              "cost_usd": network.get("cost_usd"), "seen": digest}
    if digest != seen:
        answer["workflows"] = workflows
    return answer


def node_detail(orc: Orchestrator, run_id: str, node: str) -> dict[str, Any]:
    """One node as a view shows it when opened: state, attempts, duration, cost, output or error, question."""
    record = orc.get_run(run_id)
    if record is None:
        raise _unknown(run_id)
    detail: dict[str, Any] = {"run_id": run_id, "node": node, "status": "pending", "attempts": 0,
                              "duration_ms": None, "cost_usd": None, "output": None, "error": None}
    kept = record.nodes.get(node)
    if kept is not None:  # a top-level node: the record has it
        detail.update(status=kept.status, attempts=kept.attempts, duration_ms=kept.duration_ms,
                      cost_usd=kept.cost_usd, output=None if kept.output is None else _text(kept.output),
                      error=None if kept.error is None else _text(kept.error))
    else:  # inside a container: only its events tell
        mine = [{"type": kind, "node_id": node, "attempt": attempt, "data": data}
                for _, kind, node_id, data, attempt in _events(orc, run_id, 0) if node_id == node]
        state = fold(mine).get(node)
        if state is not None:
            detail.update(status=state.phase, attempts=state.attempts)
            if state.status == "succeeded":
                detail.update(duration_ms=state.duration_ms, cost_usd=state.cost_usd, output=_text(state.output))
            elif state.status == "failed":
                detail.update(duration_ms=state.duration_ms, cost_usd=state.cost_usd, error=_text(state.error))
    if (question := _questions(record).get(node)) is not None:
        detail["question"] = question
    return detail
