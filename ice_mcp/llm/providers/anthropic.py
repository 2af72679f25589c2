"""Anthropic Messages through the official SDK: `tool_use` / `tool_result`; structured output
through a forced tool whose input schema is the wanted JSON Schema."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic

from ice_mcp.llm.errors import LLMError, status_error
from ice_mcp.llm.providers.base import sdk_client_options
from ice_mcp.llm.types import ChatRequest, Completion, Message, StreamDelta, ToolCall
from ice_mcp.types import Usage

JSON_TOOL = "json_output"


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, *, api_key: str | None, base_url: str | None, timeout_seconds: float = 60.0) -> None:
        self.client = anthropic.AsyncAnthropic(**sdk_client_options(api_key, base_url, timeout_seconds))

    async def aclose(self) -> None:
        await self.client.close()

    def _params(self, request: ChatRequest) -> tuple[dict[str, Any], bool]:
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": _messages(request.messages),
        }
        if request.system:
            params["system"] = request.system
        if request.temperature is not None:
            params["temperature"] = min(request.temperature, 1.0)
        tools = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in request.tools]
        wrapped = False
        if request.json_schema is not None:
            schema = request.json_schema
            if schema.get("type") != "object":
                schema, wrapped = {"type": "object", "properties": {"value": schema}, "required": ["value"]}, True
            tools.append({"name": JSON_TOOL, "description": "Give the answer as JSON.", "input_schema": schema})
            params["tool_choice"] = {"type": "tool", "name": JSON_TOOL}
        if tools:
            params["tools"] = tools
        return params, wrapped

    async def complete(self, request: ChatRequest) -> Completion:
        params, wrapped = self._params(request)
        try:
            message = await self.client.messages.create(**params)
        except anthropic.APIError as exc:
            raise self._error(exc) from exc
        return _completion(message, request, wrapped)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        params, wrapped = self._params(request)
        try:
            async with self.client.messages.stream(**params) as stream:
                async for text in stream.text_stream:
                    if text:
                        yield StreamDelta(text=text)
                message = await stream.get_final_message()
        except anthropic.APIError as exc:
            raise self._error(exc) from exc
        yield StreamDelta(completion=_completion(message, request, wrapped))

    def _error(self, exc: anthropic.APIError) -> LLMError:
        if isinstance(exc, anthropic.APIStatusError):
            body = exc.body
            message = exc.message
            if isinstance(body, dict) and isinstance(body.get("error"), dict):
                message = str(body["error"].get("message") or message)
            return status_error(self.name, exc.status_code, message, dict(exc.response.headers))
        if isinstance(exc, anthropic.APITimeoutError):
            return LLMError("anthropic timed out", code="llm_timeout", retryable=True, provider=self.name)
        if isinstance(exc, anthropic.APIConnectionError):
            return LLMError(
                f"cannot reach anthropic at {self.client.base_url}: {exc}",
                code="llm_connection_error", retryable=True, provider=self.name,
            )
        return LLMError(f"anthropic: {exc}", code="llm_error", provider=self.name)


def _completion(message: Any, request: ChatRequest, wrapped: bool) -> Completion:
    texts: list[str] = []
    calls: list[ToolCall] = []
    json_value: Any = None
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            arguments = block.input if isinstance(block.input, dict) else {"_raw": str(block.input)}
            if request.json_schema is not None and block.name == JSON_TOOL:
                json_value = arguments.get("value") if wrapped else arguments
            else:
                calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments))
    text = "".join(texts)
    if request.json_schema is not None and json_value is not None:
        text = json.dumps(json_value)
    usage = message.usage
    return Completion(
        text=text,
        model=message.model or request.model,
        provider="anthropic",
        tool_calls=calls,
        usage=Usage(usage.input_tokens or 0, usage.output_tokens or 0) if usage else Usage(),
        finish_reason=message.stop_reason,
        json_value=json_value,
    )


def _messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Anthropic's shape: tool results travel as `tool_result` blocks of one user message."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content,
                "is_error": message.is_error,
            }
            last = out[-1] if out else None
            if last and last["role"] == "user" and isinstance(last["content"], list) and all(
                b.get("type") == "tool_result" for b in last["content"]
            ):
                last["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif message.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks.extend(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in message.tool_calls
            )
            out.append({"role": "assistant", "content": blocks or message.content})
        else:
            out.append({"role": "user", "content": message.content})
    return out
