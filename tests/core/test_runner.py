"""The runner: skips and joins, retries, timeouts, on_error, cancellation, concurrency, budget, events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ice_mcp import InputsInvalid, NodeFailure, NodeResult, Orchestrator, Registry, Settings, Usage
from ice_mcp.core.runner import backoff_delay

from .helpers import blueprint, statuses, tool


@pytest.fixture
def tools(registry: Registry) -> Registry:
    def echo(value: Any = None) -> dict[str, Any]:
        return {"value": value}

    def boom(message: str = "boom") -> None:
        raise RuntimeError(message)

    registry.add_tool(echo)
    registry.add_tool(boom)
    return registry


class Flaky:
    """A tool failing `failures` times, then succeeding; counts its calls."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def __call__(self) -> dict[str, int]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError(f"failure {self.calls}")
        return {"calls": self.calls}


def add_flaky(registry: Registry, failures: int) -> Flaky:
    flaky = Flaky(failures)

    async def flaky_tool() -> dict[str, int]:
        return await flaky()

    registry.add_tool(flaky_tool, name="flaky")
    return flaky


@pytest.fixture
async def sleepless(registry: Registry, settings: Settings) -> AsyncIterator[tuple[Orchestrator, list[float]]]:
    """An orchestrator whose backoff sleeps are recorded, never slept."""
    slept: list[float] = []

    async def record_sleep(seconds: float) -> None:
        slept.append(seconds)

    orchestrator = Orchestrator(registry=registry, settings=settings, sleep=record_sleep)
    yield orchestrator, slept
    await orchestrator.aclose()


# -- skipping and joining ---------------------------------------------------


