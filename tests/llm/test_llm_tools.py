"""The built-in LLM tools, called by a tool node so their spend is charged to the run."""

from __future__ import annotations

import pytest

from ice_mcp import Orchestrator
from ice_mcp.tools.builtin.llm_tools import register_llm_tools


async def test_summarize_tool_node_is_accounted_like_an_llm_node(orch: Orchestrator) -> None:
    register_llm_tools(orch.registry)
    blueprint = {
        "name": "summary",
        "nodes": [{"id": "s", "type": "tool", "tool_name": "summarize",
                   "tool_args": {"text": "A long story about sales. " * 20, "max_words": 10}}],
    }
    record = await orch.run(blueprint)
    assert record.status == "succeeded", record.error
    output = record.nodes["s"].output
    assert output["summary"] == "A short summary."
    assert output["usage"] == {"input_tokens": 50, "output_tokens": 5}
    assert record.cost_usd == pytest.approx((50 * 0.15 + 5 * 0.60) / 1e6)  # the default model: gpt-4o-mini


async def test_extract_insights_returns_insights_with_their_evidence(orch: Orchestrator) -> None:
    register_llm_tools(orch.registry)
    records = [{"week": 1, "sales": 100}, {"week": 2, "sales": 210}, {"week": 3, "sales": 205}]
    blueprint = {
        "name": "insights",
        "inputs": {"type": "object", "properties": {"rows": {"type": "array"}}},
        "nodes": [{"id": "i", "type": "tool", "tool_name": "extract_insights",
                   "tool_args": {"records": "{{ inputs.rows }}", "question": "sales trend"}}],
    }
    record = await orch.run(blueprint, {"rows": records})
    assert record.status == "succeeded", record.error
    [insight] = record.nodes["i"].output["insights"]
    assert insight["insight"] == "Sales doubled in week 2"
    assert insight["evidence"] == [{"index": 1, "record": records[1]}, {"index": 2, "record": records[2]}]
    assert record.cost_usd > 0
