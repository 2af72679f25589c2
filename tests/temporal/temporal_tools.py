"""Tools for the Temporal tests: every call appends a line to $ICE_TEST_MARKS (label and idempotency key),
so a test counts executions across worker processes it kills."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from ice_mcp import current_call, tool


def note(line: str) -> None:
    with open(os.environ["ICE_TEST_MARKS"], "a") as marks:
        marks.write(line + "\n")


@tool
async def mark(label: str, seconds: float = 0.0) -> dict[str, Any]:
    """Note this execution (label, idempotency key, the worker's pid), then wait `seconds`; a cancellation is
    noted too."""
    call = current_call()
    note(f"{label} {call.idempotency_key if call else '-'} {os.getpid()}")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        note(f"{label}:cancelled {call.idempotency_key if call else '-'} {os.getpid()}")
        raise
    return {"label": label}


@tool
async def blob(size: int) -> dict[str, Any]:
    """A text of `size` characters (payloads over 256 KB travel by reference)."""
    return {"text": "x" * size, "size": size}
