"""The questions `human` nodes ask and people's answers, checked, journaled and handed to the run that asked."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ice_mcp.blueprint.schemas import schema_validator
from ice_mcp.core.questions import Answer, Question
from ice_mcp.desks import RunLookups
from ice_mcp.engines.remote_runs import follow_event
from ice_mcp.errors import AnswerInvalid, IceError, NotWaiting, UnknownName
from ice_mcp.hosts import HasEngine, HasOwner, HasQuestions
from ice_mcp.store.base import StoredRun
from ice_mcp.store.events import Event, Listener
from ice_mcp.store.node_states import ask_or_answer
from ice_mcp.store.records import RunRecord
from ice_mcp.store.vocabulary import EventType

if TYPE_CHECKING:
    from ice_mcp.run_handles import RunHandle
    from ice_mcp.store.base import RunRecords

logger = logging.getLogger(__name__)
ANSWER_WAIT_SECONDS = 10.0  # how long an answer handed to another process waits for its run to take it


class AnswerHost(RunLookups, HasQuestions, HasEngine, HasOwner, Protocol):
    """What the answer desk asks of its orchestrator: where its runs' questions wait, the store their records and
    journals are kept in, the engine that hands an answer to another process, and who this process is."""

    @property
    def store(self) -> RunRecords | None: ...


class Answers:
    """An orchestrator's answer desk: what its runs ask (`orc.questions`, kept on their records) and the
    answers to it, given here or handed over through the run store between processes."""

    def __init__(self, orc: AnswerHost) -> None:
        self._orc = orc
        self._taking: set[asyncio.Task[None]] = set()  # answers other processes handed over, being taken

    def listener(self, record: RunRecord) -> Listener:
        """Keeps the record's pending questions and its `input_required` status, and stores them at once
        (another process, or the next one, reads the question from there)."""
        orc = self._orc

        def on_event(event: Event) -> None:
            if ask_or_answer(record, event) and orc.store is not None:
                orc.store.save(record)

        return on_event

    async def respond(self, run_id: str, node_path: str, answer: Any, *, by: str = "api",
                      declined: bool = False) -> RunRecord:
        """Answer the question a waiting `human` node asked (see `Orchestrator.respond`)."""
        orc = self._orc
        handle = orc.get_handle(run_id)
        question = orc.questions.waiting(run_id, node_path) if handle is not None else None
        if question is None:
            stored = orc.store.run(run_id) if orc.store is not None else None
            asked = stored.record.questions.get(node_path) if stored is not None and not stored.record.done else None
            if stored is not None and asked is not None and stored.owner != orc.owner.owner_id:
                return await self._respond_elsewhere(stored, node_path, asked, answer, by=by, declined=declined)
        if question is None or handle is None:
            record = orc.get_run(run_id)
            if record is None:
                raise UnknownName("run", run_id, None)
            waiting = sorted(record.questions)
            where = "" if handle is not None or not waiting else " in this process (another server runs it)"
            raise NotWaiting(f"node {node_path!r} of run {run_id} is not waiting for an answer{where}"
                             + (f"; waiting: {', '.join(waiting)}" if waiting else ""), details={"waiting": waiting})
        _check(question.schema, answer, node_path, declined)
        return await self._respond_here(handle, question, answer, by=by, declined=declined)

    async def _respond_here(self, handle: RunHandle, question: Question, answer: Any, *, by: str,
                            declined: bool) -> RunRecord:
        """Journal a checked answer to a question a run of this process waits on, and wake its node."""
        self._orc.questions.take(question, Answer(None if declined else answer, by, declined=declined), handle.events)
        if self._orc.store is not None:
            await asyncio.to_thread(self._orc.store.flush, 10.0)  # journaled on disk before the caller hears
        return handle.record

    async def _respond_elsewhere(self, stored: StoredRun, node_path: str, asked: Mapping[str, Any], answer: Any, *,
                                 by: str, declined: bool) -> RunRecord:
        """A question a run of another process (or of Temporal's workers) asked: the answer is checked here,
        handed over through its engine, and confirmed once that run's journal has it. Raises AnswerInvalid, or NotWaiting when the
        process running it did not take it within ANSWER_WAIT_SECONDS."""
        assert self._orc.store is not None
        store, run_id = self._orc.store, stored.record.run_id
        _check(asked.get("schema") or {}, answer, node_path, declined)
        after = max((e["seq"] for e in await asyncio.to_thread(store.events, run_id)), default=-1)
        followed = self._orc.engine.runs.get(run_id)  # followed here: confirmed once its follower read the answer
        seen = len(followed.events.events) if followed is not None else 0
        await self._orc.engine.hand_answer(run_id, {"node": node_path, "answer": answer, "by": by,
                                                    "at": time.time(), "declined": declined})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ANSWER_WAIT_SECONDS
        while loop.time() < deadline:
            await asyncio.sleep(0.05)
            question = self._orc.questions.waiting(run_id, node_path)
            here = self._orc.get_handle(run_id) if question is not None else None
            if question is not None and here is not None:  # its server died and this one took the run over
                return await self._respond_here(here, question, answer, by=by, declined=declined)
            if followed is not None and not followed.done:  # its record then shows the question answered
                if any(e.type == EventType.NODE_ANSWERED and e.node_id == node_path
                       for e in followed.events.events[seen:]):
                    return followed.record
                continue
            events = await asyncio.to_thread(store.events, run_id, after)
            taken = [e for e in events if e["type"] == EventType.NODE_ANSWERED and e.get("node_id") == node_path]
            if taken:
                record = await asyncio.to_thread(store.get, run_id) or stored.record
                follow_event(record, Event.from_dict(taken[-1]))  # as the journal says, whenever the record was kept
                return record
        raise NotWaiting(f"the process running run {run_id} did not take the answer to {node_path!r} in time",
                         details={"waiting": sorted(stored.record.questions)})

    def take_handed_over(self, run_id: str, data: Mapping[str, Any] | None) -> None:
        """An answer another process received (a store signal): taken in the background when a run of
        this process waits for it."""
        if data is not None and self._orc.questions.waiting(run_id, str(data.get("node"))):
            self._taking.add(task := asyncio.get_running_loop().create_task(self._take(run_id, data)))
            task.add_done_callback(self._taking.discard)

    async def _take(self, run_id: str, data: Mapping[str, Any]) -> None:
        """An answer another process received for a question a run of this process asked."""
        try:
            await self.respond(run_id, str(data.get("node")), data.get("answer"), by=str(data.get("by") or "api"),
                               declined=bool(data.get("declined")))
        except IceError as exc:
            logger.warning("an answer for run %s handed over through the store was not taken: %s", run_id, exc.message)


def answer_problems(schema: Mapping[str, Any], answer: Any) -> list[str]:
    """What is wrong with an answer, against its question's schema (path: message; empty when it fits)."""
    validator = schema_validator(schema)
    errors = sorted(validator.iter_errors(answer), key=lambda e: list(e.absolute_path))[:20]
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(answer)'}: {e.message[:300]}" for e in errors]


def _check(schema: Mapping[str, Any], answer: Any, node_path: str, declined: bool) -> None:
    """Raises AnswerInvalid when an answer (not a refusal) does not fit its question's schema."""
    problems = [] if declined else answer_problems(schema, answer)
    if problems:
        raise AnswerInvalid(f"the answer to {node_path!r} does not fit its schema: {problems[0]}", problems)
