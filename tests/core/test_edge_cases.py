"""Edge cases of the runner: early cancellation, timeouts during backoff, nested failures."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ice_mcp import Orchestrator, Registry

from .helpers import blueprint, root_error, statuses, tool


@pytest.fixture
def tools(registry: Registry) -> Registry:
    def echo(value: Any = None) -> dict[str, Any]:
        return {"value": value}

    def boom(message: str = "boom") -> None:
        raise RuntimeError(message)

    registry.add_tool(echo)
    registry.add_tool(boom)
    return registry


async def test_cancel_before_the_run_starts(orc: Orchestrator, tools: Registry) -> None:
    handle = await orc.start(blueprint(tool("e", "echo")))
    assert handle.cancel() is True  # the task has not had a step yet
    record = await handle.wait()
    await asyncio.sleep(0)
    assert record.status == "cancelled"
    assert record.error == {"code": "cancelled", "message": "the run was cancelled before it started"}
    assert orc.store.flush()
    assert orc.store.get(record.run_id).status == "cancelled"


async def test_run_timeout_interrupts_a_backoff_sleep(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint(tool("b", "boom", retries=3, backoff_seconds=60), timeout_seconds=0.05)
    record = await asyncio.wait_for(orc.run(bp), 5)
    assert record.status == "timed_out"
    assert record.nodes["b"].status == "cancelled"
    assert record.nodes["b"].attempts == 1


async def test_wait_any_ignores_a_branch_that_fails_first(orc: Orchestrator, tools: Registry) -> None:
    failed = asyncio.Event()

    async def after_failure() -> dict[str, str]:
        await failed.wait()
        return {"who": "survivor"}

    def fail_now() -> None:
        failed.set()
        raise RuntimeError("first but failed")

    tools.add_tool(after_failure)
    tools.add_tool(fail_now)
    bp = blueprint({"id": "race", "type": "parallel", "wait": "any",
                    "branches": [[tool("f", "fail_now")], [tool("s", "after_failure")]]})
    record = await asyncio.wait_for(orc.run(bp), 5)
    assert record.nodes["race"].output == {"winner": 1, "output": {"who": "survivor"}}


async def test_outputs_that_fail_to_render_fail_the_run(orc: Orchestrator, tools: Registry) -> None:
    record = await orc.run(blueprint(tool("e", "echo", {"value": 0}), outputs={"x": "{{ 1 / e.value }}"}))
    assert record.status == "failed"
    assert record.error["code"] == "template_error"
    assert record.nodes["e"].status == "succeeded"


async def test_condition_inside_a_loop_body(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint({"id": "l", "type": "loop", "items": [1, 5, 2, 8], "body": [
        {"id": "big", "type": "condition", "expression": "item > 3", "true_path": ["yes"], "false_path": ["no"]},
        tool("yes", "echo", {"value": "big {{ item }}"}),
        tool("no", "echo", {"value": "small {{ item }}"}),
    ], "output": "{{ yes.value if yes else no.value }}"})
    record = await orc.run(bp)
    assert record.nodes["l"].output == {"results": ["small 1", "big 5", "small 2", "big 8"], "count": 4}


async def test_on_error_continue_inside_a_loop_body(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint({"id": "l", "type": "loop", "items": ["ok", "boom"], "body": [
        tool("try_it", "boom", {"message": "{{ item }}"}, on_error="continue")]})
    record = await orc.run(bp)
    assert record.status == "succeeded"
    assert record.nodes["l"].output["results"] == [
        {"error": {"code": "node_error", "message": "RuntimeError: ok", "details": {"type": "RuntimeError"}}},
        {"error": {"code": "node_error", "message": "RuntimeError: boom", "details": {"type": "RuntimeError"}}},
    ]


async def test_failure_inside_a_loop_fails_the_loop_and_cancels_other_items(orc: Orchestrator,
                                                                              tools: Registry) -> None:
    started = asyncio.Event()
    cancelled: list[int] = []

    async def work(i: int) -> dict[str, int]:
        if i == 1:
            await started.wait()
            raise RuntimeError("item 1 broke")
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(i)
            raise
        return {"i": i}

    tools.add_tool(work)
    bp = blueprint({"id": "l", "type": "loop", "items": [0, 1, 2], "concurrency": 3,
                    "body": [tool("w", "work", {"i": "{{ item }}"})]}, tool("after", "echo", dependencies=["l"]))
    record = await asyncio.wait_for(orc.run(bp), 5)
    assert record.status == "failed"
    assert root_error(record.error) == {"code": "node_error", "message": "RuntimeError: item 1 broke",
                                        "details": {"type": "RuntimeError"}}
    assert sorted(cancelled) == [0, 2]
    assert statuses(record) == {"l": "failed", "after": "cancelled"}


async def test_recursive_over_a_registered_workflow(orc: Orchestrator, tools: Registry) -> None:
    orc.register_blueprint(blueprint(tool("e", "echo", {"value": "{{ inputs.n + 1 }}"}), name="inc",
                                     inputs={"type": "object", "properties": {"n": {"type": "integer"}}},
                                     outputs={"n": "{{ e.value }}"}))
    bp = blueprint({"id": "r", "type": "recursive", "workflow_ref": "inc", "max_iterations": 10,
                    "inputs": {"n": "{{ previous.n if previous else inputs.start }}"},
                    "convergence_condition": "previous.n >= 5"},
                   inputs={"type": "object", "properties": {"start": {"type": "integer"}}})
    record = await orc.run(bp, {"start": 2})
    assert record.nodes["r"].output == {"converged": True, "iterations": 3, "output": {"n": 5},
                                        "reason": "condition_met"}


async def test_a_tool_raising_cancellederror_itself_does_not_hang_the_run(orc: Orchestrator,
                                                                          tools: Registry) -> None:
    # regression: the node was never settled and the run waited forever
    async def leaks_cancel() -> None:
        raise asyncio.CancelledError("inner task")  # e.g. an inner task of a library was cancelled

    tools.add_tool(leaks_cancel)
    handle = await orc.start(blueprint(tool("c", "leaks_cancel", retries=2, backoff_seconds=0), tool("e", "echo")))
    try:
        record = await asyncio.wait_for(handle.wait(), 5)
    finally:
        handle.cancel()
    assert record.status == "failed"
    assert record.nodes["c"].status == "failed"
    assert record.nodes["c"].attempts == 1
    assert record.nodes["c"].error == {"code": "cancelled_by_node",
                                       "message": "the node raised CancelledError: inner task"}


async def test_parallel_max_concurrency(orc: Orchestrator, registry: Registry) -> None:
    running = 0
    peak = 0

    async def work(i: int) -> dict[str, int]:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(100):  # stay until a second branch runs beside this one (the last one runs alone)
            if running >= 2 or i == 4:
                break
            await asyncio.sleep(0.001)
        for _ in range(5):
            await asyncio.sleep(0)
        running -= 1
        return {"i": i}

    registry.add_tool(work)
    bp = blueprint({"id": "p", "type": "parallel", "max_concurrency": 2,
                    "branches": [[tool(f"w{i}", "work", {"i": i})] for i in range(5)]})
    record = await orc.run(bp)
    assert peak == 2
    assert record.nodes["p"].output == {"branches": [{"i": i} for i in range(5)]}


async def test_a_failing_event_listener_does_not_break_the_run(orc: Orchestrator, tools: Registry) -> None:
    def bad_listener(event: Any) -> None:
        raise ValueError("listener bug")

    handle = await orc.start(blueprint(tool("e", "echo", {"value": 1})), on_event=bad_listener)
    record = await asyncio.wait_for(handle.wait(), 5)
    assert record.status == "succeeded"
    assert record.nodes["e"].output == {"value": 1}


async def test_a_tool_mutating_its_arguments_does_not_change_the_blueprint(orc: Orchestrator,
                                                                           registry: Registry) -> None:
    def grab(items: list[int]) -> dict[str, Any]:
        items.append(99)
        return {"items": items}

    registry.add_tool(grab)
    plan = orc.compile(blueprint(tool("g", "grab", {"items": [1, 2]})))
    first = await orc.run(plan)
    second = await orc.run(plan)
    assert first.nodes["g"].output == {"items": [1, 2, 99]}
    assert second.nodes["g"].output == {"items": [1, 2, 99]}


@pytest.mark.parametrize("value", [None, 123, 4.5, [1, 2], "", "   ", "null", "[]"])
def test_validate_odd_values_returns_a_parse_error(orc: Orchestrator, value: Any) -> None:
    report = orc.validate(value)
    assert not report.ok
    assert [e.code for e in report.errors] == ["parse_error"]


async def test_handle_wait_with_timeout_returns_the_live_record(orc: Orchestrator, registry: Registry) -> None:
    release = asyncio.Event()

    async def gate() -> dict[str, bool]:
        await release.wait()
        return {"ok": True}

    registry.add_tool(gate)
    handle = await orc.start(blueprint(tool("g", "gate")))
    partial = await handle.wait(timeout=0.01)
    assert partial.status == "running"
    assert not handle.done
    release.set()
    final = await asyncio.wait_for(handle.wait(), 5)
    assert final.status == "succeeded"
    assert [r.run_id for r in orc.list_runs(status="succeeded")] == [handle.run_id]


async def test_sub_graphs_reading_outer_nodes_make_their_container_wait(orc: Orchestrator,
                                                                         tools: Registry) -> None:
    bp = blueprint(
        {"id": "l", "type": "loop", "items": [1, 2], "body": [tool("b", "echo", {"value": "{{ src.value + item }}"})]},
        {"id": "p", "type": "parallel", "branches": [[tool("x", "echo", {"value": "{{ src.value }}"})]]},
        {"id": "r", "type": "recursive", "max_iterations": 2, "convergence_condition": "previous.value == src.value",
         "body": [tool("y", "echo", {"value": "{{ src.value }}"})]},
        tool("src", "echo", {"value": 10}),
    )
    plan = orc.compile(bp)
    assert {n: plan.graph.nodes[n].deps for n in ("l", "p", "r", "src")} == \
        {"l": ("src",), "p": ("src",), "r": ("src",), "src": ()}
    record = await orc.run(plan)
    assert record.status == "succeeded"
    assert record.nodes["l"].output == {"results": [{"value": 11}, {"value": 12}], "count": 2}
    assert record.nodes["p"].output == {"branches": [{"value": 10}]}
    assert record.nodes["r"].output["iterations"] == 1


def test_gate_cycle_is_reported(orc: Orchestrator, tools: Registry) -> None:
    report = orc.validate(blueprint(
        {"id": "c", "type": "condition", "expression": "x.value", "true_path": ["x"]}, tool("x", "echo")))
    assert [e.code for e in report.errors] == ["cycle"]


async def test_a_node_that_finishes_while_being_cancelled_keeps_its_result(orc: Orchestrator,
                                                                           tools: Registry) -> None:
    # regression: the runner marked it cancelled after it had succeeded, and the run failed (internal_error)
    started = asyncio.Event()

    async def finishes_anyway() -> dict[str, bool]:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(0.01)  # e.g. a Temporal activity whose result was already on its way
        return {"done": True}

    async def waits() -> None:
        await asyncio.sleep(30)

    tools.add_tool(finishes_anyway)
    tools.add_tool(waits)
    # Two first nodes: each runs in a task of its own, which the runner cancels when the run is cancelled.
    handle = await orc.start(blueprint(tool("f", "finishes_anyway"), tool("w", "waits"),
                                       tool("e", "echo", dependencies=["f", "w"])))
    await asyncio.wait_for(started.wait(), 5)
    assert handle.cancel()
    record = await asyncio.wait_for(handle.wait(), 5)
    assert record.status == "cancelled", record.error
    assert record.nodes["f"].status == "succeeded" and record.nodes["f"].output == {"done": True}
    assert record.nodes["w"].status == "cancelled" and record.nodes["e"].status == "cancelled"
