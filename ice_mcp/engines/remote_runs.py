"""Following a run another process runs, through the run store: its journal's new events fed to a local
event log as they are kept, and its record read back as it ends."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import Any

from ice_mcp.errors import IceError
from ice_mcp.store.base import RunStorage
from ice_mcp.store.events import Event, EventLog
from ice_mcp.store.node_states import advance, ask_or_answer
from ice_mcp.store.records import NodeRecord, RunRecord
from ice_mcp.store.vocabulary import EventType

logger = logging.getLogger(__name__)


def follow_event(record: RunRecord, event: Event) -> None:
    """Keep a followed run's live record up to date with its questions and its top-level nodes' events."""
    ask_or_answer(record, event)
    if event.top_level and event.node_id is not None:
        advance(record.nodes.setdefault(event.node_id, NodeRecord()), event)


def take_record(record: RunRecord, kept: RunRecord) -> RunRecord:
    """Make `record` (the object handles hold) what `kept` says, field by field."""
    for item in dataclasses.fields(RunRecord):
        setattr(record, item.name, getattr(kept, item.name))
    return record


async def follow_journal(store: RunStorage, record: RunRecord, events: EventLog) -> RunRecord:
    """Feed the run's kept events after those in `events` to it until the stored record says the run ended
    (read after each quiet second and after `run_finished`); the record as it stands if the store goes away."""
    after = _last_seq(events)
    try:
        async with contextlib.aclosing(store.follow(record.run_id, after)) as batches:
            async for batch in batches:
                for data in batch:
                    _feed(record, events, data)
                if not batch or any(e["type"] == EventType.RUN_FINISHED for e in batch):
                    kept = await asyncio.to_thread(store.get, record.run_id)
                    if kept is not None and kept.done:
                        take_record(record, kept)
                    elif kept is not None:  # its nodes as the events say; whether it waits for a person
                        record.status, record.questions = kept.status, kept.questions
                    if record.done:
                        break
    except IceError as exc:
        logger.warning("following run %s stopped: %s", record.run_id, exc.message)
    return record


async def catch_up(store: RunStorage, record: RunRecord, events: EventLog) -> None:
    """Feed the followed run's events kept since the last one in `events` now rather than at the next poll, so
    that a caller asking right after an answer given through another server sees the run as its journal does."""
    after = _last_seq(events)
    try:
        kept = await asyncio.to_thread(store.events, record.run_id, after)
    except IceError as exc:
        logger.warning("run %s: its journal could not be read now: %s", record.run_id, exc.message)
        return
    for data in kept:
        _feed(record, events, data)


def _feed(record: RunRecord, events: EventLog, data: dict[str, Any]) -> None:
    if data["seq"] <= _last_seq(events):
        return  # fed already (`catch_up` and the poll read the same journal)
    follow_event(record, events.add(Event.from_dict(data)))


def _last_seq(events: EventLog) -> int:
    """The seq of the last event fed (-1: none yet)."""
    return events.events[-1].seq if events.events else -1
