"""Every node type run end to end, with the outputs the spec gives."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ice_mcp import Orchestrator, Registry, load_blueprint

from .helpers import blueprint, root_error, statuses, tool


@pytest.fixture
def tools(registry: Registry) -> Registry:
    def echo(value: Any = None) -> dict[str, Any]:
        return {"value": value}

    def double(n: int) -> int:
        return n * 2

    def add(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    registry.add_tool(echo)
    registry.add_tool(double)
    registry.add_tool(add)
    return registry


async def test_tool_node_output_is_the_returned_object(orc: Orchestrator, tools: Registry) -> None:
    record = await orc.run(blueprint(tool("s", "add", {"a": 2, "b": "{{ inputs.b }}"})), {"b": 5})
    assert record.status == "succeeded"
    assert record.nodes["s"].output == {"sum": 7}
    assert record.outputs == {"s": {"sum": 7}}


async def test_tool_node_non_object_is_wrapped_as_result(orc: Orchestrator, tools: Registry) -> None:
    record = await orc.run(blueprint(tool("d", "double", {"n": 21})))
    assert record.nodes["d"].output == {"result": 42}


async def test_condition_true_and_false_paths(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint(
        {"id": "big", "type": "condition", "expression": "inputs.n > 10", "true_path": ["yes"], "false_path": ["no"]},
        tool("yes", "echo", {"value": "big"}),
        tool("no", "echo", {"value": "small"}),
    )
    big = await orc.run(bp, {"n": 11})
    assert big.nodes["big"].output == {"result": True}
    assert statuses(big) == {"big": "succeeded", "yes": "succeeded", "no": "skipped"}
    assert big.outputs == {"yes": {"value": "big"}, "no": None}
    small = await orc.run(bp, {"n": 3})
    assert small.nodes["big"].output == {"result": False}
    assert statuses(small) == {"big": "succeeded", "yes": "skipped", "no": "succeeded"}


async def test_loop_results_and_count(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint({
        "id": "each", "type": "loop", "items": "{{ inputs.xs }}", "item_var": "x",
        "body": [tool("d", "double", {"n": "{{ x }}"}), tool("tag", "echo", {"value": "{{ index }}:{{ d.result }}"})],
    })
    record = await orc.run(bp, {"xs": [1, 2, 3]})
    assert record.status == "succeeded"
    assert record.nodes["each"].output == {
        "results": [{"value": "0:2"}, {"value": "1:4"}, {"value": "2:6"}], "count": 3}


async def test_loop_items_source_output_and_max_iterations(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint({
        "id": "each", "type": "loop", "items_source": "{{ [5, 6, 7, 8] }}", "max_iterations": 2,
        "body": [tool("d", "double", {"n": "{{ item }}"})], "output": "{{ d.result + index }}",
    })
    record = await orc.run(bp)
    assert record.nodes["each"].output == {"results": [10, 13], "count": 2, "truncated": True}


async def test_loop_over_non_list_fails_clearly(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint({"id": "each", "type": "loop", "items": "{{ 5 }}", "body": [tool("e", "echo")]})
    record = await orc.run(bp)
    assert record.status == "failed"
    assert root_error(record.error) == {"code": "invalid_items", "message": "loop items must be a list, got int"}


async def test_loop_concurrency_keeps_item_order(orc: Orchestrator, registry: Registry) -> None:
    n = 5
    gates = [asyncio.Event() for _ in range(n)]
    finished: list[int] = []

    async def step(i: int) -> dict[str, int]:
        if i + 1 < n:
            await gates[i + 1].wait()  # item i finishes only after item i+1: reverse order
        finished.append(i)
        gates[i].set()
        return {"i": i}

    registry.add_tool(step)
    bp = blueprint({"id": "each", "type": "loop", "items": list(range(n)), "concurrency": n,
                    "body": [tool("s", "step", {"i": "{{ item }}"})]})
    record = await asyncio.wait_for(orc.run(bp), 5)
    assert finished == [4, 3, 2, 1, 0]
    assert record.nodes["each"].output == {"results": [{"i": i} for i in range(n)], "count": n}


async def test_parallel_wait_all_gives_every_branch(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint({"id": "fan", "type": "parallel", "branches": [
        [tool("a", "double", {"n": 1})],
        [tool("b", "double", {"n": 2}), tool("c", "add", {"a": "{{ b.result }}", "b": 1})],
        [tool("x", "echo", {"value": 1}), tool("y", "echo", {"value": 2})],
    ]})
    record = await orc.run(bp)
    assert record.nodes["fan"].output == {"branches": [
        {"result": 2}, {"sum": 5}, {"x": {"value": 1}, "y": {"value": 2}}]}


async def test_parallel_wait_any_fast_branch_wins_slow_is_cancelled(orc: Orchestrator, registry: Registry) -> None:
    seen: list[str] = []
    slow_started = asyncio.Event()

    async def slow() -> dict[str, str]:
        slow_started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("slow cancelled")
            raise
        return {"who": "slow"}

    async def fast() -> dict[str, str]:
        await slow_started.wait()
        return {"who": "fast"}

    registry.add_tool(slow)
    registry.add_tool(fast)
    bp = blueprint({"id": "race", "type": "parallel", "wait": "any",
                    "branches": [[tool("s", "slow")], [tool("f", "fast")]]})
    record = await asyncio.wait_for(orc.run(bp), 5)
    assert record.status == "succeeded"
    assert record.nodes["race"].output == {"winner": 1, "output": {"who": "fast"}}
    assert seen == ["slow cancelled"]


async def test_parallel_wait_any_all_branches_failing(orc: Orchestrator, registry: Registry) -> None:
    def boom(tag: str) -> None:
        raise RuntimeError(tag)

    registry.add_tool(boom)
    bp = blueprint({"id": "race", "type": "parallel", "wait": "any",
                    "branches": [[tool("a", "boom", {"tag": "one"})], [tool("b", "boom", {"tag": "two"})]]})
    record = await orc.run(bp)
    assert record.status == "failed"
    assert root_error(record.error)["code"] == "all_branches_failed"


async def test_recursive_converges(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint({
        "id": "grow", "type": "recursive", "max_iterations": 10,
        "convergence_condition": "previous.value >= 3",
        "body": [tool("step", "echo", {"value": "{{ (previous.value if previous else 0) + 1 }}"}),
                 tool("seen", "echo", {"value": "{{ iteration }}"}, dependencies=["step"])],
        "output": "{{ {'value': step.value, 'iteration': seen.value} }}",
    })
    record = await orc.run(bp)
    assert record.status == "succeeded"
    assert record.nodes["grow"].output == {"converged": True, "iterations": 3,
                                           "output": {"value": 3, "iteration": 3}, "reason": "condition_met"}


async def test_recursive_hits_max_iterations(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint({
        "id": "grow", "type": "recursive", "max_iterations": 4, "convergence_condition": "previous.value > 100",
        "body": [tool("step", "echo", {"value": "{{ (previous.value if previous else 0) + 1 }}"})],
    })
    record = await orc.run(bp)
    assert record.nodes["grow"].output == {"converged": False, "iterations": 4, "output": {"value": 4},
                                           "reason": "max_iterations_reached"}


async def test_workflow_node_returns_sub_workflow_outputs(orc: Orchestrator, tools: Registry) -> None:
    orc.register_blueprint(blueprint(tool("s", "add", {"a": "{{ inputs.a }}", "b": 10}), name="adder",
                                     inputs={"type": "object", "properties": {"a": {"type": "integer"}},
                                             "required": ["a"]},
                                     outputs={"total": "{{ s.sum }}"}))
    bp = blueprint({"id": "sub", "type": "workflow", "workflow_ref": "adder", "inputs": {"a": "{{ inputs.a }}"}},
                   tool("after", "echo", {"value": "{{ sub.total }}"}))
    record = await orc.run(bp, {"a": 5})
    assert record.status == "succeeded"
    assert record.nodes["sub"].output == {"total": 15}
    assert record.nodes["after"].output == {"value": 15}


async def test_workflow_node_invalid_inputs_fail_the_node(orc: Orchestrator, tools: Registry) -> None:
    orc.register_blueprint(blueprint(tool("s", "echo"), name="needs_a",
                                     inputs={"type": "object", "properties": {"a": {"type": "integer"}},
                                             "required": ["a"]}))
    record = await orc.run(blueprint({"id": "sub", "type": "workflow", "workflow_ref": "needs_a"}))
    assert record.status == "failed"
    assert root_error(record.error)["code"] == "invalid_inputs"


async def test_self_calling_workflow_stops_at_max_depth(registry: Registry, settings: Any) -> None:
    settings.max_workflow_depth = 3
    orc = Orchestrator(registry=registry, settings=settings)
    try:
        # Registered without compiling, so it may name itself.
        registry.add_workflow(load_blueprint(blueprint(
            {"id": "again", "type": "workflow", "workflow_ref": "selfy"}, name="selfy")))
        record = await orc.run("selfy")
    finally:
        await orc.aclose()
    assert record.status == "failed"
    assert record.error["code"] == "node_failed"
    assert root_error(record.error) == {"code": "max_depth",
                                        "message": "workflow nesting deeper than 3 levels (calling 'selfy')"}
    # The message names the whole path once (top level + 3 nested levels) and the root cause.
    assert record.error["details"]["path"] == ["again"] * 4
    assert record.error["details"]["cause"] == root_error(record.error)
    assert record.error["message"] == ("node 'again > again > again > again' failed: "
                                       "workflow nesting deeper than 3 levels (calling 'selfy')")


def test_unregistered_node_type_is_reported_unavailable(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint({"id": "each", "type": "loop", "items": [1], "body": [tool("e", "echo")]})
    assert orc.validate(bp).ok
    without_loops = Orchestrator(registry=tools, settings=orc.settings, store=orc.store,
                                 node_types=[t for t in orc.node_types.values() if t.name != "loop"])
    report = without_loops.validate(bp)
    assert [(e.code, e.node_id, e.field) for e in report.errors] == [("unavailable_node_type", "each", "type")]
    assert "'loop'" in report.errors[0].message