async def test_branch_not_taken_skips_descendants_and_join_runs(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint(
        {"id": "cond", "type": "condition", "expression": "inputs.go", "true_path": ["yes"], "false_path": ["no"]},
        tool("yes", "echo", {"value": "Y"}),
        tool("after_yes", "echo", {"value": "{{ yes.value }}!"}),
        tool("no", "echo", {"value": "N"}),
        tool("join", "echo", {"value": "{{ [after_yes, no] }}"}),
    )
    record = await orc.run(bp, {"go": False})
    assert record.status == "succeeded"
    assert statuses(record) == {"cond": "succeeded", "yes": "skipped", "after_yes": "skipped", "no": "succeeded",
                                "join": "succeeded"}
    # a skipped node reads as none
    assert record.nodes["join"].output == {"value": [None, {"value": "N"}]}


async def test_all_dependencies_skipped_skips_the_node(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint(
        {"id": "cond", "type": "condition", "expression": "false", "true_path": ["a", "b"]},
        tool("a", "echo"), tool("b", "echo"),
        tool("both", "echo", dependencies=["a", "b"]),
        tool("free", "echo", dependencies=["cond"]),
    )
    record = await orc.run(bp)
    assert statuses(record) == {"cond": "succeeded", "a": "skipped", "b": "skipped", "both": "skipped",
                                "free": "succeeded"}
    kinds = [(e.type, e.node_id) for e in orc.get_handle(record.run_id).events.events if e.type == "node_skipped"]
    assert sorted(kinds) == [("node_skipped", "a"), ("node_skipped", "b"), ("node_skipped", "both")]


async def test_dependencies_inferred_from_templates(orc: Orchestrator, tools: Registry) -> None:
    # `late` is declared first but reads `early`: it must run after it.
    bp = blueprint(tool("late", "echo", {"value": "{{ early.value }}+"}), tool("early", "echo", {"value": "e"}))
    plan = orc.compile(bp)
    assert plan.graph.nodes["late"].deps == ("early",)
    handle = await orc.start(bp)
    record = await handle.wait()
    assert record.nodes["late"].output == {"value": "e+"}
    order = [e.node_id for e in handle.events.events if e.type == "node_succeeded"]
    assert order == ["early", "late"]


# -- retries and backoff ----------------------------------------------------


@pytest.mark.parametrize(("kind", "expected"), [
    ("fixed", [0.5, 0.5, 0.5, 0.5]),
    ("linear", [0.5, 1.0, 1.5, 2.0]),
    ("exponential", [0.5, 1.0, 2.0, 4.0]),
])
def test_backoff_delay(kind: str, expected: list[float]) -> None:
    assert [backoff_delay(kind, 0.5, attempt) for attempt in (1, 2, 3, 4)] == expected


async def test_retries_count_attempts_without_sleeping(orc: Orchestrator, registry: Registry) -> None:
    flaky = add_flaky(registry, failures=2)
    record = await orc.run(blueprint(tool("f", "flaky", retries=3, backoff_seconds=0)))
    assert record.status == "succeeded"
    assert flaky.calls == 3
    assert record.nodes["f"].attempts == 3
    assert record.nodes["f"].output == {"calls": 3}
    retrying = [e for e in orc.get_handle(record.run_id).events.events if e.type == "node_retrying"]
    assert [(e.node_id, e.attempt, e.data["delay_seconds"]) for e in retrying] == [("f", 1, 0.0), ("f", 2, 0.0)]
    assert retrying[0].data["error"] == {"code": "node_error", "message": "ConnectionError: failure 1",
                                         "details": {"type": "ConnectionError"}}


@pytest.mark.parametrize(("kind", "delays"), [
    ("fixed", [2.0, 2.0, 2.0]),
    ("linear", [2.0, 4.0, 6.0]),
    ("exponential", [2.0, 4.0, 8.0]),
])
async def test_backoff_kinds_use_the_injected_sleep(sleepless: tuple[Orchestrator, list[float]],
                                                    registry: Registry, kind: str, delays: list[float]) -> None:
    orc, slept = sleepless
    flaky = add_flaky(registry, failures=3)
    record = await orc.run(blueprint(tool("f", "flaky", retries=3, backoff_seconds=2, backoff=kind)))
    assert record.status == "succeeded"
    assert record.nodes["f"].attempts == 4
    assert flaky.calls == 4
    assert slept == delays


async def test_retries_exhausted_fail_with_the_last_error(sleepless: tuple[Orchestrator, list[float]],
                                                          registry: Registry) -> None:
    orc, slept = sleepless
    flaky = add_flaky(registry, failures=10)
    record = await orc.run(blueprint(tool("f", "flaky", retries=2, backoff_seconds=1)))
    assert record.status == "failed"
    assert flaky.calls == 3
    assert record.nodes["f"].attempts == 3
    assert record.nodes["f"].error == {"code": "node_error", "message": "ConnectionError: failure 3",
                                       "details": {"type": "ConnectionError"}}
    assert slept == [1.0, 2.0]


async def test_non_retryable_failure_is_not_retried(orc: Orchestrator, registry: Registry) -> None:
    calls = []

    def refuse() -> None:
        calls.append(1)
        raise NodeFailure("no point retrying", code="bad_request", retryable=False)

    registry.add_tool(refuse)
    record = await orc.run(blueprint(tool("r", "refuse", retries=5, backoff_seconds=0)))
    assert record.status == "failed"
    assert len(calls) == 1
    assert record.nodes["r"].attempts == 1
    assert record.nodes["r"].error == {"code": "bad_request", "message": "no point retrying"}


# -- timeouts ---------------------------------------------------------------


async def test_timeout_per_attempt(orc: Orchestrator, registry: Registry) -> None:
    cancelled: list[int] = []

    async def stuck() -> dict[str, Any]:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(1)
            raise
        return {}

    registry.add_tool(stuck)
    record = await asyncio.wait_for(
        orc.run(blueprint(tool("s", "stuck", timeout_seconds=0.05, retries=1, backoff_seconds=0))), 5)
    assert record.status == "failed"
    assert record.nodes["s"].attempts == 2
    assert record.nodes["s"].error == {"code": "timeout", "message": "attempt timed out after 0.05 s"}
    assert cancelled == [1, 1]


async def test_tool_raising_timeouterror_is_not_mistaken_for_the_node_timeout(orc: Orchestrator,
                                                                              registry: Registry) -> None:
    def own_timeout() -> None:
        raise TimeoutError("upstream timed out")

    registry.add_tool(own_timeout)
    record = await orc.run(blueprint(tool("t", "own_timeout", timeout_seconds=5)))
    assert record.nodes["t"].error == {"code": "node_error", "message": "TimeoutError: upstream timed out",
                                       "details": {"type": "TimeoutError"}}


async def test_whole_run_timeout(orc: Orchestrator, registry: Registry) -> None:
    async def stuck() -> dict[str, Any]:
        await asyncio.sleep(10)
        return {}

    registry.add_tool(stuck)
    registry.add_tool(lambda: {"ok": True}, name="quick")
    bp = blueprint(tool("q", "quick"), tool("s", "stuck"), tool("after", "quick", dependencies=["s"]),
                   timeout_seconds=0.05)
    record = await asyncio.wait_for(orc.run(bp), 5)
    assert record.status == "timed_out"
    assert record.error == {"code": "timed_out", "message": "run exceeded 0.05 s"}
    assert statuses(record) == {"q": "succeeded", "s": "cancelled", "after": "cancelled"}


# -- on_error ---------------------------------------------------------------


async def test_on_error_continue_gives_error_output_and_dependents_run(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint(tool("bad", "boom", {"message": "kaput"}, on_error="continue"),
                   tool("next", "echo", {"value": "{{ bad.error.code }}: {{ bad.error.message }}"}))
    record = await orc.run(bp)
    assert record.status == "succeeded"
    assert record.nodes["bad"].status == "failed"
    assert record.nodes["bad"].output == {"error": {"code": "node_error", "message": "RuntimeError: kaput",
                                                    "details": {"type": "RuntimeError"}}}
    assert record.nodes["next"].output == {"value": "node_error: RuntimeError: kaput"}


async def test_on_error_fail_fails_run_and_cancels_running_siblings(orc: Orchestrator, tools: Registry) -> None:
    sibling_started = asyncio.Event()
    seen: list[str] = []

    async def sibling() -> dict[str, Any]:
        sibling_started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return {}

    async def fail_later() -> None:
        await sibling_started.wait()
        raise RuntimeError("bad")

    tools.add_tool(sibling)
    tools.add_tool(fail_later)
    bp = blueprint(tool("sib", "sibling"), tool("bad", "fail_later"), tool("dep", "echo", dependencies=["bad"]))
    record = await asyncio.wait_for(orc.run(bp), 5)
    assert record.status == "failed"
    cause = {"code": "node_error", "message": "RuntimeError: bad", "details": {"type": "RuntimeError"}}
    assert record.error == {"code": "node_failed", "message": "node 'bad' failed: RuntimeError: bad",
                            "details": {"node_id": "bad", "path": ["bad"], "cause": cause, "error": cause}}
    assert seen == ["cancelled"]
    assert statuses(record) == {"sib": "cancelled", "bad": "failed", "dep": "cancelled"}


# -- cancellation -----------------------------------------------------------


async def test_cancel_mid_run(orc: Orchestrator, registry: Registry) -> None:
    before = asyncio.all_tasks()
    running = [asyncio.Event(), asyncio.Event()]
    seen: list[int] = []

    async def wait_forever(i: int) -> dict[str, Any]:
        running[i].set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append(i)
            raise
        return {}

    registry.add_tool(wait_forever)
    registry.add_tool(lambda: {}, name="noop")
    bp = blueprint(tool("a", "wait_forever", {"i": 0}), tool("b", "wait_forever", {"i": 1}),
                   tool("c", "noop", dependencies=["a", "b"]))
    handle = await orc.start(bp)
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in running)), 5)
    assert handle.record.status == "running"
    assert handle.cancel() is True
    record = await asyncio.wait_for(handle.wait(), 5)
    assert record.status == "cancelled"
    assert record.error == {"code": "cancelled", "message": "the run was cancelled"}
    assert sorted(seen) == [0, 1]
    assert statuses(record) == {"a": "cancelled", "b": "cancelled", "c": "cancelled"}
    assert handle.done and handle.cancel() is False
    assert [e.type for e in handle.events.events][-1] == "run_finished"
    await asyncio.sleep(0)  # let done-callbacks run
    assert {t for t in asyncio.all_tasks() if t.get_name() != "ice_mcp-lease"} == before  # the lease outlives runs
    assert orc.store.flush()
    assert orc.store.get(record.run_id).status == "cancelled"


