"""The one fold from events to node states: a real run's journal (a retry, a skipped node, a question answered, a
node inside a loop) folds to what the runner recorded, and the journal's replay, a follower's record and the run
view report the same states; a journal cut short folds to what a resumed run needs."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

from ice_mcp import NodeResult, Orchestrator, Registry, Usage
from ice_mcp.engines.remote_runs import follow_event
from ice_mcp.operations import run_changes
from ice_mcp.server.web.ui.inputs import outputs_from_events
from ice_mcp.server.web.ui.views import json_text, node_detail
from ice_mcp.store.events import Event
from ice_mcp.store.journal import replay_from_events
from ice_mcp.store.node_states import PHASE_AFTER, NodeStates, fold
from ice_mcp.store.records import RunRecord
from ice_mcp.store.vocabulary import EventType

from .helpers import blueprint, tool

DAG_JS = Path(__file__).resolve().parents[2] / "ice_mcp" / "server" / "web" / "ui" / "static" / "dag.js"
RUN = blueprint(
    tool("fetch", "flaky", retries=2, backoff_seconds=0),
    {"id": "gate", "type": "condition", "expression": "false", "true_path": ["never"], "dependencies": ["fetch"]},
    tool("never", "priced", {"i": 0}),
    {"id": "ask", "type": "human", "prompt": "How many?", "dependencies": ["fetch"],
     "schema": {"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]}},
    {"id": "each", "type": "loop", "items": "{{ [1, 2] }}", "dependencies": ["ask"],
     "body": [tool("inner", "priced", {"i": "{{ item }}"})]},
    name="folded")


def add_tools(registry: Registry) -> None:
    calls: list[int] = []

    def flaky() -> dict[str, int]:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("the first call fails")
        return {"calls": len(calls)}

    def priced(i: int) -> NodeResult:
        return NodeResult({"i": i}, cost_usd=0.25 * i, usage=Usage(10 * i, i))

    registry.add_tool(flaky)
    registry.add_tool(priced)


async def answered_run(orc: Orchestrator) -> tuple[RunRecord, list[dict[str, Any]], dict[str, Any]]:
    """The run's final record, its journal, and what the fold said while `ask` waited."""
    add_tools(orc.registry)
    handle = await orc.start(RUN)
    deadline = time.monotonic() + 5
    while "ask" not in handle.record.questions:
        assert time.monotonic() < deadline, handle.record
        await asyncio.sleep(0.01)
    waiting = fold(orc.run_events(handle.run_id))
    during = {"record_questions": dict(handle.record.questions), "record_status": handle.record.status,
              "ask": waiting["ask"].phase, "question": waiting["ask"].question,
              "replay_attempts": dict(replay_from_events(orc.run_events(handle.run_id)).attempts)}
    await orc.respond(handle.run_id, "ask", {"size": 3}, by="test")
    record = await handle.wait(5)
    return record, orc.run_events(handle.run_id), during


async def test_a_journal_folds_to_what_the_runner_recorded(orc: Orchestrator) -> None:
    record, events, during = await answered_run(orc)
    assert record.status == "succeeded", record.error
    states = fold(events)
    assert {path: state.status for path, state in states.items()} == {
        "fetch": "succeeded", "gate": "succeeded", "never": "skipped", "ask": "succeeded", "each": "succeeded",
        "each[0].inner": "succeeded", "each[1].inner": "succeeded"}
    fetch = states["fetch"]
    assert fetch.attempts == 2 and [(a.number, a.outcome) for a in fetch.by_attempt.values()] == [
        (1, "retried"), (2, "succeeded")]
    assert fetch.by_attempt[1].error["message"] == "ConnectionError: the first call fails"
    assert states["never"].attempts == 0 and states["never"].by_attempt == {}
    ask = states["ask"]
    assert ask.question is None and ask.last_question() is not None
    assert ask.by_attempt[1].answer is not None and ask.by_attempt[1].answer["answer"] == {"size": 3}
    inner = states["each[1].inner"]
    assert inner.output == {"i": 2} and inner.cost_usd == 0.5 and inner.usage == Usage(20, 2)
    assert inner.node_type == "tool" and inner.phase == "succeeded" and inner.ended_at is not None
    # The runner keeps its records itself: the fold's top-level states are the same records.
    for node_id, kept in record.nodes.items():
        state = states[node_id]
        assert (state.status, state.attempts, state.output, state.error, state.cost_usd, state.usage) == (
            kept.status, kept.attempts, kept.output, kept.error, kept.cost_usd, kept.usage), node_id
        assert state.duration_ms == (kept.duration_ms if kept.status != "skipped" else 0.0), node_id
    # While `ask` waited: the record's question, `input_required`, and the fold's `waiting`.
    assert during["record_status"] == "input_required" and during["ask"] == "waiting"
    assert during["record_questions"] == {"ask": during["question"]}
    assert during["replay_attempts"] == {"ask": 1}  # a resume goes on at the attempt it reached


