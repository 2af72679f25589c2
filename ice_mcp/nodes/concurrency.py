"""Running a list of jobs with bounded concurrency, results in order, first failure wins."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ice_mcp.errors import RunStopped

T = TypeVar("T")


async def run_bounded(jobs: Sequence[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    """Run `jobs` at most `limit` at a time; on the first failure cancel the rest and raise it."""
    results: list[Any] = [None] * len(jobs)
    pending = iter(enumerate(jobs))

    async def worker() -> None:
        for index, job in pending:
            results[index] = await job()

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(limit, len(jobs))):
                group.create_task(worker())
    except BaseExceptionGroup as failures:
        raise first_failure(failures) from None
    return results


def first_failure(group: BaseExceptionGroup[Any]) -> BaseException:
    """The exception to re-raise from a group: a run stop outranks an ordinary failure."""
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(reversed(exc.exceptions))
        else:
            leaves.append(exc)
    return next((e for e in leaves if isinstance(e, RunStopped)), leaves[0])