async def test_orchestrator_cancel_by_run_id(orc: Orchestrator, registry: Registry) -> None:
    started = asyncio.Event()

    async def hang() -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()
        return {}

    registry.add_tool(hang)
    handle = await orc.start(blueprint(tool("h", "hang")))
    await asyncio.wait_for(started.wait(), 5)
    assert await orc.cancel(handle.run_id) is True
    assert orc.get_run(handle.run_id).status == "cancelled"
    assert await orc.cancel(handle.run_id) is False
    assert await orc.cancel("no-such-run") is False


async def test_cancelling_the_caller_of_run_cancels_the_run(orc: Orchestrator, registry: Registry) -> None:
    started = asyncio.Event()

    async def hang() -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()
        return {}

    registry.add_tool(hang)
    caller = asyncio.ensure_future(orc.run(blueprint(tool("h", "hang"))))
    await asyncio.wait_for(started.wait(), 5)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    [record] = orc.list_runs()
    assert record.status == "cancelled"
    assert record.nodes["h"].status == "cancelled"


# -- concurrency ------------------------------------------------------------


@pytest.mark.parametrize("max_parallel", [1, 2, 3])
async def test_max_parallel_is_respected(orc: Orchestrator, registry: Registry, max_parallel: int) -> None:
    running = 0
    peak = 0

    async def work() -> dict[str, int]:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(5):
            await asyncio.sleep(0)
        running -= 1
        return {"peak": peak}

    registry.add_tool(work)
    bp = blueprint(*(tool(f"w{i}", "work") for i in range(8)), max_parallel=max_parallel)
    record = await orc.run(bp)
    assert record.status == "succeeded"
    assert peak == max_parallel


