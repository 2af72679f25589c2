"""Start a run for a tool call: progress per finished node, a wait budget, cancellation with the call."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ice_mcp.server.envelope import record_dict

logger = logging.getLogger(__name__)

FINISHED_EVENTS = frozenset({"node_succeeded", "node_failed", "node_skipped", "node_cancelled"})

Progress = Callable[[float, float | None, str | None], Awaitable[None]]


def _top_level(event: Any) -> bool:
    flag = getattr(event, "top_level", None)
    if isinstance(flag, bool):
        return flag
    node_id = getattr(event, "node_id", None)
    return isinstance(node_id, str) and "." not in node_id and "[" not in node_id


class ProgressRelay:
    """Turns engine events (delivered synchronously) into progress notifications, in order."""

    def __init__(self, report: Progress | None, total: int | None) -> None:
        self._report = report
        self._total = float(total) if total else None
        self._done: set[str] = set()
        self._queue: asyncio.Queue[tuple[float, str] | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def on_event(self, event: Any) -> None:
        if (
            self._report is None
            or getattr(event, "type", None) not in FINISHED_EVENTS
            or not _top_level(event)
        ):
            return
        node_id = str(event.node_id)
        if node_id in self._done:
            return
        self._done.add(node_id)
        self._queue.put_nowait(
            (float(len(self._done)), f"{node_id}: {str(event.type).removeprefix('node_')}")
        )
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        assert self._report is not None
        while (item := await self._queue.get()) is not None:
            progress, message = item
            try:
                await self._report(progress, self._total, message)
            except Exception:  # the client went away: progress is best effort
                logger.debug("progress notification failed", exc_info=True)

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


def top_level_count(blueprint: Any) -> int | None:
    nodes = getattr(blueprint, "nodes", None)
    return len(nodes) if isinstance(nodes, list) else None


async def run_and_wait(
    orc: Any,
    target: Any,
    inputs: dict[str, Any],
    *,
    wait_seconds: float,
    idempotency_key: str | None,
    progress: Progress | None,
    total: int | None,
) -> dict[str, Any]:
    """Start (or attach to) a run and wait up to `wait_seconds`; the caller's cancellation cancels the run."""
    relay = ProgressRelay(progress, total)
    handle = await orc.start(
        target, inputs, idempotency_key=idempotency_key, on_event=relay.on_event
    )
    try:
        record = await handle.wait(timeout=wait_seconds)
    except asyncio.CancelledError:
        handle.cancel()
        raise
    finally:
        await relay.flush()
    return record_dict(record)
