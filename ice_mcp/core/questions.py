"""Questions that `human` nodes ask people, and their answers: one desk per orchestrator.

A waiting node holds no worker: it awaits a future here. The question and the answer are journaled as
the run's `node_waiting` and `node_answered` events, so a resumed run asks again with its first deadline,
or takes the answer given before the restart without asking at all.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ice_mcp.errors import NotWaiting
from ice_mcp.store.node_states import fold
from ice_mcp.store.vocabulary import EventType

if TYPE_CHECKING:
    from ice_mcp.store.events import EventLog

Key = tuple[str, str, int]  # (run_id, node_path, attempt)


@dataclass(frozen=True, slots=True)
class Question:
    """What a node asks, and by when."""

    run_id: str
    node_path: str
    attempt: int
    prompt: str
    schema: dict[str, Any]
    asked_at: float
    deadline: float | None = None  # epoch seconds; None: no timeout
    approval: bool = False

    @property
    def key(self) -> Key:
        return self.run_id, self.node_path, self.attempt

    def to_event(self) -> dict[str, Any]:
        """The `node_waiting` event's data (also how a run record shows a pending question)."""
        return {"question": self.prompt, "schema": self.schema, "asked_at": self.asked_at,
                "deadline": self.deadline, "approval": self.approval}


@dataclass(frozen=True, slots=True)
class Answer:
    value: Any
    by: str
    at: float = field(default_factory=time.time)
    declined: bool = False  # the person refused to answer (an elicitation declined or cancelled)


@dataclass(slots=True)
class _Journaled:
    """What the journal says about one question: when it was asked, and the answer if one came."""

    asked_at: float | None = None
    answer: Answer | None = None


class Questions:
    """The questions waiting in this process, and what resumed runs' journals say about theirs."""

    def __init__(self) -> None:
        self._waiting: dict[Key, tuple[Question, asyncio.Future[Answer]]] = {}
        self._journaled: dict[Key, _Journaled] = {}

    def earlier(self, run_id: str, node_path: str, attempt: int) -> tuple[float | None, Answer | None]:
        """When this question was first asked, and its answer, if the run's journal says (a resumed run)."""
        found = self._journaled.get((run_id, node_path, attempt))
        return (None, None) if found is None else (found.asked_at, found.answer)

    async def wait(self, question: Question, timeout: float | None) -> Answer:
        """The answer to `question`; raises TimeoutError after `timeout` seconds."""
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._waiting[question.key] = (question, future)
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._waiting.pop(question.key, None)
            self._journaled.pop(question.key, None)

    def waiting(self, run_id: str, node_path: str) -> Question | None:
        """The question the node waits on in this process (its latest attempt)."""
        found = [q for (run, path, _), (q, _) in self._waiting.items() if run == run_id and path == node_path]
        return max(found, key=lambda q: q.attempt) if found else None

    def take(self, question: Question, answer: Answer, events: EventLog) -> None:
        """Journal a checked answer as the run's `node_answered` event (what `restore` reads back), then wake
        the node waiting on `question`."""
        events.emit(EventType.NODE_ANSWERED, question.node_path, question.attempt, answer=answer.value,
                    answered_by=answer.by, answered_at=answer.at, **({"declined": True} if answer.declined else {}))
        self.answer(question, answer)

    def answer(self, question: Question, answer: Answer) -> None:
        """Wake the node waiting on `question` (already validated and journaled by the caller)."""
        found = self._waiting.get(question.key)
        if found is None or found[1].done():
            raise NotWaiting(f"node {question.node_path!r} of run {question.run_id} is not waiting for an answer")
        found[1].set_result(answer)

    def restore(self, run_id: str, events: Iterable[Mapping[str, Any]]) -> None:
        """Read a run's journal before it resumes: questions asked, answers given."""
        for path, state in fold(events).items():
            for number, attempt in state.by_attempt.items():
                given = attempt.answer
                if attempt.asked_at is None and given is None:
                    continue
                answer = None if given is None else Answer(
                    given.get("answer"), str(given.get("answered_by") or "unknown"),
                    float(given.get("answered_at") or time.time()), bool(given.get("declined")))
                self._journaled[(run_id, path, number)] = _Journaled(attempt.asked_at, answer)

    def forget(self, run_id: str) -> None:
        """Drop what a finished run's journal said (its waiting questions went with its node tasks)."""
        for key in [key for key in self._journaled if key[0] == run_id]:
            del self._journaled[key]
