"""Provider resolution, config file, prices and budget scopes (no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ice_mcp.core.context import Spend
from ice_mcp.errors import RunStopped
from ice_mcp.llm import (
    BudgetExceeded,
    ChatRequest,
    LLMConfig,
    LLMService,
    Message,
)
from ice_mcp.llm.errors import parse_retry_after
from ice_mcp.llm.pricing import default_prices
from ice_mcp.llm.structured import InvalidOutput, parse_json
from ice_mcp.types import Usage

KEYS = {"OPENAI_API_KEY": "o", "ANTHROPIC_API_KEY": "a", "GEMINI_API_KEY": "g", "DEEPSEEK_API_KEY": "d"}


@pytest.mark.parametrize(("model", "provider"), [
    ("gpt-4o-mini", "openai"), ("gpt-4o-mini-2024-07-18", "openai"), ("o3-mini", "openai"),
    ("claude-sonnet-4-5-20250929", "anthropic"), ("gemini-2.5-flash", "gemini"),
    ("deepseek-reasoner", "deepseek"), ("smollm2", "local"),
])
def test_provider_is_inferred_from_the_model_name(model: str, provider: str) -> None:
    resolution = LLMConfig.load(env=KEYS).resolve(model)
    assert (resolution.ok, resolution.provider) == (True, provider)


def test_explicit_provider_and_base_url_only_endpoints() -> None:
    config = LLMConfig.load(env={"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"})  # e.g. Ollama, no key
    resolution = config.resolve("llama3.2", provider="openai")
    assert resolution.ok and resolution.provider == "openai"
    assert config.prices.price("llama3.2", "openai").model == "openai/*"  # unlisted: the conservative default


def test_missing_key_is_explained() -> None:
    resolution = LLMConfig.load(env={}).resolve("claude-haiku-4-5")
    assert not resolution.ok
    assert resolution.problem is not None and "ANTHROPIC_API_KEY" in resolution.problem


def test_config_file_with_environment_overrides(tmp_path: Path) -> None:
    path = tmp_path / "llm.yaml"
    path.write_text(
        "default_model: my-llama\n"
        "providers:\n  openai: {api_key: from-file, base_url: 'http://127.0.0.1:8000/v1', max_concurrency: 2}\n"
        "models:\n  my-llama: {provider: openai, input: 0.1, output: 0.2}\n"
        "agents:\n  helper: {model: my-llama, tools: []}\n"
    )
    config = LLMConfig.load(env={"OPENAI_API_KEY": "from-env"}, path=path)
    settings = config.provider("openai")
    assert (settings.api_key, settings.base_url, settings.max_concurrency) == (
        "from-env", "http://127.0.0.1:8000/v1", 2)
    assert config.resolve("default").provider == "openai"
    assert config.prices.price("my-llama", "openai").input_per_million == 0.1
    assert "helper" in config.agents


def test_prices_file_has_dates_and_prefix_lookup() -> None:
    prices = default_prices()
    assert prices.lookup("gpt-4o-mini-2024-07-18") == prices.lookup("gpt-4o-mini")
    dated = prices.lookup("gpt-4o-2024-08-06")
    assert dated is not None and dated.model == "gpt-4o"
    assert all(p is not None and p.as_of for p in map(prices.lookup, prices.models()))
    unknown = prices.price("claude-future-9", "anthropic")
    assert unknown.model == "anthropic/*" and unknown.output_per_million >= 15


def test_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({}) is None


def test_json_is_read_from_fences_and_prose() -> None:
    assert parse_json('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json('Here it is: {"a": [1, 2]} hope that helps') == {"a": [1, 2]}
    with pytest.raises(InvalidOutput, match="not valid JSON"):
        parse_json("no json here")


async def test_a_call_that_does_not_fit_the_spend_chain_is_refused_before_connecting() -> None:
    service = LLMService(LLMConfig.load(env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}))
    caller = Spend(budget_usd=10.0)
    network = Spend(budget_usd=0.0001, parent=caller)
    run = Spend(parent=network)
    request = ChatRequest(model="gpt-4o", messages=[Message.user("hi")], max_tokens=4000)
    try:
        with pytest.raises(BudgetExceeded) as caught:
            await service.complete(request, budget_left=run.remaining())  # refused before any connection
    finally:
        await service.aclose()
    assert caught.value.code == "over_budget"
    assert caught.value.remaining_usd == pytest.approx(0.0001)
    assert caught.value.upper_usd > 0.0001
    assert "does not fit the $0.000100 left" in caught.value.message


async def test_a_spent_caller_budget_refuses_the_next_call() -> None:
    service = LLMService(LLMConfig.load(env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}))
    caller = Spend(budget_usd=0.01)
    with pytest.raises(RunStopped):
        caller.charge(0.012, Usage())
    try:
        with pytest.raises(BudgetExceeded):
            await service.complete(ChatRequest(model="gpt-4o-mini", messages=[Message.user("hi")], max_tokens=1),
                                   budget_left=Spend(parent=caller).remaining())
    finally:
        await service.aclose()
