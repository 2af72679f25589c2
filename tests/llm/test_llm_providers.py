"""The official SDKs against aimock: OpenAI, Anthropic, and Gemini and DeepSeek through their
OpenAI-compatible endpoints."""

from __future__ import annotations

import pytest

from ice_mcp.llm import (
    ChatRequest,
    LLMError,
    LLMService,
    Message,
    ToolSpec,
)

WEATHER = ToolSpec(
    "get_weather",
    "Current weather of a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


async def _tool_conversation(llm: LLMService, model: str) -> None:
    messages = [Message.user("What is the weather in Paris?")]
    first = await llm.tool_turn(ChatRequest(model=model, messages=list(messages), tools=[WEATHER]))
    assert first.text == ""
    [call] = first.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_weather_1", "get_weather", {"city": "Paris"})
    messages.append(Message("assistant", first.text, tool_calls=first.tool_calls))
    messages.append(Message("tool", '{"temperature_c": 18}', tool_call_id=call.id, name=call.name))
    second = await llm.tool_turn(ChatRequest(model=model, messages=messages, tools=[WEATHER]))
    assert second.tool_calls == []
    assert second.text == "It is 18 C in Paris."
    return None


async def test_openai_two_turn_tool_call_with_usage_and_cost(llm: LLMService) -> None:
    messages = [Message.user("What is the weather in Paris?")]
    first = await llm.tool_turn(ChatRequest(model="gpt-4o-mini", messages=list(messages), tools=[WEATHER]))
    assert first.provider == "openai"
    assert first.finish_reason == "tool_calls"
    assert (first.usage.input_tokens, first.usage.output_tokens) == (1000, 500)
    # gpt-4o-mini: $0.15 in, $0.60 out per million tokens.
    assert first.cost_usd == pytest.approx((1000 * 0.15 + 500 * 0.60) / 1e6)
    await _tool_conversation(llm, "gpt-4o-mini")


async def test_anthropic_tool_use_then_tool_result(llm: LLMService, aimock) -> None:
    await _tool_conversation(llm, "claude-haiku-4-5")
    # aimock journals the request normalised to chat form: the tool_result became a tool message.
    sent = [e for e in aimock.journal() if e["path"] == "/v1/messages"][-1]["body"]
    assert sent["messages"][-1]["role"] == "tool"
    assert sent["messages"][-1]["tool_call_id"] == "call_weather_1"
    assert sent["messages"][-2]["tool_calls"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize(("model", "provider"), [("gemini-2.0-flash", "gemini"), ("deepseek-chat", "deepseek")])
async def test_openai_compatible_providers(llm: LLMService, aimock, model: str, provider: str) -> None:
    answer = await llm.complete(ChatRequest(model=model, messages=[Message.user("say hello")]))
    assert (answer.text, answer.provider) == ("Hello!", provider)
    price = llm.price(model, provider)
    assert answer.cost_usd == pytest.approx((10 * price.input_per_million + 3 * price.output_per_million) / 1e6)
    assert answer.cost_usd > 0
    await _tool_conversation(llm, model)
    paths = {e["path"] for e in aimock.journal()}
    assert ("/v1beta/openai/chat/completions" if provider == "gemini" else "/chat/completions") in paths


@pytest.mark.parametrize("model", ["gpt-4o-mini", "claude-haiku-4-5", "gemini-2.0-flash"])
async def test_streamed_completion(llm: LLMService, model: str) -> None:
    pieces: list[str] = []
    final = None
    async for delta in llm.stream(ChatRequest(model=model, messages=[Message.user("stream a greeting")])):
        if delta.completion is not None:
            final = delta.completion
        pieces.append(delta.text)
    assert final is not None
    assert "".join(pieces) == final.text == "Hello from the stream, friend."
    assert len([p for p in pieces if p]) > 1  # it really came in pieces
    assert (final.usage.input_tokens, final.usage.output_tokens) == (12, 7)
    assert final.cost_usd > 0


async def test_429_is_retried_after_retry_after_then_5xx_with_backoff(llm: LLMService, sleeps) -> None:
    answer = await llm.complete(ChatRequest(model="gpt-4o-mini", messages=[Message.user("flaky request")]))
    assert answer.text == "recovered"
    assert sleeps[0] == 2.0  # the server's Retry-After
    assert len(sleeps) == 2 and sleeps[1] < 0.01  # then our own (tiny, in tests) backoff after the 503


async def test_rate_limit_that_persists_gives_a_clear_error(llm: LLMService, sleeps) -> None:
    with pytest.raises(LLMError) as caught:
        await llm.complete(ChatRequest(model="gpt-4o-mini", messages=[Message.user("always limited")]))
    assert caught.value.code == "llm_rate_limited"
    assert caught.value.status == 429
    assert "gave up after 4 attempts" in caught.value.message
    assert sleeps == [1.0, 1.0, 1.0]


async def test_client_errors_are_not_retried(llm: LLMService, sleeps) -> None:
    with pytest.raises(LLMError) as caught:
        await llm.complete(ChatRequest(model="claude-haiku-4-5", messages=[Message.user("bad request please")]))
    assert caught.value.code == "llm_bad_request"
    assert "model is not supported" in caught.value.message
    assert sleeps == []


async def test_unreachable_provider_is_a_connection_error(sleeps) -> None:
    from ice_mcp.llm import LLMConfig

    service = LLMService(LLMConfig.load(env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}),
                         sleep=sleeps, base_delay=0.001)
    try:
        with pytest.raises(LLMError) as caught:
            await service.complete(ChatRequest(model="gpt-4o-mini", messages=[Message.user("hi")]))
    finally:
        await service.aclose()
    assert caught.value.code == "llm_connection_error"
    assert len(sleeps) == 3
