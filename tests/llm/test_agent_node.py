"""Agents run by the engine against aimock: registry tools, registered workflows, tool errors
fed back to the model, the iteration cap, events, spend, and memory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ice_mcp import Orchestrator
from ice_mcp.agents import agent, load_agents
from ice_mcp.llm import LLMConfig, LLMService


@pytest.fixture
async def orch(tmp_path: Path, llm: LLMService, make_orchestrator) -> AsyncIterator[Orchestrator]:
    orchestrator = make_orchestrator(tmp_path, llm)
    registry = orchestrator.registry

    def lookup_price(sku: str) -> dict[str, Any]:
        """Price of a product by SKU."""
        return {"sku": sku, "price": 9.5}

    def double(x: int) -> int:
        """Twice x."""
        return 2 * x

    def broken_tool() -> dict[str, Any]:
        """Always fails."""
        raise RuntimeError("disk on fire")

    for function in (lookup_price, double, broken_tool):
        registry.add_tool(function)
    orchestrator.register_blueprint({
        "name": "double_it",
        "description": "Double a number.",
        "inputs": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        "outputs": {"result": "{{ d.result }}"},
        "nodes": [{"id": "d", "type": "tool", "tool_name": "double", "tool_args": {"x": "{{ inputs.x }}"}}],
    })
    yield orchestrator
    await orchestrator.aclose()


def agent_blueprint(task: str, agent_ref: Any) -> dict[str, Any]:
    return {"name": "agentic", "nodes": [{"id": "helper", "type": "agent", "agent": agent_ref, "input": task}]}


@pytest.mark.parametrize("model", ["gpt-4o-mini", "claude-haiku-4-5"])
async def test_agent_calls_a_tool_and_a_workflow_then_answers(orch: Orchestrator, model: str) -> None:
    events: list[dict[str, Any]] = []
    inline = {"model": model, "system": "You price things.", "tools": ["lookup_price"], "workflows": ["double_it"]}
    record = await orch.run(agent_blueprint("price report for A1", inline), on_event=lambda e: events.append(e.to_dict()))
    assert record.status == "succeeded", record.error
    output = record.nodes["helper"].output
    assert output["text"] == "A1 costs 9.5; doubled 21 is 42."
    assert output["iterations"] == 3
    assert output["stopped"] == "answered"
    assert [(c["name"], c["arguments"], c["result"]) for c in output["tool_calls"]] == [
        ("lookup_price", {"sku": "A1"}, {"sku": "A1", "price": 9.5}),
        ("double_it", {"x": 21}, {"result": 42}),
    ]
    assert output["usage"] == {"input_tokens": 900, "output_tokens": 70}
    price = orch.services.llm.price(model, "openai" if "gpt" in model else "anthropic")
    assert output["cost_usd"] == pytest.approx((900 * price.input_per_million + 70 * price.output_per_million) / 1e6)
    assert record.cost_usd == pytest.approx(output["cost_usd"])
    turns = [e["data"] for e in events if e["type"] == "node_event" and e["data"]["event"] == "agent_turn"]
    assert [t["iteration"] for t in turns] == [1, 2, 3]
    assert [c["name"] for c in turns[0]["tool_calls"]] == ["lookup_price"]
    # The workflow ran inside this run: its node shows in the event stream under the agent's label.
    assert any(e["type"] == "node_succeeded" and e.get("node_id", "").endswith("double_it.d") for e in events)


async def test_registered_agents_by_decorator_and_config_block(orch: Orchestrator) -> None:
    @agent(model="gpt-4o-mini", tools=["lookup_price"], workflows=["double_it"], registry=orch.registry)
    def pricer() -> None:
        """You price things and double numbers."""

    load_agents({"pricer2": {"model": "gpt-4o-mini", "tools": ["lookup_price"], "workflows": ["double_it"],
                             "description": "Same, from config."}}, registry=orch.registry)
    assert orch.registry.agent("pricer").config["system"] == "You price things and double numbers."
    for name in ("pricer", "pricer2"):
        record = await orch.run(agent_blueprint("price report for A1", name))
        assert record.status == "succeeded", record.error
        assert record.nodes["helper"].output["text"] == "A1 costs 9.5; doubled 21 is 42."


async def test_agents_from_the_llm_config_file(tmp_path: Path, aimock, sleeps, make_orchestrator) -> None:
    path = tmp_path / "llm.yaml"
    path.write_text("agents:\n  filed:\n    model: gpt-4o-mini\n    tools: [lookup_price]\n    workflows: [double_it]\n")
    service = LLMService(LLMConfig.load(env=aimock.env(), path=path), sleep=sleeps)
    orchestrator = make_orchestrator(tmp_path, service)
    orchestrator.registry.add_tool(lambda sku: {"sku": sku, "price": 9.5}, name="lookup_price")
    orchestrator.registry.add_tool(lambda x: 2 * x, name="double")
    orchestrator.register_blueprint({
        "name": "double_it",
        "inputs": {"type": "object", "properties": {"x": {"type": "integer"}}},
        "outputs": {"result": "{{ d.result }}"},
        "nodes": [{"id": "d", "type": "tool", "tool_name": "double", "tool_args": {"x": "{{ inputs.x }}"}}],
    })
    record = await orchestrator.run(agent_blueprint("price report for A1", "filed"))
    assert record.status == "succeeded", record.error
    assert record.nodes["helper"].output["text"] == "A1 costs 9.5; doubled 21 is 42."
    await orchestrator.aclose()
    await service.aclose()


async def test_a_tool_error_goes_back_to_the_model(orch: Orchestrator) -> None:
    inline = {"model": "gpt-4o-mini", "tools": ["broken_tool"]}
    record = await orch.run(agent_blueprint("use the broken tool", inline))
    assert record.status == "succeeded", record.error
    output = record.nodes["helper"].output
    assert output["text"] == "The tool failed: disk on fire."
    [call] = output["tool_calls"]
    assert call["error"] == {"code": "RuntimeError", "message": "disk on fire"}


async def test_max_iterations_stops_the_loop(orch: Orchestrator) -> None:
    inline = {"model": "gpt-4o-mini", "tools": ["lookup_price"], "max_iterations": 2}
    record = await orch.run(agent_blueprint("loop forever", inline))
    assert record.status == "succeeded", record.error
    output = record.nodes["helper"].output
    assert (output["iterations"], output["stopped"], len(output["tool_calls"])) == (2, "max_iterations", 2)


async def test_agent_validation_names_unknown_tools_workflows_and_agents(orch: Orchestrator) -> None:
    inline = {"model": "gpt-4o-mini", "tools": ["lookup_prise"], "workflows": ["double_that"]}
    report = orch.validate(agent_blueprint("x", inline))
    found = {(e.code, e.suggestion) for e in report.errors}
    assert ("unknown_tool", "lookup_price") in found
    assert ("unknown_workflow", "double_it") in found
    report = orch.validate(agent_blueprint("x", "no_such_agent"))
    assert "unknown_agent" in {e.code for e in report.errors}


async def test_agent_estimate_grows_with_iterations(orch: Orchestrator) -> None:
    small = orch.validate(agent_blueprint("x", {"model": "gpt-4o", "tools": ["lookup_price"], "max_iterations": 1}))
    large = orch.validate(agent_blueprint("x", {"model": "gpt-4o", "tools": ["lookup_price"], "max_iterations": 10}))
    assert (small.estimate.llm_calls_max, large.estimate.llm_calls_max) == (1, 10)
    assert small.estimate.usd_max is not None and large.estimate.usd_max is not None
    assert large.estimate.usd_max > 10 * small.estimate.usd_max


async def test_agent_memory_is_offered_as_tools_read_before_and_written_after(orch: Orchestrator) -> None:
    inline = {"model": "gpt-4o-mini", "memory": {"semantic": True, "episodic": True, "procedural": True}}
    registered = orch.registry.add_agent("crm", inline)
    assert registered.name == "crm"
    first = await orch.run(agent_blueprint("remember this: acme pays late", "crm"))
    assert first.status == "succeeded", first.error
    assert first.nodes["helper"].output["tool_calls"][0]["result"] == {"stored": ["working", "semantic"], "key": "acme"}
    second = await orch.run(agent_blueprint("what about acme?", "crm"))
    assert second.status == "succeeded", second.error
    assert second.nodes["helper"].output["text"] == "Acme pays late (from memory)."
    store = orch.services.memory()
    assert await store.semantic.get("crm", "acme") == ["pays late"]
    episodes = await store.episodic.search(key="crm")
    assert [e.outcome for e in episodes] == ["answered", "answered"]
    assert episodes[0].content["input"] == "what about acme?"
    assert "remember" in episodes[1].tags
    best = await store.procedural.best("crm")
    assert best is not None and best.attempts == 1
