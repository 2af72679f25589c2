"""OpenAI Chat Completions through the official SDK: OpenAI, and the OpenAI-compatible
endpoints of Gemini, DeepSeek, llama.cpp, Ollama and vLLM."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Literal

import openai

from ice_mcp.llm.errors import LLMError, status_error
from ice_mcp.llm.providers.base import json_instruction, parse_arguments, sdk_client_options
from ice_mcp.llm.types import ChatRequest, Completion, Message, StreamDelta, ToolCall
from ice_mcp.types import Usage

StructuredMode = Literal["json_schema", "json_object"]


class OpenAICompatProvider:
    def __init__(
        self,
        name: str,
        *,
        api_key: str | None,
        base_url: str | None,
        timeout_seconds: float = 60.0,
        structured: StructuredMode = "json_schema",
        max_tokens_field: str = "max_tokens",
    ) -> None:
        self.name = name
        self.structured = structured
        self.max_tokens_field = max_tokens_field
        self.client = openai.AsyncOpenAI(**sdk_client_options(api_key, base_url, timeout_seconds))

    async def aclose(self) -> None:
        await self.client.close()

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        system = request.system
        params: dict[str, Any] = {"model": request.model, self.max_tokens_field: request.max_tokens}
        if request.json_schema is not None:
            if self.structured == "json_schema":
                params["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "output", "schema": request.json_schema},
                }
            else:
                params["response_format"] = {"type": "json_object"}
                note = json_instruction(request.json_schema)
                system = f"{system}\n\n{note}" if system else note
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        messages.extend(_message(m) for m in request.messages)
        params["messages"] = messages
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                }
                for t in request.tools
            ]
        return params

    async def complete(self, request: ChatRequest) -> Completion:
        try:
            response = await self.client.chat.completions.create(**self._params(request))
        except openai.APIError as exc:
            raise self._error(exc) from exc
        if not response.choices:
            raise LLMError(f"{self.name} returned no choices", code="llm_bad_response", provider=self.name)
        choice = response.choices[0]
        calls = [
            ToolCall(id=c.id, name=c.function.name, arguments=parse_arguments(c.function.arguments))
            for c in (choice.message.tool_calls or [])
            if getattr(c, "function", None) is not None
        ]
        usage = response.usage
        return Completion(
            text=choice.message.content or "",
            model=response.model or request.model,
            provider=self.name,
            tool_calls=calls,
            usage=Usage(usage.prompt_tokens, usage.completion_tokens) if usage else Usage(),
            finish_reason=choice.finish_reason,
        )

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        params = self._params(request)
        params["stream"] = True
        params["stream_options"] = {"include_usage": True}
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage = Usage()
        model = request.model
        finish: str | None = None
        try:
            stream = await self.client.chat.completions.create(**params)
            async for chunk in stream:
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
                for choice in chunk.choices:
                    finish = choice.finish_reason or finish
                    delta = choice.delta
                    if delta.content:
                        text.append(delta.content)
                        yield StreamDelta(text=delta.content)
                    for call in delta.tool_calls or []:
                        slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                        slot["id"] = call.id or slot["id"]
                        if call.function is not None:
                            slot["name"] += call.function.name or ""
                            slot["arguments"] += call.function.arguments or ""
        except openai.APIError as exc:
            raise self._error(exc) from exc
        tool_calls = [
            ToolCall(id=c["id"], name=c["name"], arguments=parse_arguments(c["arguments"]))
            for _, c in sorted(calls.items())
        ]
        yield StreamDelta(
            completion=Completion(
                text="".join(text), model=model, provider=self.name, tool_calls=tool_calls,
                usage=usage, finish_reason=finish,
            )
        )

    def _error(self, exc: openai.APIError) -> LLMError:
        if isinstance(exc, openai.APIStatusError):
            return status_error(self.name, exc.status_code, _message_of(exc), dict(exc.response.headers))
        if isinstance(exc, openai.APITimeoutError):
            return LLMError(f"{self.name} timed out", code="llm_timeout", retryable=True, provider=self.name)
        if isinstance(exc, openai.APIConnectionError):
            return LLMError(
                f"cannot reach {self.name} at {self.client.base_url}: {exc}",
                code="llm_connection_error", retryable=True, provider=self.name,
            )
        return LLMError(f"{self.name}: {exc}", code="llm_error", provider=self.name)


def _message_of(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return exc.message


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}
