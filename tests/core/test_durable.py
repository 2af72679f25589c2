"""Durable runs in one process: the journal, resume by idempotency key, retry, kept blueprints, a store
that survives any value."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from ice_mcp import Orchestrator, Registry, Settings, current_call
from ice_mcp.errors import IceError, UnknownName
from ice_mcp.store.journal import replay_from_events
from ice_mcp.store.records import RunRecord
from ice_mcp.store.sqlite import RunStore

from .helpers import blueprint, tool

SIX = blueprint(*[tool(f"n{i}", "count", {"label": f"n{i}"}, **({"dependencies": [f"n{i - 1}"]} if i > 1 else {}))
                  for i in range(1, 7)], name="six", outputs={"last": "{{ n6.label }}"})


class Counted:
    """A tool that counts its executions and fails on the labels in `failing`."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.failing: set[str] = set()
        self.keys: list[str] = []

    def __call__(self, label: str) -> dict[str, Any]:
        self.calls[label] += 1
        call = current_call()
        self.keys.append(call.idempotency_key if call else "")
        if label in self.failing:
            raise RuntimeError(f"{label} is broken")
        return {"label": label}


@pytest.fixture
def counted(registry: Registry) -> Counted:
    counter = Counted()
    registry.add_tool(counter.__call__, name="count")
    return counter


async def test_retry_reruns_only_the_failed_node_and_what_follows(orc: Orchestrator, counted: Counted) -> None:
    counted.failing = {"n4"}
    failed = await orc.run(SIX)
    assert failed.status == "failed"
    assert counted.calls == Counter({"n1": 1, "n2": 1, "n3": 1, "n4": 1})

    counted.failing = set()
    counted.calls.clear()
    retried = await (await orc.retry(failed.run_id)).wait()
    assert retried.status == "succeeded", retried.error
    assert counted.calls == Counter({"n4": 1, "n5": 1, "n6": 1})
    assert retried.run_id != failed.run_id and retried.retry_of == failed.run_id
    assert retried.outputs == {"last": "n6"}
    assert retried.nodes["n1"].output == {"label": "n1"}  # reused from the failed run's journal
    assert retried.to_dict()["retry_of"] == failed.run_id
    # The retry journals what it reused, so a crash of the retry itself resumes without running n1-n3.
    journal = orc.run_events(retried.run_id)
    assert journal[0]["type"] == "run_started" and journal[0]["data"]["retry_of"] == failed.run_id
    reused = [e["node_id"] for e in journal if e.get("data", {}).get("reused_from") == failed.run_id]
    assert reused == ["n1", "n2", "n3"]
    assert set(replay_from_events(journal).outcomes) == {f"n{i}" for i in range(1, 7)}


async def test_retry_from_a_node_reruns_it_and_its_dependents(orc: Orchestrator, counted: Counted) -> None:
    first = await orc.run(SIX)
    counted.calls.clear()
    again = await (await orc.retry(first.run_id, "n5")).wait()
    assert again.status == "succeeded"
    assert counted.calls == Counter({"n5": 1, "n6": 1})
    with pytest.raises(UnknownName):
        await orc.retry(first.run_id, "n55")
    with pytest.raises(UnknownName):
        await orc.retry("no-such-run")


async def test_retry_refuses_a_run_still_going(orc: Orchestrator, registry: Registry) -> None:
    gate = asyncio.Event()

    async def wait() -> dict[str, Any]:
        await gate.wait()
        return {}

    registry.add_tool(wait)
    handle = await orc.start(blueprint(tool("w", "wait")))
    with pytest.raises(IceError) as refused:
        await orc.retry(handle.run_id)
    assert refused.value.code == "run_not_finished"
    gate.set()
    await handle.wait()


async def test_the_journal_is_kept_as_the_run_goes(orc: Orchestrator, registry: Registry, counted: Counted) -> None:
    gate = asyncio.Event()

    async def wait() -> dict[str, Any]:
        await gate.wait()
        return {"waited": True}

    registry.add_tool(wait)
    handle = await orc.start(blueprint(tool("a", "count", {"label": "a"}), tool("w", "wait", dependencies=["a"])))
    while getattr(handle.record.nodes.get("w"), "status", None) != "running":
        await asyncio.sleep(0.01)
    assert orc.store is not None and orc.store.flush()
    kept = orc.store.events(handle.run_id)
    assert [(e["type"], e.get("node_id")) for e in kept] == [
        ("run_started", None), ("node_started", "a"), ("node_succeeded", "a"), ("node_started", "w")]
    assert kept[2]["data"]["output"] == {"label": "a"}
    assert orc.store.get(handle.run_id).status == "running"  # type: ignore[union-attr]
    gate.set()
    await handle.wait()


