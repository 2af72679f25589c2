"""The tool bench/schedules.py's scheduled workflow runs: it notes each execution in a file, from outside
the server processes, so the bench counts how often each slot's node ran and when."""

from __future__ import annotations

import os
import time
from typing import Any

from ice_mcp import tool


@tool
async def stamp(schedule: str, slot: str) -> dict[str, Any]:
    """Append `schedule slot unix_time pid` to $ICE_BENCH_STAMPS (one short write: atomic in append
    mode; too short to be worth a thread)."""
    line = f"{schedule} {slot} {time.time():.6f} {os.getpid()}\n"
    with open(os.environ["ICE_BENCH_STAMPS"], "a") as stamps:
        stamps.write(line)
    return {"slot": slot}
