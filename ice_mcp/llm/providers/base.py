"""The one small interface every provider implements."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

from ice_mcp.llm.types import ChatRequest, Completion, StreamDelta

JSON_INSTRUCTION = (
    "Reply with a single JSON value and nothing else (no prose, no code fences). "
    "It must validate against this JSON Schema:\n{schema}"
)


class Provider(Protocol):
    """A chat model API. `complete` answers with text or tool calls; `stream` yields text
    pieces and then one delta holding the whole `Completion`. Cost is filled in by the caller
    from the price table; providers report usage."""

    name: str

    async def complete(self, request: ChatRequest) -> Completion: ...

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]: ...

    async def aclose(self) -> None: ...


def parse_arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments as an object; text that is not a JSON object is kept under `_raw`
    so the tool reports the problem back to the model."""
    if isinstance(raw, dict):
        return raw
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {"_raw": str(raw)}
    return value if isinstance(value, dict) else {"_raw": str(raw)}


def json_instruction(schema: dict[str, Any]) -> str:
    return JSON_INSTRUCTION.format(schema=json.dumps(schema, sort_keys=True))
