"""What the service layer hands out and keeps: run handles, idempotency keys that expire, compiled plans."""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from ice_mcp.blueprint.models import Blueprint
from ice_mcp.core.plan import Plan
from ice_mcp.store.events import Event, EventLog, Listener
from ice_mcp.store.records import RunRecord
from ice_mcp.store.vocabulary import EventType

MAX_IDEMPOTENCY_KEYS = 10_000
T = TypeVar("T")


def new_run_id() -> str:
    """32 random hex digits (as a uuid4's hex, a few microseconds cheaper)."""
    return os.urandom(16).hex()


class ExpiringKeys(Generic[T]):
    """Idempotency keys and what they lead to, each for `ttl` seconds, the oldest dropped past `limit`."""

    def __init__(self, ttl: float, limit: int = MAX_IDEMPOTENCY_KEYS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.limit, self.clock = ttl, limit, clock
        self._items: OrderedDict[str, tuple[float, T]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> T | None:
        self._expire()
        found = self._items.get(key)
        return None if found is None else found[1]

    def values(self) -> list[T]:
        return [value for _, value in self._items.values()]

    def put(self, key: str, value: T) -> None:
        self._items.pop(key, None)
        self._items[key] = (self.clock() + self.ttl, value)
        self._expire()
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def _expire(self) -> None:
        now = self.clock()
        while self._items and next(iter(self._items.values()))[0] <= now:
            self._items.popitem(last=False)


class PlanCache:
    """Plans of the Blueprint objects this orchestrator compiled, kept while the object lives
    (a Blueprint object is treated as settled once run: build a new one to change it)."""

    def __init__(self) -> None:
        self._plans: dict[int, tuple[weakref.ref[Blueprint], Plan]] = {}

    def get(self, blueprint: Blueprint) -> Plan | None:
        found = self._plans.get(id(blueprint))
        return found[1] if found is not None and found[0]() is blueprint else None

    def put(self, blueprint: Blueprint, plan: Plan) -> None:
        key = id(blueprint)
        self._plans[key] = (weakref.ref(blueprint, lambda _ref: self._plans.pop(key, None)), plan)

    def clear(self) -> None:
        self._plans.clear()


class RunHandle:
    """A run in progress (or finished): its live record, its events, and a way to wait or cancel.

    `task` ends with the run (it runs it, or an engine's task watches it run elsewhere); `stop` asks the run
    to stop (default: cancel the task); `catch_up` reads a run followed elsewhere up to what its journal holds
    now."""

    def __init__(self, record: RunRecord, events: EventLog, task: asyncio.Task[RunRecord] | None,
                 plan: Plan | None = None, stop: Callable[[], bool] | None = None,
                 catch_up: Callable[[], Awaitable[None]] | None = None) -> None:
        self.record = record
        self.events = events
        self.plan = plan
        self._task = task
        self._stop = stop
        self._catch_up = catch_up
        self._waiters: list[asyncio.Future[None]] = []
        if task is not None:  # whichever engine runs it, the end of its task wakes the waiters
            task.add_done_callback(lambda _task: self.release())
        self.suspended = False  # stopped by a server shutdown: left `running` for the next server to resume

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def done(self) -> bool:
        return self._task is None or self._task.done()

    def subscribe(self, listener: Listener) -> None:
        self.events.listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        if listener in self.events.listeners:
            self.events.listeners.remove(listener)

    async def wait(self, timeout: float | None = None, *, or_question: bool = False) -> RunRecord:
        """The record once the run ends, or as it stands after `timeout` seconds (the run goes on);
        `or_question`: also as soon as a `human` node waits for an answer."""
        if or_question and self.record.questions and self._catch_up is not None and not self.done:
            await self._catch_up()  # answered through another server a moment ago: not a question any more
        if self._task is None or self._task.done() or self.record.done or (or_question and self.record.questions):
            return self.record
        # A future of our own, released as the run ends: one loop turn sooner than waiting on the task,
        # and a timeout cancels only it, never the run.
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        on_event: Listener | None = None
        if or_question:

            def on_event(event: Event) -> None:
                if event.type == EventType.NODE_WAITING and not waiter.done():
                    waiter.set_result(None)

            self.events.listeners.append(on_event)
        try:
            if timeout is None:
                await waiter
            else:
                async with asyncio.timeout(timeout):
                    await waiter
        except TimeoutError:
            pass
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            if on_event is not None and on_event in self.events.listeners:
                self.events.listeners.remove(on_event)
        return self.record

    def release(self) -> None:
        """The run ended: wake everyone waiting for it."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def cancel(self) -> bool:
        """Ask the run to stop: every running node is cancelled; the record ends `cancelled`."""
        if self._task is None or self._task.done():
            return False
        return self._stop() if self._stop is not None else self._task.cancel()

    def detach(self) -> bool:
        """Stop following the run here without asking it to stop (its engine runs it elsewhere)."""
        if self._task is None or self._task.done():
            return False
        return self._task.cancel()
