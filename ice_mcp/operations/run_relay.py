"""Start a run for a tool call: progress per finished node, log messages, a wait budget, cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from ice_mcp.orchestrator import RunHandle
from ice_mcp.store.events import Event, Listener
from ice_mcp.store.records import RunRecord
from ice_mcp.store.vocabulary import NODE_ENDS, EventType

logger = logging.getLogger(__name__)

Progress = Callable[[float, float | None, str | None], Awaitable[None]]
RunLog = Callable[[str, str], Awaitable[None]]  # (level, text): a log message to the caller
# The events a caller hears of in a log message.
_LOGGED = frozenset({EventType.NODE_RETRYING, EventType.NODE_FAILED, EventType.NODE_WAITING})


def log_line(event: Event) -> tuple[str, str] | None:
    """The log message (level, text) a caller hears for an engine event, if any."""
    data, node = event.data, event.node_id
    if event.type not in _LOGGED:  # most events: one lookup
        return None
    if event.type == EventType.NODE_RETRYING:
        error = data.get("error") or {}
        return "warning", f"{node}: attempt {event.attempt} failed ({error.get('message', '')}); retrying"
    if event.type == EventType.NODE_FAILED:
        error = data.get("error") or {}
        return "error", f"{node} failed: {error.get('message', '')}"
    return "notice", f"{node} waits for an answer: {data.get('question', '')}"


class ProgressRelay:
    """Turns engine events (delivered synchronously) into progress notifications and log messages, in order."""

    def __init__(self, report: Progress | None, total: int | None, log: RunLog | None = None) -> None:
        self._report = report
        self._log = log
        self._total = float(total) if total else None
        self._done: set[str] = set()
        self._queue: asyncio.Queue[Callable[[], Awaitable[None]] | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def on_event(self, event: Event) -> None:
        if self._log is not None and (line := log_line(event)) is not None:
            log = self._log
            self._send(lambda: log(*line))
        if self._report is None or event.type not in NODE_ENDS or not event.top_level:
            return
        node_id = str(event.node_id)
        if node_id in self._done:
            return
        self._done.add(node_id)
        report, progress, total = self._report, float(len(self._done)), self._total
        message = f"{node_id}: {str(event.type).removeprefix('node_')}"
        self._send(lambda: report(progress, total, message))

    def _send(self, notification: Callable[[], Awaitable[None]]) -> None:
        self._queue.put_nowait(notification)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while (notification := await self._queue.get()) is not None:
            try:
                await notification()
            except Exception:  # the client went away: progress and logs are best effort
                logger.debug("notification to the caller failed", exc_info=True)

    async def flush(self) -> None:
        """Send what is queued, then stop."""
        if self._task is None:
            return
        self._queue.put_nowait(None)
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout=5)
        except (TimeoutError, asyncio.CancelledError):
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            raise_if_cancelled()


def raise_if_cancelled() -> None:
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


@contextlib.asynccontextmanager
async def relayed_run(
    start: Callable[[Listener | None], Awaitable[RunHandle]],
    progress: Progress | None,
    total: int | None,
    log: RunLog | None = None,
    cancels: Callable[[], bool] | None = None,
) -> AsyncIterator[RunHandle]:
    """Start (or attach to) a run with `start(on_event)`, its progress relayed only when the client asked
    for it; the caller's cancellation cancels the run when `cancels()` says it was the caller's (None: always)."""
    relay = ProgressRelay(progress, total, log) if progress is not None or log is not None else None
    handle = await start(relay.on_event if relay is not None else None)
    try:
        yield handle
    except asyncio.CancelledError:
        if cancels is None or cancels():
            handle.cancel()
        raise
    finally:
        if relay is not None:
            await relay.flush()


async def run_and_wait(
    start: Callable[[Listener | None], Awaitable[RunHandle]],
    *,
    wait_seconds: float,
    progress: Progress | None,
    total: int | None,
    log: RunLog | None = None,
) -> RunRecord:
    """Start (or attach to) a run and wait up to `wait_seconds` for it."""
    async with relayed_run(start, progress, total, log) as handle:
        return await handle.wait(timeout=wait_seconds)
