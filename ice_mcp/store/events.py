"""The ordered event stream of a run."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Event:
    type: str
    run_id: str
    seq: int
    ts: float
    node_id: str | None = None
    attempt: int | None = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def top_level(self) -> bool:
        """True for events of the run's own nodes, not of nodes nested in sub-graphs."""
        return self.node_id is not None and "." not in self.node_id and "[" not in self.node_id

    @classmethod
    def from_dict(cls, event: dict[str, Any]) -> Event:
        return cls(event["type"], event["run_id"], event["seq"], event["ts"], event.get("node_id"),
                   event.get("attempt"), event.get("data") or {})

    def to_dict(self) -> dict[str, Any]:
        event: dict[str, Any] = {"type": self.type, "run_id": self.run_id, "seq": self.seq, "ts": self.ts}
        if self.node_id is not None:
            event["node_id"] = self.node_id
        if self.attempt is not None:
            event["attempt"] = self.attempt
        if self.data:
            event["data"] = self.data
        return event


Listener = Callable[[Event], None]
logger = logging.getLogger(__name__)


class EventLog:
    """Events of one run, in order, with listeners told of each as it happens."""

    __slots__ = ("clock", "events", "listeners", "run_id")

    def __init__(self, run_id: str, listeners: list[Listener] | None = None, events: list[Event] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.run_id = run_id
        self.events: list[Event] = events or []  # a resumed run goes on after its journal
        self.listeners: list[Listener] = listeners or []
        self.clock = clock  # a durable engine's workflow passes its deterministic clock

    def emit(self, kind: str, node_id: str | None = None, attempt: int | None = None, /, **data: Any) -> Event:
        return self.emit_data(kind, node_id, attempt, data)

    def emit_data(self, kind: str, node_id: str | None, attempt: int | None, data: dict[str, Any]) -> Event:
        """`emit` with the event's data as a dict the caller made and gives up (RunContext.emit's keyword
        arguments), so it is not packed a second time: two events per node."""
        event = Event(kind, self.run_id, len(self.events), self.clock(), node_id, attempt, data)
        self.events.append(event)
        for listener in self.listeners:  # `add`'s loop, without a call more per event
            try:
                listener(event)
            except Exception:  # an observer's bug must not break the run it observes
                logger.exception("event listener failed on %s", event.type)
        return event

    def add(self, event: Event) -> Event:
        """Append an event made elsewhere (another process's, read back from the store) and tell the listeners."""
        self.events.append(event)
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:  # an observer's bug must not break the run it observes
                logger.exception("event listener failed on %s", event.type)
        return event
