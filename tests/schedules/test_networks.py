"""Schedules of network manifests: named networks, slots started once across processes, overlap, declared schedules."""

from __future__ import annotations

import asyncio
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from ice_mcp import Orchestrator
from ice_mcp.errors import IceError
from ice_mcp.settings import Settings
from ice_mcp.store.records import RunRecord
from ice_mcp.tools.registry import Registry

from .test_firing import SEEN_GATE, Clock, loop_at, register, seen, store, ts

__all__ = ["seen"]  # the fixture, shared with the firing tests

ROOT = Path(__file__).resolve().parents[2]
START = ts("2026-11-26T00:00:00Z")
PAIR = {"name": "pair", "workflows": [
    {"id": "first", "ref": "report"},
    {"id": "second", "ref": "report", "after": "first"}]}


def with_pair(orc: Orchestrator, *, hold: bool = False) -> None:
    register(orc, hold=hold)
    orc.register_network(PAIR)


async def networks_done(orc: Orchestrator) -> None:
    for handle in list(orc._networks.values()):
        await handle.wait(5.0)
    assert orc.store is not None and orc.store.flush()


async def test_a_network_runs_on_its_schedule_and_every_workflow_sees_the_slot(
        orc: Orchestrator, seen: list[dict[str, Any]]) -> None:
    with_pair(orc)
    clock = Clock(START)
    loop = loop_at(orc, clock)
    created = orc.schedules.create(network="pair", inputs={}, spec={"every_seconds": 60}, schedule_id="n")
    assert created["network"] == "pair" and "workflow" not in created
    clock.now = START + 60.2
    await loop.tick()
    await networks_done(orc)
    assert seen == [{"kind": "schedule", "slot": "2026-11-26T00:01:00Z", "previous": "2026-11-26T00:00:00Z"}] * 2
    [firing] = store(orc).firings("n")
    assert firing.outcome == "started" and firing.run_id and firing.run_id.startswith("net_")
    kept = store(orc).get(firing.run_id)
    assert kept is not None and kept.status == "succeeded" and kept.trigger is not None
    assert kept.trigger["slot"] == "2026-11-26T00:01:00Z" and set(kept.nodes) == {"first", "second"}
    status = orc.network_status(firing.run_id)
    assert status is not None and status["workflows"]["second"]["status"] == "succeeded"
    assert [r.run_id for r in orc.list_runs(schedule_id="n")] == [firing.run_id]


async def test_two_servers_on_one_store_start_each_network_slot_once(
        orc: Orchestrator, registry: Registry, settings: Settings, seen: list[dict[str, Any]]) -> None:
    with_pair(orc)
    other = Orchestrator(registry=registry, settings=settings)
    try:
        other.register_network(PAIR)
        clock = Clock(START)
        loops = [loop_at(orc, clock), loop_at(other, clock)]
        orc.schedules.create(network="pair", inputs={}, spec={"every_seconds": 1}, policy={"overlap": "allow_all"},
                             schedule_id="twice")
        for step in range(1, 11):
            clock.now = START + step + 0.05
            await asyncio.gather(*(loop.tick() for loop in loops))
        await networks_done(orc)
        await networks_done(other)
        started = [f for f in store(orc).firings("twice", limit=100) if f.outcome == "started"]
        assert len(started) == 10 and len({f.run_id for f in started}) == 10
        assert len(seen) == 20  # two workflows per slot, no slot's network started twice
        assert all(sum(s["slot"] == slot for s in seen) == 2 for slot in {s["slot"] for s in seen})
    finally:
        await other.aclose()


