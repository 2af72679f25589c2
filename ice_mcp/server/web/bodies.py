"""Decoding JSON request bodies without stalling the event loop: a small body inline, a big one in a worker thread.

A thread alone would not do: `json.loads` (like orjson and pydantic's parser) holds the GIL until it returns, so the
event loop waits for the whole decode whichever thread runs it (50 MB of rows: ~0.7 s). `decode` gives the C decoder
an object hook written in Python: running it lets the interpreter hand the GIL to a waiting thread (the loop) every
switch interval, at a cost lost in the noise. What is still decoded in one go: one long string (~1.5 ms a MB)
and a long array holding no object (numbers or strings only).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread

# Decoding 128 KiB takes about a millisecond, a hop to a thread about 50 us: below it, the loop decodes.
OFF_LOOP_BYTES = 128 * 1024

T = TypeVar("T")


def _as_is(value: dict[str, Any]) -> dict[str, Any]:
    return value


def decode(body: bytes | str) -> Any:
    """`json.loads(body)`: the same value, the same errors (ValueError, RecursionError)."""
    return json.loads(body, object_hook=_as_is)  # a Python hook: where the decoder lets other threads run


def try_decode(body: bytes | str) -> Any:
    """The decoded body, or None when it is no JSON (as JSON's `null` is: callers read neither as a request)."""
    try:
        return decode(body)
    except (ValueError, RecursionError):
        return None


async def off_loop(work: Callable[[bytes], T], body: bytes) -> T:
    """`work(body)`: inline for a small body, in a worker thread for one of OFF_LOOP_BYTES or more."""
    if len(body) < OFF_LOOP_BYTES:
        return work(body)
    return await anyio.to_thread.run_sync(work, body)