async def test_the_replay_the_follower_and_the_run_view_report_the_folded_states(orc: Orchestrator) -> None:
    record, events, _ = await answered_run(orc)
    states = fold(events)
    replay = replay_from_events(events)
    assert set(replay.outcomes) == set(states) and replay.attempts == {}
    for path, outcome in replay.outcomes.items():
        state = states[path]
        assert (outcome.status, outcome.output, outcome.error, outcome.attempts, outcome.cost_usd, outcome.usage,
                outcome.duration_ms) == (state.status, state.output, state.error, max(state.attempts, 1),
                                         state.cost_usd, state.usage, state.duration_ms), path
    followed = RunRecord(record.run_id, record.workflow, record.inputs)
    for event in events:
        follow_event(followed, Event.from_dict(event))
    assert {node_id: node.to_dict() for node_id, node in followed.nodes.items()} == {
        node_id: node.to_dict() for node_id, node in record.nodes.items()}
    assert followed.questions == {} and followed.status == "running"  # the record's end is not an event's
    for path, state in states.items():
        detail = node_detail(path, events)
        assert detail["status"] == state.phase, path
        assert [a["attempt"] for a in detail["attempts"]] == sorted(state.by_attempt), path
        if state.status == "succeeded":
            assert detail["output"] == json_text(state.output) and detail["duration_ms"] == state.duration_ms
    assert [a["outcome"] for a in node_detail("fetch", events)["attempts"]] == ["retried", "succeeded"]
    assert node_detail("ask", events)["question"] == "How many?"
    shown = run_changes.node_detail(orc, record.run_id, "each[1].inner")  # the MCP App's view of a nested node
    assert (shown["status"], shown["attempts"], shown["output"]) == ("succeeded", 1, json_text({"i": 2}))
    assert outputs_from_events(events) == {path: None if state.status == "skipped" else state.output
                                           for path, state in states.items()}


def test_a_journal_cut_short_folds_to_what_a_resume_needs() -> None:
    def event(seq: int, kind: str, node: str, attempt: int | None = None, **data: Any) -> dict[str, Any]:
        return {"type": kind, "run_id": "r", "seq": seq, "ts": float(seq), "node_id": node, "attempt": attempt,
                "data": data}

    journal = [
        event(0, EventType.NODE_STARTED, "a", 1),
        event(1, EventType.NODE_RETRYING, "a", 1, error={"code": "x", "message": "no"}, delay_seconds=2.0),
        event(2, EventType.NODE_STARTED, "b", 1),
        event(3, EventType.NODE_CANCELLED, "b", 1),
        event(4, EventType.NODE_STARTED, "c", 1),
        event(5, EventType.NODE_WAITING, "c", 1, question="Sure?", asked_at=4.5),
        event(6, EventType.NODE_EVENT, "c", 1, event="progress"),
    ]
    states = fold(journal)
    assert {path: (s.status, s.phase, s.attempts) for path, s in states.items()} == {
        "a": ("running", "retrying", 2), "b": ("cancelled", "cancelled", 1), "c": ("running", "waiting", 1)}
    assert states["a"].by_attempt[1].delay_seconds == 2.0 and states["a"].by_attempt[2].started_at is None
    assert states["c"].question == {"question": "Sure?", "asked_at": 4.5}
    replay = replay_from_events(journal)
    assert replay.outcomes == {} and replay.attempts == {"a": 2, "b": 1, "c": 1}
    live = NodeStates()
    moved = [live.apply(Event.from_dict(e)) for e in journal]
    assert moved[-1] is None and live.nodes == states  # applied one by one, as a live reader does


def test_the_browser_draws_node_states_as_the_fold_does() -> None:
    # dag.js keeps its own copy of the table (a static asset): the same events, the same states.
    table = re.search(r"export const STATE_OF = \{(.*?)\};", DAG_JS.read_text(encoding="utf-8"), re.S)
    assert table is not None
    drawn = dict(re.findall(r"(\w+): '(\w+)'", table.group(1)))
    assert drawn == {str(kind): phase for kind, phase in PHASE_AFTER.items()}
