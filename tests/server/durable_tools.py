"""Tools for the durable-run tests: every call appends a line to a file, so a test counts executions
from outside the server process it kills."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from ice_mcp import current_call, tool


@tool
async def mark(label: str, seconds: float = 0.0) -> dict[str, Any]:
    """Note this execution (label and idempotency key) in $ICE_TEST_MARKS, then wait `seconds`."""
    call = current_call()
    with open(os.environ["ICE_TEST_MARKS"], "a") as marks:
        marks.write(f"{label} {call.idempotency_key if call else '-'}\n")
    await asyncio.sleep(seconds)
    return {"label": label}
