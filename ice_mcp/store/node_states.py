"""The one fold from a run's events to its nodes' states: status, attempts, times, result and question.

Every reader that shows, follows or resumes a node takes its state from here: the journal's replay, a followed
run's record and its questions, the answer desks, the run view, `run_status` and the terminal. Node paths are
event node ids (`loop[3].body`), so nodes nested in sub-graphs have states of their own. Readers that count
or draw spans (metrics, trace export) walk the events themselves, by the vocabulary's names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ice_mcp.store.events import Event
from ice_mcp.store.records import NodeRecord, RunRecord
from ice_mcp.store.vocabulary import EventType
from ice_mcp.types import Usage

# What a view draws after each event of a node; dag.js's STATE_OF is the same table (a test keeps it so).
PHASE_AFTER: Mapping[str, str] = {
    EventType.NODE_STARTED: "running", EventType.NODE_RETRYING: "retrying",
    EventType.NODE_SUCCEEDED: "succeeded", EventType.NODE_FAILED: "failed", EventType.NODE_SKIPPED: "skipped",
    EventType.NODE_CANCELLED: "cancelled", EventType.NODE_WAITING: "waiting", EventType.NODE_ANSWERED: "running",
}
# The statuses a finished node keeps, which a resumed run or a retry reuses (a cancelled node runs again).
FINISHED = frozenset({"succeeded", "failed", "skipped"})
# Whether an event asks a question (True) or settles the one its node asked (False); others leave questions be.
_ASKS: dict[str, bool] = {EventType.NODE_WAITING: True, EventType.NODE_ANSWERED: False, EventType.NODE_SUCCEEDED: False,
         EventType.NODE_FAILED: False}

EventParts = tuple[Any, Any, Any, Any, Mapping[str, Any]]  # (type, node_id, attempt, ts, data)
RecordStep = Callable[[NodeRecord, int | None, Mapping[str, Any]], None]  # (node, attempt, data)


@dataclass(slots=True)
class Attempt:
    """One attempt of a node, as its events number it."""

    number: int
    started_at: float | None = None  # its node_started's time (an attempt after a retry has no start of its own)
    outcome: str = "running"  # running, retried, succeeded or failed
    error: Any = None  # why it was retried
    delay_seconds: Any = None  # the backoff before the next attempt
    question: dict[str, Any] | None = None  # its latest node_waiting's data: what it asked
    asked_at: float | None = None  # when it first asked (a resumed run asks again with its first deadline)
    answer: dict[str, Any] | None = None  # its node_answered's data: answer, answered_by, answered_at, declined


@dataclass(slots=True)
class NodeState(NodeRecord):
    """A node's record as its events tell it (the latest execution of its path wins), and what only the events
    know: what a view draws, each attempt, when it started and ended, the question it waits on."""

    phase: str = "pending"  # status, or `retrying` (between attempts) or `waiting` (for an answer)
    by_attempt: dict[int, Attempt] = field(default_factory=dict)
    node_type: str | None = None  # as the event that ended it says
    started_at: float | None = None  # its latest node_started's time
    ended_at: float | None = None  # the time of the event that ended it
    question: dict[str, Any] | None = None  # what it waits on (node_waiting's data) until answered or ended
    reused_from: str | None = None  # the run a retry took this node's outcome from, without running it

    def attempt(self, number: int) -> Attempt:
        """The attempt `number`, begun if no event named it before."""
        found = self.by_attempt.get(number)
        if found is None:
            found = self.by_attempt[number] = Attempt(number)
        return found

    def last_question(self) -> dict[str, Any] | None:
        """The question its latest asking attempt asked, answered or not."""
        asked = [n for n, attempt in self.by_attempt.items() if attempt.question is not None]
        return self.by_attempt[max(asked)].question if asked else None


class NodeStates:
    """The states of a run's nodes by path, folded from its events in order: `apply` each as it comes (a live
    reader), or `fold` a journal."""

    __slots__ = ("nodes",)

    def __init__(self) -> None:
        self.nodes: dict[str, NodeState] = {}

    def apply(self, event: Event | Mapping[str, Any]) -> NodeState | None:
        """Fold one event (an Event, or a journal's dict) in; the state it moved (None: no node's state moved)."""
        kind, path, number, ts, data = _parts(event)
        step = _STEPS.get(kind)
        if step is None or not isinstance(path, str):
            return None
        state = self.nodes.get(path)
        if state is None:
            state = self.nodes[path] = NodeState()
        record_step = _RECORD_STEPS.get(kind)
        if record_step is not None:
            record_step(state, number, data)
        state.phase = PHASE_AFTER[kind]
        step(state, None if number is None else state.attempt(number), ts, data)
        return state


def fold(events: Iterable[Event | Mapping[str, Any]]) -> dict[str, NodeState]:
    """Each node's state after `events` (Events or a journal's dicts, in order), by node path."""
    states = NodeStates()
    for event in events:
        states.apply(event)
    return states.nodes


def advance(node: NodeRecord, event: Event | Mapping[str, Any]) -> None:
    """Move a run record's node by one of its events, as the runner moved it (the record's fields only)."""
    kind, _, number, _, data = _parts(event)
    record_step = _RECORD_STEPS.get(kind)
    if record_step is not None:
        record_step(node, number, data)


def ask_or_answer(record: RunRecord, event: Event) -> bool:
    """Keep a run record's pending questions (and its `input_required` status) as one event moves them; whether
    they changed. A cancelled node's question stays: a suspended run asks it again in the next server."""
    asks, path = _ASKS.get(event.type), event.node_id
    if asks is None or path is None:
        return False
    if asks:
        record.questions[path] = dict(event.data)
    elif path in record.questions:
        del record.questions[path]
    else:
        return False
    if not record.done:
        record.status = "input_required" if record.questions else "running"
    return True