async def test_loop_concurrency_is_respected(orc: Orchestrator, registry: Registry) -> None:
    running = 0
    peak = 0

    async def work(i: int) -> dict[str, int]:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(5):
            await asyncio.sleep(0)
        running -= 1
        return {"i": i}

    registry.add_tool(work)
    bp = blueprint({"id": "l", "type": "loop", "items": list(range(9)), "concurrency": 3,
                    "body": [tool("w", "work", {"i": "{{ item }}"})]})
    record = await orc.run(bp)
    assert peak == 3
    assert record.nodes["l"].output["results"] == [{"i": i} for i in range(9)]


# -- budget -----------------------------------------------------------------


async def test_budget_stops_the_run_with_spend_recorded(orc: Orchestrator, registry: Registry) -> None:
    calls: list[int] = []

    def paid(step: int) -> NodeResult:
        calls.append(step)
        return NodeResult({"step": step}, cost_usd=0.3, usage=Usage(input_tokens=10, output_tokens=5))

    registry.add_tool(paid)
    bp = blueprint(tool("a", "paid", {"step": 1}), tool("b", "paid", {"step": 2}, dependencies=["a"]),
                   tool("c", "paid", {"step": 3}, dependencies=["b"]), budget_usd=0.5)
    record = await orc.run(bp)
    assert record.status == "over_budget"
    assert record.error["code"] == "over_budget"
    assert calls == [1, 2]
    assert record.cost_usd == pytest.approx(0.6)
    assert record.usage.as_dict() == {"input_tokens": 20, "output_tokens": 10}
    assert record.nodes["a"].cost_usd == pytest.approx(0.3)
    assert record.nodes["b"].status == "succeeded"
    assert record.nodes["c"].status == "cancelled"
    data = record.to_dict()
    assert data["tokens"] == {"input_tokens": 20, "output_tokens": 10}


async def test_spend_inside_a_loop_counts_against_the_budget(orc: Orchestrator, registry: Registry) -> None:
    def paid(i: int) -> NodeResult:
        return NodeResult({"i": i}, cost_usd=0.25)

    registry.add_tool(paid)
    bp = blueprint({"id": "l", "type": "loop", "items": list(range(10)),
                    "body": [tool("p", "paid", {"i": "{{ item }}"})]}, budget_usd=1.0)
    record = await orc.run(bp)
    assert record.status == "over_budget"
    assert record.cost_usd == pytest.approx(1.0)


async def test_metered_tool_without_budget_just_records_cost(orc: Orchestrator, registry: Registry) -> None:
    registry.add_tool(lambda: NodeResult({"ok": True}, cost_usd=0.125), name="paid")
    record = await orc.run(blueprint(tool("a", "paid"), tool("b", "paid")))
    assert record.status == "succeeded"
    assert record.cost_usd == 0.25
    assert record.nodes["a"].output == {"ok": True}


