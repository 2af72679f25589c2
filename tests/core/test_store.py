"""Run records survive the process: re-open the store and read them back."""

from __future__ import annotations

from typing import Any

from ice_mcp import NodeResult, Orchestrator, Registry, Settings, Usage
from ice_mcp.store.records import NodeRecord, RunRecord
from ice_mcp.store.sqlite import RunStore

from .helpers import blueprint, tool


def make_registry() -> Registry:
    registry = Registry()
    registry.add_tool(lambda value=None: {"value": value}, name="echo")
    registry.add_tool(lambda: NodeResult({"paid": True}, cost_usd=0.02, usage=Usage(3, 4)), name="paid")
    return registry


async def test_record_read_back_after_reopening(settings: Settings) -> None:
    first = Orchestrator(registry=make_registry(), settings=settings)
    record = await first.run(blueprint(tool("a", "echo", {"value": "{{ inputs.v }}"}), tool("p", "paid"),
                                       name="persisted", outputs={"v": "{{ a.value }}"}), {"v": [1, 2]})
    expected = record.to_dict()
    events = first.run_events(record.run_id)
    await first.aclose()

    second = Orchestrator(registry=make_registry(), settings=settings)
    try:
        again = second.get_run(record.run_id)
        assert again is not None
        assert again.to_dict() == expected
        assert expected["status"] == "succeeded"
        assert expected["outputs"] == {"v": [1, 2]}
        assert expected["cost_usd"] == 0.02
        assert expected["tokens"] == {"input_tokens": 3, "output_tokens": 4}
        assert expected["nodes"]["p"]["tokens"] == {"input_tokens": 3, "output_tokens": 4}
        assert set(expected) == {"run_id", "workflow", "status", "inputs", "outputs", "error", "cost_usd", "tokens",
                                 "started_at", "finished_at", "duration_ms", "nodes"}
        assert set(expected["nodes"]["a"]) == {"status", "attempts", "duration_ms", "output", "error", "cost_usd",
                                               "tokens"}
        assert second.run_events(record.run_id) == events
        assert events[0]["type"] == "run_started"
        assert events[-1]["type"] == "run_finished"
        assert [r.run_id for r in second.list_runs(workflow="persisted")] == [record.run_id]
        assert second.list_runs(status="failed") == []
        assert second.get_run("nope") is None
        assert second.run_events("nope") == []
    finally:
        await second.aclose()


async def test_idempotency_key_survives_a_restart(settings: Settings) -> None:
    first = Orchestrator(registry=make_registry(), settings=settings)
    handle = await first.start(blueprint(tool("a", "echo")), idempotency_key="once")
    await handle.wait()
    await first.aclose()
    second = Orchestrator(registry=make_registry(), settings=settings)
    try:
        again = await second.start(blueprint(tool("a", "echo")), idempotency_key="once")
        assert again.run_id == handle.run_id
        assert again.done
        assert again.record.status == "succeeded"
    finally:
        await second.aclose()


def test_record_round_trip() -> None:
    record = RunRecord(run_id="x", workflow="w", inputs={"a": 1}, status="over_budget", outputs={"o": [1]},
                       error={"code": "over_budget", "message": "m"}, cost_usd=1.5, usage=Usage(1, 2),
                       started_at=1_700_000_000.25, finished_at=1_700_000_001.5, duration_ms=1250.0,
                       nodes={"n": NodeRecord(status="succeeded", attempts=2, duration_ms=3.0, output={"k": "v"},
                                              cost_usd=0.5, usage=Usage(5, 6))})
    data: dict[str, Any] = record.to_dict()
    assert data["started_at"] == "2023-11-14T22:13:20.250+00:00"
    assert RunRecord.from_dict(data).to_dict() == data


def test_store_list_filters_and_orders(tmp_path: Any) -> None:
    store = RunStore(tmp_path / "runs.db")
    for i, (workflow, status) in enumerate([("a", "succeeded"), ("b", "failed"), ("a", "failed")]):
        store.save(RunRecord(run_id=f"r{i}", workflow=workflow, inputs={}, status=status, started_at=float(i)),
                   idempotency_key=f"k{i}")
    assert store.flush()
    assert [r.run_id for r in store.list()] == ["r2", "r1", "r0"]
    assert [r.run_id for r in store.list(workflow="a")] == ["r2", "r0"]
    assert [r.run_id for r in store.list(status="failed", workflow="a")] == ["r2"]
    assert [r.run_id for r in store.list(limit=1)] == ["r2"]
    assert store.by_idempotency_key("k1") == "r1"
    assert store.by_idempotency_key("zz") is None
    store.close()