# -- the steps ---------------------------------------------------------------------------------------------


def _parts(event: Event | Mapping[str, Any]) -> EventParts:
    if isinstance(event, Event):
        return event.type, event.node_id, event.attempt, event.ts, event.data
    return event.get("type"), event.get("node_id"), event.get("attempt"), event.get("ts"), event.get("data") or {}


def _record_started(node: NodeRecord, number: int | None, data: Mapping[str, Any]) -> None:
    node.status, node.attempts = "running", number or 1


def _record_retrying(node: NodeRecord, number: int | None, data: Mapping[str, Any]) -> None:
    node.status, node.attempts = "running", (number or 1) + 1  # the attempt that follows the failed one


def _record_end(status: str) -> RecordStep:
    """The step of an event that ends a node as `status`: what it reports becomes the record's."""

    def end(node: NodeRecord, number: int | None, data: Mapping[str, Any]) -> None:
        node.status, node.attempts = status, number or node.attempts
        node.output, node.error = data.get("output"), data.get("error")
        node.duration_ms = float(data.get("duration_ms") or 0.0)
        node.cost_usd = float(data.get("cost_usd") or 0.0)
        tokens = data.get("usage") or {}
        node.usage = Usage(int(tokens.get("input_tokens", 0)), int(tokens.get("output_tokens", 0)))

    return end


def _record_cancelled(node: NodeRecord, number: int | None, data: Mapping[str, Any]) -> None:
    node.status, node.attempts = "cancelled", number or node.attempts


def _started(state: NodeState, attempt: Attempt | None, ts: Any, data: Mapping[str, Any]) -> None:
    state.started_at = ts
    if attempt is not None:
        attempt.started_at = ts


def _retrying(state: NodeState, attempt: Attempt | None, ts: Any, data: Mapping[str, Any]) -> None:
    if attempt is not None:
        attempt.outcome, attempt.error, attempt.delay_seconds = "retried", data.get("error"), data.get("delay_seconds")
        state.attempt(attempt.number + 1)


def _ended(state: NodeState, attempt: Attempt | None, ts: Any, data: Mapping[str, Any]) -> None:
    state.ended_at, state.node_type, state.reused_from = ts, data.get("type"), data.get("reused_from")
    state.question = None  # a node that ended asks no more
    if attempt is not None:
        attempt.outcome = state.status


def _cancelled(state: NodeState, attempt: Attempt | None, ts: Any, data: Mapping[str, Any]) -> None:
    state.ended_at = ts


def _waiting(state: NodeState, attempt: Attempt | None, ts: Any, data: Mapping[str, Any]) -> None:
    state.question = question = dict(data)
    if attempt is not None:
        attempt.question, attempt.asked_at = question, attempt.asked_at or data.get("asked_at")


def _answered(state: NodeState, attempt: Attempt | None, ts: Any, data: Mapping[str, Any]) -> None:
    state.question = None
    if attempt is not None:
        attempt.answer = dict(data)


# What each event does to the record's fields (node_waiting and node_answered leave them be).
_RECORD_STEPS: dict[str, RecordStep] = {
    EventType.NODE_STARTED: _record_started, EventType.NODE_RETRYING: _record_retrying,
    EventType.NODE_SUCCEEDED: _record_end("succeeded"), EventType.NODE_FAILED: _record_end("failed"),
    EventType.NODE_SKIPPED: _record_end("skipped"), EventType.NODE_CANCELLED: _record_cancelled,
}
# What each event does besides: attempts, times, questions.
_STEPS: dict[str, Callable[[NodeState, Attempt | None, Any, Mapping[str, Any]], None]] = {
    EventType.NODE_STARTED: _started, EventType.NODE_RETRYING: _retrying, EventType.NODE_SUCCEEDED: _ended,
    EventType.NODE_FAILED: _ended, EventType.NODE_SKIPPED: _ended, EventType.NODE_CANCELLED: _cancelled,
    EventType.NODE_WAITING: _waiting, EventType.NODE_ANSWERED: _answered,
}
