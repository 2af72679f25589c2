"""`llm` nodes run by the engine against aimock: text, structured output with repair,
validation of models, and budgets before and during a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ice_mcp import BlueprintInvalid, Orchestrator
from ice_mcp.llm import LLMConfig, LLMService

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


def llm_blueprint(prompt: str, **node: Any) -> dict[str, Any]:
    return {
        "name": "ask",
        "inputs": {"type": "object", "properties": {"q": {"type": "string"}}},
        "nodes": [{"id": "ask", "type": "llm", "model": "gpt-4o-mini", "prompt": prompt, **node}],
    }


async def test_llm_node_renders_its_prompt_and_reports_usage_and_cost(orch: Orchestrator) -> None:
    record = await orch.run(llm_blueprint("Please {{ inputs.q }}", system="Be brief."), {"q": "say hello"})
    assert record.status == "succeeded", record.error
    output = record.nodes["ask"].output
    assert output["text"] == "Hello!"
    assert output["usage"] == {"input_tokens": 10, "output_tokens": 3}
    assert output["model"] == "gpt-4o-mini"
    assert output["cost_usd"] == pytest.approx((10 * 0.15 + 3 * 0.60) / 1e6)
    assert record.cost_usd == pytest.approx(output["cost_usd"])


async def test_output_schema_gives_validated_json(orch: Orchestrator, aimock) -> None:
    record = await orch.run(llm_blueprint("extract the person from: Ada, 36", output_schema=PERSON))
    assert record.status == "succeeded", record.error
    assert record.nodes["ask"].output["json"] == {"name": "Ada", "age": 36}
    sent = [e for e in aimock.journal() if "extract the person" in str(e.get("body"))][-1]["body"]
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["response_format"]["json_schema"]["schema"] == PERSON


async def test_invalid_json_is_repaired_once(orch: Orchestrator) -> None:
    events: list[dict[str, Any]] = []
    record = await orch.run(llm_blueprint("extract sloppily: Ada, 36", output_schema=PERSON),
                            on_event=lambda e: events.append(e.to_dict()))
    assert record.status == "succeeded", record.error
    output = record.nodes["ask"].output
    assert output["json"] == {"name": "Ada", "age": 36}
    assert output["usage"]["input_tokens"] > 0
    assert any(e["type"] == "node_event" and e["data"]["event"] == "llm_repairing" for e in events)


async def test_json_that_stays_invalid_fails_clearly(orch: Orchestrator) -> None:
    record = await orch.run(llm_blueprint("extract hopelessly", output_schema=PERSON))
    assert record.status == "failed"
    error = record.nodes["ask"].error
    assert error is not None and error["code"] == "invalid_output"
    assert "even after one repair attempt" in error["message"]
    assert "name: 5 is not of type 'string'" in error["message"]
    assert "age" in error["message"]


async def test_anthropic_structured_output_through_a_forced_tool(orch: Orchestrator, aimock) -> None:
    record = await orch.run(llm_blueprint("anthropic extract: Ada, 36", output_schema=PERSON,
                                          model="claude-haiku-4-5"))
    assert record.status == "succeeded", record.error
    assert record.nodes["ask"].output["json"] == {"name": "Ada", "age": 36}
    sent = [e for e in aimock.journal() if e["path"] == "/v1/messages"][-1]["body"]
    assert [t["function"]["name"] if "function" in t else t["name"] for t in sent["tools"]] == ["json_output"]


async def test_a_model_without_a_configured_provider_is_a_validation_error(tmp_path: Path, make_orchestrator) -> None:
    service = LLMService(LLMConfig.load(env={"ICE_MCP_LOCAL_MODEL_PATH": str(tmp_path / "none.gguf")}))
    orchestrator = make_orchestrator(tmp_path, service)
    report = orchestrator.validate(llm_blueprint("hi"))
    assert not report.ok
    [issue] = [e for e in report.errors if e.code == "unknown_model"]
    assert issue.node_id == "ask" and issue.field == "model"
    assert "OPENAI_API_KEY" in issue.message
    report = orchestrator.validate(llm_blueprint("hi", model="mystery-model-9"))
    assert any(e.code == "unknown_model" and "no provider serves it" in e.message for e in report.errors)
    await orchestrator.aclose()


async def test_unknown_model_name_suggests_the_nearest_listed_one(orch: Orchestrator) -> None:
    report = orch.validate(llm_blueprint("hi", model="gpt-4o-mni", provider=None))
    # "gpt-4o-mni" starts with "gpt-" so it is served by openai (prices: the provider's default);
    # a made-up family is refused with the nearest listed model as the suggestion.
    assert report.ok
    report = orch.validate(llm_blueprint("hi", model="claud-sonet-4"))
    [issue] = [e for e in report.errors if e.code == "unknown_model"]
    assert issue.suggestion == "claude-sonnet-4"


async def test_estimate_over_budget_is_refused_before_running(orch: Orchestrator, aimock) -> None:
    blueprint = llm_blueprint("say hello", model="gpt-4o", max_tokens=4000)
    blueprint["budget_usd"] = 0.001
    report = orch.validate(blueprint)
    assert report.estimate.usd_max is not None and report.estimate.usd_max > 0.001
    assert [e.code for e in report.errors] == ["over_budget"]
    before = len(aimock.journal())
    with pytest.raises(BlueprintInvalid):
        await orch.run(blueprint)
    assert len(aimock.journal()) == before  # nothing was sent


async def test_budget_reached_mid_run_ends_over_budget_with_spend_recorded(orch: Orchestrator) -> None:
    node = {"type": "llm", "model": "gpt-4o-mini", "prompt": "expensive words", "max_tokens": 10}
    blueprint = {
        "name": "spender",
        "budget_usd": 0.1,
        "nodes": [
            {"id": "first", **node},
            {"id": "second", **node, "dependencies": ["first"]},
            {"id": "third", **node, "dependencies": ["second"]},
        ],
    }
    assert orch.validate(blueprint).ok  # the estimate (10 tokens out each) fits
    record = await orch.run(blueprint)
    assert record.status == "over_budget"
    per_call = (100_000 * 0.15 + 100_000 * 0.60) / 1e6
    assert record.cost_usd == pytest.approx(2 * per_call)
    assert record.nodes["first"].status == "succeeded"
    assert "third" not in record.nodes or record.nodes["third"].status != "succeeded"
