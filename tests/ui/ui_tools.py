"""Tools for the browser tests (imported by the server subprocess with `--tools ui_tools`)."""

from __future__ import annotations

import asyncio
from typing import Any

from ice_mcp import tool
from ice_mcp.errors import NodeFailure


@tool
async def hold(label: str, seconds: float = 0.0) -> dict[str, Any]:
    """Wait `seconds`, then return the label."""
    await asyncio.sleep(seconds)
    return {"label": label}


@tool
def check(item: int, bad: int = -1) -> dict[str, Any]:
    """Fail for the item numbered `bad`, pass the others."""
    if item == bad:
        raise NodeFailure(f"disk on fire at item {item}", code="disk_on_fire", retryable=False)
    return {"item": item}


@tool
def greet(name: str, times: int = 1, loud: bool = False, style: str = "plain") -> dict[str, Any]:
    """Greet someone."""
    text = " ".join([f"hello {name}"] * times)
    return {"text": (text.upper() if loud else text) + f" ({style})"}