# -- inputs and outputs -----------------------------------------------------


async def test_inputs_validated_before_anything_runs_and_defaults_filled(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint(tool("e", "echo", {"value": "{{ inputs.n * 2 }}"}),
                   inputs={"type": "object", "properties": {"n": {"type": "integer", "default": 4}}},
                   outputs={"twice": "{{ e.value }}", "text": "n={{ inputs.n }}"})
    record = await orc.run(bp)
    assert record.inputs == {"n": 4}
    assert record.outputs == {"twice": 8, "text": "n=4"}
    with pytest.raises(InputsInvalid) as info:
        await orc.start(bp, {"n": "four"})
    assert info.value.details == {"errors": [{"path": "n", "message": "'four' is not of type 'integer'"}]}


# -- events and metrics -----------------------------------------------------


async def test_events_in_order_and_metrics_per_node_type(orc: Orchestrator, tools: Registry) -> None:
    received: list[str] = []
    bp = blueprint(tool("a", "echo", {"value": 1}), tool("b", "echo", {"value": "{{ a.value }}"}),
                   {"id": "c", "type": "condition", "expression": "b.value == 1", "false_path": ["d"]},
                   tool("d", "echo"))
    handle = await orc.start(bp, on_event=lambda e: received.append(e.type))
    record = await handle.wait()
    events = handle.events.events
    assert [(e.type, e.node_id, e.attempt) for e in events] == [
        ("run_started", None, None),
        ("node_started", "a", 1), ("node_succeeded", "a", 1),
        ("node_started", "b", 1), ("node_succeeded", "b", 1),
        ("node_started", "c", 1), ("node_succeeded", "c", 1),
        ("node_skipped", "d", None),
        ("run_finished", None, None),
    ]
    assert received == [e.type for e in events]
    assert [e.seq for e in events] == list(range(len(events)))
    assert {e.run_id for e in events} == {record.run_id}
    assert all(isinstance(e.ts, float) for e in events)
    assert events[-1].data == {"status": "succeeded", "error": None}
    assert orc.run_events(record.run_id)[1] == {"type": "node_started", "run_id": record.run_id, "seq": 1,
                                                "ts": events[1].ts, "node_id": "a", "attempt": 1}
    snapshot = orc.metrics.snapshot()
    assert snapshot["runs"] == {"succeeded": 1}
    assert set(snapshot["node_types"]) == {"tool", "condition"}
    assert snapshot["node_types"]["tool"]["count"] == 2
    assert snapshot["node_types"]["tool"]["succeeded"] == 2
    assert snapshot["node_types"]["tool"]["failed"] == 0
    assert snapshot["node_types"]["tool"]["success_rate"] == 1.0
    assert snapshot["node_types"]["condition"]["count"] == 1


async def test_metrics_count_failures(orc: Orchestrator, tools: Registry) -> None:
    await orc.run(blueprint(tool("x", "boom", on_error="continue"), tool("y", "echo")))
    tool_metrics = orc.metrics.snapshot()["node_types"]["tool"]
    assert (tool_metrics["count"], tool_metrics["succeeded"], tool_metrics["failed"]) == (2, 1, 1)
    assert tool_metrics["success_rate"] == 0.5


async def test_nested_node_events_are_prefixed(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint({"id": "l", "type": "loop", "items": [1, 2], "body": [tool("e", "echo", {"value": "{{ item }}"})]})
    handle = await orc.start(bp)
    await handle.wait()
    succeeded = [e.node_id for e in handle.events.events if e.type == "node_succeeded"]
    assert sorted(succeeded) == ["l", "l[0].e", "l[1].e"]
    assert [e.top_level for e in handle.events.events if e.node_id == "l"] == [True, True]
    assert not next(e for e in handle.events.events if e.node_id == "l[0].e").top_level


async def test_idempotency_key_returns_the_same_run(orc: Orchestrator, tools: Registry) -> None:
    bp = blueprint(tool("e", "echo", {"value": 1}))
    first = await orc.start(bp, idempotency_key="k1")
    second = await orc.start(bp, idempotency_key="k1")
    assert first is second
    await first.wait()
    assert len(orc.list_runs()) == 1