async def test_skip_waits_for_a_network_another_server_runs_until_that_server_is_gone(
        orc: Orchestrator, registry: Registry, settings: Settings, seen: list[dict[str, Any]]) -> None:
    with_pair(orc, hold=True)
    SEEN_GATE[0].clear()
    other = Orchestrator(registry=registry, settings=settings)
    try:
        other.register_network(PAIR)
        clock = Clock(START)
        here, there = loop_at(orc, clock), loop_at(other, clock)
        orc.schedules.create(network="pair", inputs={}, spec={"every_seconds": 1}, schedule_id="k")
        clock.now = START + 1.1
        await here.tick()  # slot 1's network starts here and holds in its first workflow
        await asyncio.sleep(0.05)
        clock.now = START + 2.1
        await there.tick()  # the other server sees it running (in the store, its server alive)
        outcomes = [(f.slot - START, f.outcome) for f in reversed(store(orc).firings("k"))]
        assert outcomes == [(1.0, "started"), (2.0, "skipped_overlap")]
        [running] = store(orc).schedule("k").running  # type: ignore[union-attr]
        stored = store(orc).run(running)
        assert stored is not None and stored.record.status == "running"
        store(orc).save(stored.record, owner="a-server-that-died")  # as if its server had been SIGKILLed
        assert store(orc).flush()
        clock.now = START + 3.1
        await there.tick()  # a network is not resumed with its server: the slot starts one
        assert [f.outcome for f in store(orc).firings("k", limit=1)] == ["started"]
    finally:
        SEEN_GATE[0].set()
        await networks_done(orc)
        await networks_done(other)
        await other.aclose()


async def test_a_network_kept_without_its_manifest_ends_failed_and_says_why(orc: Orchestrator) -> None:
    record = RunRecord("net_" + "0" * 32, "pair", {}, started_at=1.0)
    store(orc).save(record, owner="a-server-that-died")
    assert store(orc).flush()
    orc.recover_interrupted_runs()
    assert store(orc).flush()
    kept = store(orc).get(record.run_id)
    assert kept is not None and kept.status == "failed" and kept.error is not None
    assert "kept without its manifest" in kept.error["message"]  # not taken for a workflow run


async def test_bad_network_schedules_are_refused_with_every_problem_and_nothing_kept(
        orc: Orchestrator, seen: list[dict[str, Any]]) -> None:
    with_pair(orc)
    with pytest.raises(IceError) as raised:
        orc.schedules.create(network="pairr", inputs={"topic": "x"}, spec={"every_seconds": 0})
    assert raised.value.code == "invalid_schedule"
    problems = {e["path"]: e["message"] for e in raised.value.details["errors"]}
    assert "'pair'" in problems["network"] and "no inputs" in problems["inputs"]
    assert any(p.startswith("spec") for p in problems)
    with pytest.raises(IceError) as both:
        orc.schedules.create(workflow="report", network="pair", inputs={}, spec={"every_seconds": 5})
    assert both.value.code == "invalid_schedule"
    assert store(orc).schedules() == []


async def test_the_bundled_networks_declare_their_schedules_and_the_nightly_one_runs(
        orc: Orchestrator, settings: Settings) -> None:
    (settings.workspace / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "sales.csv", settings.workspace / "examples" / "sales.csv")
    assert orc.load_blueprints(ROOT / "blueprints") == []
    assert {"nightly_report", "weekly_sales_report"} <= set(orc.networks)
    weekly = orc.schedules.get("weekly_sales_report")
    assert weekly["network"] == "weekly_sales_report" and weekly["origin"] == "declared"
    assert weekly["spec"]["timezone"] == "Europe/Paris"
    for fire in weekly["next_fires"][:3]:  # Mondays at 09:00 in Paris, whatever the offset that week
        local = datetime.fromisoformat(fire["local"])
        assert (local.weekday(), local.hour, local.minute) == (0, 9, 0) and str(local.utcoffset()) in (
            "1:00:00", "2:00:00")
    assert orc.load_blueprints(ROOT / "blueprints") == []  # served again: the same schedules, unchanged
    assert orc.schedules.get("nightly_report")["revision"] == 1
    fired = await orc.schedules.trigger("nightly_report")
    await networks_done(orc)
    result = orc.network_status(fired["run_id"])
    assert result is not None and result["status"] == "succeeded", result
    assert (settings.workspace / "reports" / "nightly.md").is_file()
