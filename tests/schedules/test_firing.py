"""The firing loop with an injected clock, on a real SQLite run store: DST, catch-up, overlap, pause, triggers."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from ice_mcp import Orchestrator
from ice_mcp.errors import IceError
from ice_mcp.schedules.firing import FiringLoop
from ice_mcp.store.base import RunStorage
from ice_mcp.tools.registry import Registry


class Clock:
    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


SEEN: list[dict[str, Any]] = []


@pytest.fixture
def seen(registry: Registry) -> Iterator[list[dict[str, Any]]]:
    """A side-effecting tool that records the trigger each run saw; `hold` keeps a run going until set."""
    SEEN.clear()
    gate = asyncio.Event()
    gate.set()

    async def record(kind: str, slot: str, previous: str, hold: bool = False) -> dict[str, Any]:
        SEEN.append({"kind": kind, "slot": slot, "previous": previous})
        if hold:
            await gate.wait()
        return {"slot": slot}

    registry.add_tool(record)
    SEEN_GATE.append(gate)
    yield SEEN
    gate.set()
    SEEN_GATE.clear()


SEEN_GATE: list[asyncio.Event] = []


def register(orc: Orchestrator, *, hold: bool = False) -> None:
    orc.register_blueprint({
        "name": "report", "inputs": {"type": "object", "properties": {"topic": {"type": "string"}}},
        "nodes": [{"id": "r", "type": "tool", "tool_name": "record", "tool_args": {
            "kind": "{{ trigger.kind }}", "slot": "{{ trigger.slot }}",
            "previous": "{{ trigger.previous_slot }}", "hold": hold}}]})


def loop_at(orc: Orchestrator, clock: Clock) -> FiringLoop:
    orc.schedules.clock = clock
    assert orc.store is not None
    return FiringLoop(orc, orc.store, clock=clock)


async def settle(orc: Orchestrator) -> None:
    """Let the runs started so far finish."""
    for handle in orc.engine.runs.values():
        await handle.wait(5.0)
    assert orc.store is not None and orc.store.flush()


def store(orc: Orchestrator) -> RunStorage:
    assert orc.store is not None
    return orc.store


async def test_cron_in_new_york_fires_once_on_the_night_clocks_fall_back_and_preview_agrees(
        orc: Orchestrator, seen: list[dict[str, Any]]) -> None:
    register(orc)
    clock = Clock(ts("2026-10-31T12:00:00Z"))
    loop = loop_at(orc, clock)
    created = orc.schedules.create(workflow="report", inputs={}, spec={"cron": "30 1 * * *",
                                   "timezone": "America/New_York"}, schedule_id="nightly")
    preview = orc.schedules.preview({"cron": "30 1 * * *", "timezone": "America/New_York"}, 3,
                                    "2026-10-31T12:00:00Z")
    assert [f["at"] for f in created["next_fires"]] == [f["at"] for f in preview["fires"]]
    while clock.now < ts("2026-11-02T12:00:00Z"):  # every 10 minutes through both nights
        clock.now += 600
        await loop.tick()
        await settle(orc)  # a run ends before the next night (the default overlap policy is skip)
    fired = [f for f in store(orc).firings("nightly", limit=100) if f.outcome == "started"]
    slots = sorted(datetime.fromtimestamp(f.slot, UTC).isoformat() for f in fired)
    assert [f["at"] for f in preview["fires"][:2]] == [s.replace("+00:00", "Z") for s in slots]
    on_first = [s for s in slots if s.startswith("2026-11-01")]
    assert len(on_first) == 1  # 01:30 EDT once, not again at 01:30 EST
    assert sorted(s["slot"] for s in seen) == [s.replace("+00:00", "Z") for s in slots]


async def test_a_time_in_the_skipped_hour_fires_at_the_end_of_the_gap(orc: Orchestrator,
                                                                     seen: list[dict[str, Any]]) -> None:
    register(orc)
    clock = Clock(ts("2026-03-07T12:00:00Z"))
    loop = loop_at(orc, clock)
    orc.schedules.create(workflow="report", inputs={}, spec={"cron": "30 2 * * *", "timezone": "America/New_York"},
                         schedule_id="gap")
    while clock.now < ts("2026-03-08T12:00:00Z"):
        clock.now += 300
        await loop.tick()
    await settle(orc)
    assert [s["slot"] for s in seen] == ["2026-03-08T07:00:00Z"]  # 03:00 EDT, the end of the gap


@pytest.mark.parametrize(("mode", "runs", "missed"), [("latest", 1, 9), ("none", 0, 10), ("all", 5, 5)])
async def test_catch_up_after_every_server_was_down_for_ten_slots(orc: Orchestrator, seen: list[dict[str, Any]],
                                                                  mode: str, runs: int, missed: int) -> None:
    register(orc)
    start = ts("2026-11-26T00:00:00Z")
    clock = Clock(start)
    loop = loop_at(orc, clock)
    policy = {"catchup": {"mode": mode, "max_runs": 5}, "overlap": "allow_all"}
    orc.schedules.create(workflow="report", inputs={}, spec={"every_seconds": 1}, policy=policy, schedule_id="c")
    clock.now = start + 10.7  # slots 1..10 passed, the newest 0.7 s ago: late for a 1 s schedule
    await loop.tick()
    await settle(orc)
    firings = store(orc).firings("c", limit=100)
    started = sorted(f.slot - start for f in firings if f.outcome == "started")
    assert len(started) == runs == len(seen)
    if mode == "latest":
        assert started == [10.0]
    if mode == "all":
        assert started == [6.0, 7.0, 8.0, 9.0, 10.0]
    rows = [f for f in firings if f.outcome == "missed"]
    assert len(rows) == 1 and rows[0].count == missed  # one row for the stretch, not a row per slot
    assert orc.schedules.get("c")["counts"].get("missed") == missed


START = ts("2026-11-26T00:00:00Z")


async def three_held_slots(orc: Orchestrator, schedule_id: str, overlap: str) -> tuple[FiringLoop, Clock]:
    """A 1 s schedule whose runs hold until released, ticked through slots 1, 2 and 3."""
    register(orc, hold=True)
    SEEN_GATE[0].clear()
    clock = Clock(START)
    loop = loop_at(orc, clock)
    orc.schedules.create(workflow="report", inputs={}, spec={"every_seconds": 1}, policy={"overlap": overlap},
                         schedule_id=schedule_id)
    for step in range(1, 4):
        clock.now = START + step + 0.1
        await loop.tick()
        await asyncio.sleep(0.05)
    return loop, clock


def outcomes(orc: Orchestrator, schedule_id: str) -> list[tuple[float, str]]:
    return [(f.slot - START, f.outcome) for f in reversed(store(orc).firings(schedule_id, limit=10))]


async def test_skip_never_runs_two_at_once_and_records_the_skipped_slots(orc: Orchestrator,
                                                                         seen: list[dict[str, Any]]) -> None:
    loop, clock = await three_held_slots(orc, "k", "skip")
    assert outcomes(orc, "k") == [(1.0, "started"), (2.0, "skipped_overlap"), (3.0, "skipped_overlap")]
    assert len(seen) == 1
    SEEN_GATE[0].set()
    await settle(orc)
    clock.now = START + 4.1
    await loop.tick()
    await settle(orc)
    assert [f.outcome for f in store(orc).firings("k", limit=1)] == ["started"]
    assert len(seen) == 2


async def test_allow_all_overlaps(orc: Orchestrator, seen: list[dict[str, Any]]) -> None:
    await three_held_slots(orc, "a", "allow_all")
    assert len(seen) == 3  # three runs at once, all still held
    assert len(store(orc).schedule("a").running) == 3  # type: ignore[union-attr]
    SEEN_GATE[0].set()


async def test_buffer_one_keeps_one_slot_and_drops_the_rest(orc: Orchestrator, seen: list[dict[str, Any]]) -> None:
    loop, _ = await three_held_slots(orc, "b", "buffer_one")
    assert outcomes(orc, "b") == [(1.0, "started"), (2.0, "buffered"), (3.0, "buffer_dropped")]
    SEEN_GATE[0].set()
    await settle(orc)
    await loop.tick()  # the run ended: the buffered slot starts now
    await settle(orc)
    assert [s["slot"] for s in seen] == ["2026-11-26T00:00:01Z", "2026-11-26T00:00:02Z"]
    assert store(orc).firings("b", limit=10, outcome="buffered") == []


async def test_every_slot_gets_its_trigger_and_previous_slot(orc: Orchestrator, seen: list[dict[str, Any]]) -> None:
    register(orc)
    start = ts("2026-11-26T00:00:00Z")
    clock = Clock(start)
    loop = loop_at(orc, clock)
    orc.schedules.create(workflow="report", inputs={}, spec={"every_seconds": 60}, schedule_id="m")
    for minute in (1, 2):
        clock.now = start + 60 * minute + 0.2
        await loop.tick()
        await settle(orc)
    assert seen[1] == {"kind": "schedule", "slot": "2026-11-26T00:02:00Z", "previous": "2026-11-26T00:01:00Z"}
    records = store(orc).list(workflow="report")
    assert {r.trigger["slot"] for r in records if r.trigger} == {"2026-11-26T00:01:00Z", "2026-11-26T00:02:00Z"}


async def test_two_loops_on_one_store_fire_each_slot_once(orc: Orchestrator, registry: Registry, settings: Any,
                                                         seen: list[dict[str, Any]]) -> None:
    register(orc)
    other = Orchestrator(registry=registry, settings=settings)
    try:
        start = ts("2026-11-26T00:00:00Z")
        clock = Clock(start)
        loops = [loop_at(orc, clock), loop_at(other, clock)]
        orc.schedules.create(workflow="report", inputs={}, spec={"every_seconds": 1}, policy={"overlap": "allow_all"},
                             schedule_id="twice")
        for step in range(1, 21):
            clock.now = start + step + 0.05
            await asyncio.gather(*(loop.tick() for loop in loops))
        await settle(orc)
        await settle(other)
        started = [f for f in store(orc).firings("twice", limit=100) if f.outcome == "started"]
        assert len(started) == 20 and len({f.run_id for f in started}) == 20
        assert sorted(s["slot"] for s in seen) == sorted({s["slot"] for s in seen})  # no slot ran twice
        assert len(seen) == 20
    finally:
        await other.aclose()


async def test_a_sleeping_loop_wakes_for_a_schedule_another_process_made(orc: Orchestrator, registry: Registry,
                                                                         settings: Any,
                                                                         seen: list[dict[str, Any]]) -> None:
    register(orc)
    other = Orchestrator(registry=registry, settings=settings)
    try:
        loop = FiringLoop(orc, store(orc))  # the store's (real) clock: it sleeps its idle 30 s
        loop.start()
        await asyncio.sleep(0.2)  # its first tick found nothing: it now sleeps until its idle look
        assert orc.schedules.loop is None and other.schedules.loop is None  # no poke reaches `loop`
        other.schedules.create(workflow="report", inputs={}, spec={"every_seconds": 1}, schedule_id="elsewhere")
        for _ in range(100):  # the generation is read every 0.5 s; the next whole second's slot fires here
            if any(f.outcome == "started" for f in store(orc).firings("elsewhere")):
                break
            await asyncio.sleep(0.05)
        await loop.stop()
        started = [f for f in store(orc).firings("elsewhere", limit=10) if f.outcome == "started"]
        assert started and started[0].replica == orc.owner.owner_id and len(seen) >= 1
    finally:
        await other.aclose()


async def test_pause_resume_trigger_and_delete(orc: Orchestrator, seen: list[dict[str, Any]]) -> None:
    register(orc)
    start = ts("2026-11-26T00:00:00Z")
    clock = Clock(start)
    loop = loop_at(orc, clock)
    orc.schedules.create(workflow="report", inputs={}, spec={"every_seconds": 1}, schedule_id="p")
    orc.schedules.pause("p", "maintenance")
    clock.now = start + 5.2
    await loop.tick()
    assert store(orc).firings("p") == []
    resumed = orc.schedules.resume("p")
    assert resumed["state"] == {"paused": False, "note": None}
    rows = store(orc).firings("p")
    assert [(r.outcome, r.count) for r in rows] == [("paused", 5)]
    fired = await orc.schedules.trigger("p")
    await settle(orc)
    assert seen[-1]["slot"] == fired["slot"]
    assert orc.schedules.delete("p") == {"id": "p", "deleted": True}
    with pytest.raises(IceError) as raised:
        orc.schedules.get("p")
    assert raised.value.code == "unknown_schedule"


async def test_bad_input_is_refused_with_every_problem_and_nothing_kept(orc: Orchestrator,
                                                                        seen: list[dict[str, Any]]) -> None:
    register(orc)
    with pytest.raises(IceError) as raised:
        orc.schedules.create(workflow="reprot", inputs={"topik": 1}, spec={"cron": "61 * * * *",
                             "timezone": "Europe/Pari"}, policy={"overlap": "sometimes"})
    assert raised.value.code == "invalid_schedule"
    paths = [e["path"] for e in raised.value.details["errors"]]
    assert any(p.startswith("spec") and "cron" in p for p in paths)
    assert any("timezone" in p for p in paths)
    assert any(p.startswith("policy") for p in paths)
    assert "workflow" in paths
    assert "Europe/Paris" in str(raised.value.details)
    assert store(orc).schedules() == []
    orc.schedules.create(workflow="report", inputs={}, spec={"every_seconds": 5}, schedule_id="r")
    with pytest.raises(IceError) as stale:
        orc.schedules.update("r", spec={"every_seconds": 10}, if_revision=7)
    assert stale.value.code == "stale_revision"
    assert orc.schedules.get("r")["spec"]["every_seconds"] == 5


async def test_a_blueprint_declares_its_schedules_by_stable_ids(orc: Orchestrator, seen: list[dict[str, Any]],
                                                                tmp_path: Any) -> None:
    declared = {"name": "morning", "nodes": [{"id": "r", "type": "tool", "tool_name": "record", "tool_args": {
        "kind": "{{ trigger.kind }}", "slot": "{{ trigger.slot }}", "previous": "{{ trigger.previous_slot }}"}}],
        "schedules": [{"spec": {"cron": "0 9 * * *", "timezone": "Europe/Paris"}},
                      {"id": "weekends", "spec": {"cron": "0 10 * * SAT,SUN"}, "policy": {"overlap": "allow_all"}}]}
    orc.register_blueprint(declared)
    kept = {s.id: s for s in store(orc).schedules(target="morning")}
    assert set(kept) == {"morning", "weekends"} and {s.origin for s in kept.values()} == {"declared"}
    assert kept["weekends"].policy["overlap"] == "allow_all"
    orc.register_blueprint(declared)  # the same again (every server start): nothing changes
    assert store(orc).schedule("morning").revision == 1  # type: ignore[union-attr]
    changed = {**declared, "schedules": [{"spec": {"cron": "30 9 * * *", "timezone": "Europe/Paris"}}]}
    orc.register_blueprint(changed)
    assert store(orc).schedule("morning").revision == 2  # type: ignore[union-attr]
    assert store(orc).schedule("weekends") is None  # no longer declared: gone
    folder = tmp_path / "declared"
    folder.mkdir()
    broken = {**declared, "name": "broken", "schedules": [{"spec": {"cron": "0 25 * * *"}}]}
    (folder / "broken.json").write_text(json.dumps(broken))
    problems = orc.load_blueprints(folder)
    assert [p.code for p in problems] == ["invalid_schedule"] and "broken" in problems[0].message
    assert store(orc).schedules(target="broken") == []


async def test_a_machine_clock_off_the_stores_is_told_once(orc: Orchestrator, seen: list[dict[str, Any]],
                                                          caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock(time.time() + 30)  # the store's clock 30 s ahead of this machine's
    loop = loop_at(orc, clock)
    with caplog.at_level("WARNING", logger="ice_mcp.schedules.firing"):
        await loop.tick()
        await loop.tick()
    told = [r.getMessage() for r in caplog.records if "clock" in r.getMessage()]
    assert len(told) == 1 and "30" in told[0]


async def test_backfill_claims_the_decided_slots_without_a_run_and_leaves_later_ones_to_the_loop(
        orc: Orchestrator, seen: list[dict[str, Any]]) -> None:
    register(orc)
    clock = Clock(START)
    loop = loop_at(orc, clock)
    orc.schedules.create(workflow="report", inputs={}, spec={"every_seconds": 60}, schedule_id="bf")
    orc.schedules.pause("bf")
    clock.now = START + 5 * 60 + 1
    orc.schedules.resume("bf")  # slots 1..5 passed while paused: one `paused` row, at slot 5
    slot = [f"2026-11-26T00:0{n}:00Z" for n in range(10)]
    filled = await orc.schedules.backfill("bf", slot[0], slot[8])  # slots 6..8 are still to come
    await settle(orc)
    # Slot 0 came as the schedule was made (never fired): a backfill is for such slots too.
    assert [s["slot"] for s in filled["started"]] == slot[0:5]
    assert filled["slots"] == 9 and filled["later_slots"] == 3
    assert sorted(s["slot"] for s in seen) == slot[0:5]
    previous = [s["previous"] for s in sorted(seen, key=lambda s: s["slot"])]
    assert previous == ["2026-11-25T23:59:00Z", *slot[0:4]]  # the nominal slot before each
    again = await orc.schedules.backfill("bf", slot[0], slot[8])  # every decided slot has its firing now
    assert again["started"] == [] and len(seen) == 5
    clock.now = START + 6 * 60 + 0.5
    await loop.tick()  # the loop fires slot 6 as usual: the backfill did not take it
    await settle(orc)
    assert [s["slot"] for s in seen][-1] == slot[6]
