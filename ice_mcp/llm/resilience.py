"""Retries with backoff (honouring `retry-after`), per-attempt timeouts, and per-provider concurrency."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ice_mcp.llm.errors import LLMError

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]
OnRetry = Callable[[int, LLMError, float], None]


@dataclass(slots=True)
class RetryPolicy:
    """`max_retries` extra attempts on retryable errors (429, 5xx, timeouts, dropped connections).

    The wait is the server's `retry-after` when it gives one, else exponential
    backoff from `base_delay` with jitter, capped at `max_delay`. A `retry-after`
    longer than `max_retry_after` fails at once rather than stalling the run.
    """

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0
    timeout_seconds: float | None = 60.0
    sleep: Sleep = field(default=asyncio.sleep)
    jitter: Callable[[], float] = field(default=random.random)

    def delay(self, attempt: int, error: LLMError) -> float:
        if error.retry_after is not None:
            return error.retry_after
        backoff: float = min(self.base_delay * 2.0 ** (attempt - 1), self.max_delay)
        return backoff * (0.5 + self.jitter() / 2)

    async def run(self, call: Callable[[], Awaitable[T]], *, on_retry: OnRetry | None = None) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                if self.timeout_seconds is None:
                    return await call()
                async with asyncio.timeout(self.timeout_seconds):
                    return await call()
            except TimeoutError:
                error = LLMError(
                    f"model call timed out after {self.timeout_seconds:g} s",
                    code="llm_timeout",
                    retryable=True,
                )
            except LLMError as exc:
                error = exc
            if not error.retryable or attempt > self.max_retries:
                if attempt > 1 and error.retryable:
                    error.message = f"{error.message} (gave up after {attempt} attempts)"
                    error.args = (error.message,)
                raise error
            wait = self.delay(attempt, error)
            if wait > self.max_retry_after:
                error.message = f"{error.message} (server asks to retry after {wait:g} s; not waiting)"
                error.args = (error.message,)
                raise error
            if on_retry is not None:
                on_retry(attempt, error, wait)
            await self.sleep(wait)


class ConcurrencyLimits:
    """At most `limit` calls at once per provider, per event loop."""

    def __init__(self) -> None:
        self._semaphores: dict[tuple[int, str], asyncio.Semaphore] = {}

    def get(self, provider: str, limit: int) -> asyncio.Semaphore:
        key = (id(asyncio.get_running_loop()), provider)
        semaphore = self._semaphores.get(key)
        if semaphore is None:
            semaphore = self._semaphores[key] = asyncio.Semaphore(limit)
        return semaphore
