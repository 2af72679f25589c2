"""Budgets: the estimate checked before running, and actual spend stopping the run.

A stand-in `llm` node type with a known estimate replaces the real one on the test's
orchestrator, so the engine's budget logic is tested on its own.
"""

from __future__ import annotations

from typing import Any

import pytest

from ice_mcp import NodeCall, NodeResult, NodeType, Orchestrator, Registry, Usage
from ice_mcp.blueprint.issues import CostEstimate

from .helpers import blueprint, tool


async def fake_llm(call: NodeCall) -> NodeResult:
    prompt = call.render("prompt")
    return NodeResult({"text": str(prompt).upper()}, cost_usd=0.1, usage=Usage(input_tokens=10, output_tokens=2))


def fake_estimate(spec: Any, ctx: Any, sub: CostEstimate) -> CostEstimate:
    return CostEstimate(llm_calls_min=1, llm_calls_max=1, usd_min=0.05, usd_max=0.2)


STAND_IN_LLM = NodeType(name="llm", execute=fake_llm, estimate=fake_estimate)


@pytest.fixture
def llm(orc: Orchestrator) -> None:
    orc.node_types["llm"] = STAND_IN_LLM  # this orchestrator's own table: nothing to restore


def llm_node(node_id: str, prompt: str, **fields: Any) -> dict[str, Any]:
    return {"id": node_id, "type": "llm", "model": "stand-in", "prompt": prompt, **fields}


def loop_of_llm(**fields: Any) -> dict[str, Any]:
    return {"id": "each", "type": "loop", "items": "{{ inputs.xs }}", "body": [llm_node("ask", "{{ item }}")],
            **fields}


XS = {"type": "object", "properties": {"xs": {"type": "array"}}}


def test_estimate_sums_nodes_and_multiplies_loops(orc: Orchestrator, llm: None) -> None:
    report = orc.validate(blueprint(llm_node("a", "x"), llm_node("b", "y"), loop_of_llm(max_iterations=3),
                                    inputs=XS))
    assert report.ok
    assert report.estimate.llm_calls_min == 2
    assert report.estimate.llm_calls_max == 5
    assert report.estimate.usd_min == pytest.approx(0.1)
    assert report.estimate.usd_max == pytest.approx(1.0)


def test_estimate_over_budget_is_refused_before_running(orc: Orchestrator, llm: None) -> None:
    report = orc.validate(blueprint(loop_of_llm(max_iterations=3), inputs=XS, budget_usd=0.5))
    [issue] = report.errors
    assert (issue.code, issue.field) == ("over_budget", "budget_usd")
    assert issue.message == "estimated cost up to $0.6000 exceeds budget_usd=0.5"
    assert orc.validate(blueprint(loop_of_llm(max_iterations=2), inputs=XS, budget_usd=0.5)).ok


def test_unbounded_loop_of_llm_calls_cannot_fit_a_budget(orc: Orchestrator, llm: None) -> None:
    report = orc.validate(blueprint(loop_of_llm(), inputs=XS, budget_usd=100))
    [issue] = report.errors
    assert issue.code == "over_budget"
    assert "no upper bound" in issue.message
    assert report.estimate.llm_calls_max is None and report.estimate.usd_max is None
    assert orc.validate(blueprint(loop_of_llm(), inputs=XS)).ok  # without a budget it is fine


def test_branches_widen_the_estimate(orc: Orchestrator, llm: None) -> None:
    report = orc.validate(blueprint(
        {"id": "c", "type": "condition", "expression": "true", "true_path": ["a"]}, llm_node("a", "x")))
    assert (report.estimate.llm_calls_min, report.estimate.llm_calls_max) == (0, 1)
    assert report.estimate.usd_min == 0.0


async def test_actual_spend_stops_the_run(orc: Orchestrator, llm: None) -> None:
    bp = blueprint(loop_of_llm(max_iterations=5), inputs=XS, budget_usd=1.0)
    assert orc.validate(bp).ok
    record = await orc.run(bp, {"xs": ["a", "b", "c", "d", "e"]})
    assert record.status == "succeeded"
    assert record.cost_usd == pytest.approx(0.5)
    assert record.usage.as_dict() == {"input_tokens": 50, "output_tokens": 10}
    assert record.nodes["each"].output == {"results": [{"text": t} for t in "ABCDE"], "count": 5}
    assert record.nodes["each"].cost_usd == pytest.approx(0.5)

    tight = blueprint(llm_node("a", "x"), llm_node("b", "{{ a.text }}"), llm_node("c", "{{ b.text }}"),
                      budget_usd=0.61)
    record = await orc.run(tight)
    assert record.status == "succeeded"  # actual 0.3 fits
    assert record.nodes["c"].output == {"text": "X"}


def test_estimate_equal_to_the_budget_is_allowed(orc: Orchestrator, llm: None) -> None:
    # regression: 3 x $0.2 = 0.6000000000000001 was refused against budget_usd=0.6
    bp = blueprint(llm_node("a", "x"), llm_node("b", "y"), llm_node("c", "z"), budget_usd=0.6)
    assert orc.validate(bp).ok


async def test_spend_reaching_the_budget_ends_over_budget(orc: Orchestrator, llm: None, registry: Registry) -> None:
    registry.add_tool(lambda: {"ok": True}, name="noop")
    bp = blueprint(llm_node("a", "x"), llm_node("b", "{{ a.text }}"), tool("after", "noop", dependencies=["b"]),
                   budget_usd=0.4)
    # actual spend 0.2 reaches a budget lowered at run time (estimate said up to 0.4)
    plan = orc.compile(bp)
    plan.blueprint.budget_usd = 0.15
    record = await orc.run(plan)
    assert record.status == "over_budget"
    assert record.cost_usd == pytest.approx(0.2)
    assert record.error == {"code": "over_budget", "message": "spend $0.2000 reached the budget of $0.15"}
    assert record.nodes["after"].status == "cancelled"
