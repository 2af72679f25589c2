"""The queued runs this process holds (a workflow's `limits` with `on_limit: queue`): one poller per workflow
asks the run store to admit the queue's first run when it is one of ours, so runs start in the order they
were queued across every process on the store."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from ice_mcp.blueprint.models import Limits
from ice_mcp.errors import IceError
from ice_mcp.store.base import RunStorage, threadsafe_set, watch_changes
from ice_mcp.store.sqlite_limits import POLL_SECONDS

NOTIFIED_POLL_SECONDS = 5.0  # at most this apart on a store that tells when a run ends (PostgreSQL's NOTIFY)

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Line:
    limits: Limits
    turns: dict[str, asyncio.Future[None]] = field(default_factory=dict)  # run id -> its turn
    queued_at: dict[str, float] = field(default_factory=dict)  # run id -> its place in the queue
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    poller: asyncio.Task[None] | None = None


@dataclass(slots=True)
class AdmissionLine:
    store: RunStorage
    _lines: dict[str, _Line] = field(default_factory=dict)
    _closed: bool = False  # a store call still in its thread when the engine closes answers nothing

    async def wait_turn(self, workflow: str, run_id: str, queued_at: float, limits: Limits) -> None:
        """Return once the store admitted the run (its turn came and a slot is free); runs queue in the
        order of `queued_at` (when they were made), whichever process holds them."""
        line = self._lines.get(workflow)
        if line is None:
            line = self._lines[workflow] = _Line(limits)
        line.limits = limits  # the newest blueprint's limits hold
        turn = line.turns[run_id] = asyncio.get_running_loop().create_future()
        line.queued_at[run_id] = queued_at
        if line.poller is None or line.poller.done():
            line.poller = asyncio.get_running_loop().create_task(self._poll(workflow, line),
                                                                 name=f"ice_mcp-queue-{workflow}")
        line.wake.set()
        try:
            await turn
        finally:
            line.turns.pop(run_id, None)
            line.queued_at.pop(run_id, None)

    def join(self, workflow: str, run_id: str, queued_at: float, limits: Limits) -> bool:
        """Put a new run (its record just made) in the store's queue now, so it keeps its place ahead of runs
        made after it in any process; True if it was admitted at once."""
        admitted, _ = self.store.admit_next(workflow, {run_id: queued_at}, self.store.now(),
                                            max_concurrent=limits.max_concurrent_runs,
                                            per_minute=limits.runs_per_minute)
        return admitted == run_id

    def wake(self, workflow: str) -> None:
        """A run of `workflow` ended here: ask again now rather than at the next poll."""
        line = self._lines.get(workflow)
        if line is not None:
            line.wake.set()

    async def _poll(self, workflow: str, line: _Line) -> None:
        """Ask until every run of the line was admitted; woken by a run ending here, or, on a store that tells
        (PostgreSQL), by a run of `workflow` ending or being admitted in any process."""
        unwatch = watch_changes(self.store, "admissions", workflow, threadsafe_set(line.wake))
        try:
            await self._ask(workflow, line, POLL_SECONDS if unwatch is None else NOTIFIED_POLL_SECONDS)
        finally:
            if unwatch is not None:
                unwatch()

    async def _ask(self, workflow: str, line: _Line, poll: float) -> None:
        while line.turns:
            line.wake.clear()
            try:
                admitted, wait = await asyncio.to_thread(self._admit_next, workflow, line)
            except IceError as exc:  # the store is away: keep the runs queued and ask again
                logger.warning("queued runs of %s wait for the run store: %s", workflow, exc.message)
                admitted, wait = None, POLL_SECONDS
            except Exception:  # a store hiccup must not strand the queue: ask again
                logger.exception("admitting queued runs of %s failed; asking again", workflow)
                admitted, wait = None, POLL_SECONDS
            turn = line.turns.pop(admitted, None) if admitted is not None else None
            if turn is not None and not turn.done():
                turn.set_result(None)
            if admitted is None:
                with contextlib.suppress(TimeoutError):
                    # At most a poll apart: the store's clock, not ours, says when a minute's window moves on.
                    await asyncio.wait_for(line.wake.wait(), min(wait, poll))
        if self._lines.get(workflow) is line:
            del self._lines[workflow]

    def _admit_next(self, workflow: str, line: _Line) -> tuple[str | None, float]:
        if self._closed:
            return None, POLL_SECONDS
        try:
            self.store.flush(POLL_SECONDS)  # a run that just ended here has its final record kept before it counts
            return self.store.admit_next(workflow, dict(line.queued_at), self.store.now(),
                                         max_concurrent=line.limits.max_concurrent_runs,
                                         per_minute=line.limits.runs_per_minute)
        except Exception:
            if self._closed:  # the store closed under this thread: nothing to admit any more
                return None, POLL_SECONDS
            raise

    async def aclose(self) -> None:
        self._closed = True
        pollers = [line.poller for line in self._lines.values() if line.poller is not None]
        for poller in pollers:
            poller.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)
        self._lines.clear()
