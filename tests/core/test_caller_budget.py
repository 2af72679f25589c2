"""Budgets above the run: per caller (set by the MCP layer) and per network, before and during runs."""

from __future__ import annotations

from typing import Any

import pytest

from ice_mcp import IceError, Orchestrator, Registry, Settings

from .helpers import blueprint, tool
from .test_budget import STAND_IN_LLM, llm, llm_node  # noqa: F401  (the stand-in llm node type fixture)


@pytest.fixture
def budgeted(registry: Registry, settings: Settings) -> Orchestrator:
    settings.caller_budget_usd = 1.0
    orc = Orchestrator(registry=registry, settings=settings)
    orc.node_types["llm"] = STAND_IN_LLM

    def paid(cost: float) -> Any:
        from ice_mcp import NodeResult

        return NodeResult({"paid": cost}, cost_usd=cost)

    registry.add_tool(paid)
    return orc


def paid_run(cost: float) -> dict[str, Any]:
    return blueprint(tool("p", "paid", {"cost": cost}))


async def test_a_callers_spend_across_runs_is_capped(budgeted: Orchestrator) -> None:
    first = await budgeted.run(paid_run(0.6), caller="alice")
    second = await budgeted.run(paid_run(0.6), caller="alice")
    assert first.status == "succeeded"
    assert second.status == "over_budget" and second.cost_usd == pytest.approx(0.6)
    assert budgeted.caller_spend("alice").cost_usd == pytest.approx(1.2)  # type: ignore[union-attr]
    # Another caller has a budget of its own; runs with no caller have none.
    assert (await budgeted.run(paid_run(0.6), caller="bob")).status == "succeeded"
    assert (await budgeted.run(paid_run(5.0))).status == "succeeded"
    await budgeted.aclose()


async def test_a_run_whose_estimate_does_not_fit_the_callers_budget_is_refused(budgeted: Orchestrator) -> None:
    assert (await budgeted.run(paid_run(0.9), caller="carol")).status == "succeeded"
    # The stand-in llm node may cost up to $0.20; $0.10 is left: refused before anything runs.
    with pytest.raises(IceError) as refused:
        await budgeted.start(blueprint(llm_node("a", "hi")), caller="carol")
    assert refused.value.code == "over_budget"
    assert refused.value.details["remaining_usd"] == pytest.approx(0.1)
    assert len(budgeted.list_runs()) == 1
    await budgeted.aclose()


async def test_a_network_whose_estimates_exceed_its_budget_is_refused(orc: Orchestrator, llm: None) -> None:  # noqa: F811
    orc.register_blueprint(blueprint(llm_node("a", "hi"), name="asker"))
    manifest = {"api_version": "network.v0", "name": "pricey", "global": {"budget_usd": 0.3},
                "workflows": [{"id": "one", "ref": "asker"}, {"id": "two", "ref": "asker"}]}
    with pytest.raises(IceError) as refused:
        await orc.run_network(manifest)
    assert refused.value.code == "over_budget"
    assert "network 'pricey'" in refused.value.message
    assert orc.list_runs() == []
