"""The one small interface every provider implements."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Protocol, TypedDict

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


class SDKClientOptions(TypedDict):
    """The keyword arguments the official SDKs' async clients (OpenAI, Anthropic) get."""

    api_key: str
    base_url: str | None
    max_retries: int
    timeout: float


def sdk_client_options(api_key: str | None, base_url: str | None, timeout_seconds: float) -> SDKClientOptions:
    """Retries are ours (RetryPolicy), so the SDK's own are off; a keyless endpoint (a local server)
    still gets a placeholder key."""
    return {"api_key": api_key or "unused", "base_url": base_url, "max_retries": 0, "timeout": timeout_seconds}


def json_instruction(schema: dict[str, Any]) -> str:
    return JSON_INSTRUCTION.format(schema=json.dumps(schema, sort_keys=True))