async def test_a_key_whose_server_stopped_resumes_that_run(settings: Settings, counted: Counted,
                                                          registry: Registry) -> None:
    gate = asyncio.Event()

    async def wait() -> dict[str, Any]:
        await gate.wait()
        return {"waited": True}

    registry.add_tool(wait)
    bp = blueprint(tool("a", "count", {"label": "a"}), tool("w", "wait", dependencies=["a"]), name="gated")
    first = Orchestrator(registry=registry, settings=settings)
    handle = await first.start(bp, idempotency_key="k1")
    while getattr(handle.record.nodes.get("w"), "status", None) != "running":
        await asyncio.sleep(0.01)
    await first.aclose(suspend=True)  # a server shutting down: the run stays `running`, its lease given up

    second = Orchestrator(registry=registry, settings=settings)
    try:
        assert second.store is not None and second.store.get(handle.run_id).status == "running"  # type: ignore[union-attr]
        gate.set()
        again = await second.start(bp, idempotency_key="k1")
        assert again.run_id == handle.run_id
        record = await again.wait()
        assert record.status == "succeeded"
        assert counted.calls == Counter({"a": 1})  # finished before the stop: not run again
        events = second.run_events(handle.run_id)
        assert [e["seq"] for e in events] == list(range(len(events)))
        assert "run_resumed" in [e["type"] for e in events]
    finally:
        await second.aclose()


async def test_registered_blueprints_are_kept_with_versions(settings: Settings, registry: Registry,
                                                            counted: Counted) -> None:
    first = Orchestrator(registry=registry, settings=settings)
    first.register_blueprint(SIX)
    first.register_blueprint(SIX)  # the same again: no new version
    first.register_blueprint({**SIX, "description": "second version"})
    record = await first.run("six")
    assert record.workflow_version == 2
    await first.aclose()

    registry.remove("workflow", "six")
    second = Orchestrator(registry=registry, settings=settings)
    try:
        assert second.restore_blueprints() == ["six"]
        assert second.registry.workflows["six"].blueprint.description == "second version"
        assert second.registry.workflows["six"].version == 2
        assert (await second.run("six")).status == "succeeded"
        assert second.store is not None
        assert [v.version for v in second.store.blueprint_versions("six")] == [1, 2]
        assert second.remove_workflow("six") is True
        assert second.restore_blueprints() == []
    finally:
        await second.aclose()


async def test_runs_are_listed_newest_first(orc: Orchestrator, counted: Counted) -> None:
    ids = [(await orc.run(SIX)).run_id for _ in range(3)]
    assert orc.store is not None and orc.store.flush()
    assert [r.run_id for r in orc.store.list(workflow="six")] == ids[::-1]


def test_the_store_keeps_any_value_and_survives_a_bad_row(tmp_path: Any) -> None:
    store = RunStore(tmp_path / "runs.sqlite3")
    huge = {"n": 2**64, "big": 9**99, "nan": float("nan")}
    store.save(RunRecord(run_id="r1", workflow="w", inputs=huge, started_at=1.0))
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    store.save(RunRecord(run_id="r2", workflow="w", inputs=cyclic, started_at=2.0))
    store.save(RunRecord(run_id="r3", workflow="w", inputs={"ok": True}, started_at=3.0))
    assert store.flush(timeout=10)
    kept = store.get("r1")
    assert kept is not None and kept.inputs["n"] == 2**64 and kept.inputs["big"] == 9**99
    assert store.get("r2") is None  # unstorable: reported, and the rows around it are kept
    assert store.write_errors == 1 and "r3" in {r.run_id for r in store.list()}
    assert store.last_write_error is not None
    store.save(RunRecord(run_id="r4", workflow="w", inputs={}, started_at=4.0))  # the writer goes on
    assert store.flush(timeout=10) and store.get("r4") is not None
    store.close()


async def test_a_run_producing_a_huge_number_is_kept(orc: Orchestrator, registry: Registry) -> None:
    registry.add_tool(lambda: {"n": 18446744073709551616}, name="huge")
    record = await orc.run(blueprint(tool("h", "huge")))
    assert record.status == "succeeded"
    assert orc.store is not None and orc.store.flush()
    assert orc.store.get(record.run_id).nodes["h"].output == {"n": 18446744073709551616}  # type: ignore[union-attr]
    assert orc.store.events(record.run_id)[2]["data"]["output"] == {"n": 18446744073709551616}
